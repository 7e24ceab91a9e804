"""``credprovider doctor`` on the commonest broken node: a kubeadm node still on the in-tree
``--cloud-provider`` (or the removed login gate) whose kubelet is running, crash-looping or
stopped, with or without a credential provider config. Every verdict names the in-tree flag as the
cause and ``credprovider migrate`` (with the node's own flags file) as the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from credprovider.tool.node.layouts import KUBEADM_FLAGS_ENV
from release.bundle import REPO
from tests.helpers import config_file, fake_kubelet, provider_entry
from tests.integration.cli.conftest import doctor

GATE = "DisableKubeletCloudCredentialProviders"


def _checks(report: dict[str, Any], status: str) -> list[dict[str, str]]:
    return [c for c in report["checks"] if c["status"] == status]


def _kubeadm_root(root: Path, flags: str) -> Path:
    flags_file = root / KUBEADM_FLAGS_ENV.lstrip("/")
    flags_file.parent.mkdir(parents=True)
    flags_file.write_text(f'KUBELET_KUBEADM_ARGS="{flags}"\n')
    return root


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            "--container-runtime-endpoint=unix:///run/containerd/containerd.sock "
            "--cloud-provider=aws --pod-infra-container-image=registry.k8s.io/pause:3.10",
            "--cloud-provider=aws",
        ),
        (f"--feature-gates={GATE}=false", f"{GATE}=false"),
    ],
    ids=["cloud-provider", "gate"],
)
def test_a_stopped_in_tree_node_is_named_and_sent_to_migrate(
    tmp_path: Path, flags: str, said: str
) -> None:
    """Before: "no running kubelet and no known layout names a credential provider config",
    with nothing of the in-tree flag, the gate or migrate."""
    root = _kubeadm_root(tmp_path / "node", flags)
    code, report = doctor("--root", str(root), "--offline")
    assert code == 1
    assert report["foundBy"].startswith("layout kubeadm")
    node = [c for c in _checks(report, "fail") if c["area"] == "node"]
    assert len(node) == 1, report
    assert (
        said in node[0]["message"] and "no --image-credential-provider-config" in node[0]["message"]
    )
    assert node[0]["fix"].startswith(
        f"credprovider migrate --kubelet-flags-file {KUBEADM_FLAGS_ENV}"
    )
    # the cloud pairing says why the next kubelet will not start, with the same command
    kubelet = [c for c in report["checks"] if c["area"] == "kubelet" and c["status"] != "info"]
    assert kubelet and all(KUBEADM_FLAGS_ENV in c["fix"] for c in kubelet), kubelet


def test_an_in_tree_node_with_a_config_gets_the_same_fix(tmp_path: Path) -> None:
    root = _kubeadm_root(
        tmp_path / "node",
        "--cloud-provider=aws --image-credential-provider-config=/etc/kubernetes/cp.json "
        "--image-credential-provider-bin-dir=/opt/cp",
    )
    (root / "opt/cp").mkdir(parents=True)
    (root / "etc/kubernetes").mkdir(parents=True)
    config_file(root / "etc/kubernetes", provider_entry()).rename(root / "etc/kubernetes/cp.json")
    _, report = doctor("--root", str(root), "--offline")
    pairing = [c for c in report["checks"] if c["area"] == "kubelet" and "aws" in c["message"]]
    assert pairing and pairing[0]["status"] == "warn", report  # the version is not known here
    assert f"migrate --kubelet-flags-file {KUBEADM_FLAGS_ENV}" in pairing[0]["fix"]


def test_a_running_in_tree_kubelet_without_a_config_is_sent_to_migrate(tmp_path: Path) -> None:
    """Before: "install a config and bin dir (credprovider install)", which leaves the in-tree
    flag that stops the next kubelet."""
    kubelet = fake_kubelet(["--cloud-provider=gce", "--kubeconfig=/nonexistent"], dict(os.environ))
    try:
        _, report = doctor("--offline")
    finally:
        kubelet.kill()
    node = [c for c in _checks(report, "fail") if c["area"] == "node"]
    assert len(node) == 1 and "--cloud-provider=gce" in node[0]["message"], report
    assert node[0]["fix"].startswith("credprovider migrate")
    assert "credprovider install" not in node[0]["fix"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a private mount namespace")
@pytest.mark.parametrize(
    ("version", "status"), [("v1.32.4", "fail"), ("v1.30.2", "warn"), ("v1.26.3", "info")]
)
def test_a_crash_looping_kubelet_is_judged_by_its_installed_version(
    tmp_path: Path, version: str, status: str
) -> None:
    """No kubelet process (systemd restarting it, or stopped): the version of the kubelet binary
    the node's unit runs decides, here in a mount namespace where /var/lib/kubelet and
    /usr/local/bin are the test's."""
    varlib = tmp_path / "varlib"
    (varlib / "kubelet").mkdir(parents=True)
    (varlib / "kubelet/kubeadm-flags.env").write_text(
        'KUBELET_KUBEADM_ARGS="--cloud-provider=aws"\n'
    )
    local_bin = tmp_path / "localbin"
    local_bin.mkdir()
    kubelet = local_bin / "kubelet"
    kubelet.write_text(f'#!/bin/sh\necho "Kubernetes {version}"\n')
    kubelet.chmod(0o755)
    script = (
        'mount -t tmpfs -o mode=0755 run /run && mount --bind "$1" /var/lib && '
        'mount --bind "$2" /usr/local/bin && shift 2 && exec "$@"'
    )
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--propagation", "private",
         "--mount-proc", "sh", "-c", script, "sh", str(varlib), str(local_bin),
         sys.executable, "-m", "credprovider", "credprovider", "doctor", "--json", "--offline"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    assert report["kubeletVersion"] == version
    said = [c for c in report["checks"] if "--cloud-provider=aws" in c["message"]]
    pairing = [c for c in said if c["area"] == "kubelet"]
    assert [c["status"] for c in pairing] == [status], report
    if status == "fail":
        assert "does not start" in pairing[0]["message"]
    # an older kubelet still starts with it: what to do before it is upgraded past 1.31
    where = pairing[0]["message" if status == "info" else "fix"]
    assert f"migrate --kubelet-flags-file {KUBEADM_FLAGS_ENV}" in where

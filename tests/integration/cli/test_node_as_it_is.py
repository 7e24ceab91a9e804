"""Verdicts true for the node as it is: ``--root`` follows an install's links inside the root,
``get`` runs the plugins in the running kubelet's environment, what this user cannot read is a
verdict of its own (never a default), and an image no configured provider serves is no failure."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from release.bundle import BUNDLE_DIR
from tests.helpers import (
    config_file,
    fake_kubelet,
    private,
    provider_entry,
    require_bundle,
    run_cli,
)
from tests.integration.cli.conftest import ECR_IMAGE, doctor, fake_bundle


def test_root_follows_an_installs_absolute_links_inside_the_root(tmp_path: Path) -> None:
    """The README's tarball install links each plugin name to /opt/credprovider-VERSION: under
    --root that is the image's /opt, never this machine's (before: 'cannot be started: no such
    file or directory', a FAIL for a node that is right)."""
    root = tmp_path / "image"
    fake_bundle(root / "opt/credprovider-0.1.0", "0.1.0")
    bin_dir = root / "etc/kubernetes/image-credential-provider"
    bin_dir.mkdir(parents=True)
    for name in ("ecr-credential-provider", "auth-provider-gcp"):
        (bin_dir / name).symlink_to(f"/opt/credprovider-0.1.0/{name}")
    config = config_file(root / "etc/kubernetes", provider_entry())
    code, report = doctor(
        "--root", str(root), "--offline",
        "--config", f"/etc/kubernetes/{config.name}",
        "--bin-dir", "/etc/kubernetes/image-credential-provider",
    )  # fmt: skip
    binary = [c for c in report["checks"] if c["area"] == "binary"]
    assert code == 0 and [c["status"] for c in binary] == ["pass"], binary
    assert "version 0.1.0 (credprovider)" in binary[0]["message"]


PROXY = "http://proxy.internal.example:3128"
# A plugin that answers with the proxy it was given as its username: what it inherited.
ECHO_PLUGIN = """#!/bin/sh
cat >/dev/null
printf '{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1",\
"cacheKeyType":"Registry","auth":{"registry.example":{"username":"%s","password":"x"}}}' \
"${HTTPS_PROXY:-none}"
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a fake kubelet needs root")
@pytest.mark.parametrize(("chosen", "seen"), [((), PROXY), (("--environment", "this"), "none")])
def test_get_runs_the_plugins_in_the_running_kubelets_environment(
    tmp_path: Path, chosen: tuple[str, ...], seen: str
) -> None:
    """A proxy (or AWS_REGION) set in the kubelet's unit reaches its plugins: get gives the
    answer the kubelet gets (before: this shell's environment, another answer)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = bin_dir / "echo-plugin"
    plugin.write_text(ECHO_PLUGIN)
    plugin.chmod(0o755)
    config = config_file(
        tmp_path, provider_entry(name="echo-plugin", matchImages=["registry.example"])
    )
    shell = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    kubelet = fake_kubelet([], {**shell, "HTTPS_PROXY": PROXY})
    try:
        done = run_cli(
            "get", "registry.example/app", "--config", str(config), "--bin-dir", str(bin_dir),
            "--json", *chosen, env=shell,
        )  # fmt: skip
    finally:
        kubelet.kill()
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)["providers"][0]["response"]
    assert answer["auth"]["registry.example"]["username"] == seen
    if not chosen:
        assert "inherit the environment of the running kubelet (pid 1)" in done.stderr


def test_an_image_of_a_cloud_no_configured_provider_is_is_a_warning(tmp_path: Path) -> None:
    """A static pod from another cloud's registry, on a node configured for ECR only: pulled
    anonymously or with a pull secret, which is legal (before: a FAIL whose fix, a matchImages
    pattern on a provider the config does not have, could not be applied). The same image's
    host missed by a configured provider's matchImages stays a FAIL."""
    (tmp_path / "bin").mkdir()
    ecr_only = config_file(tmp_path, provider_entry())

    def image_check(image: str) -> dict[str, str]:
        _, report = doctor(
            "--offline", "--config", str(ecr_only), "--bin-dir", str(tmp_path / "bin"),
            "--image", image,
        )  # fmt: skip
        [said] = [c for c in report["checks"] if c["area"] == "image"]
        return dict(said)

    said = image_check("us-docker.pkg.dev/project/repo/app:v1")
    assert said["status"] == "warn"
    assert "no configured provider is auth-provider-gcp" in said["message"]
    said = image_check("123456789012.dkr.ecr.us-east-1.amazonaws.com:8443/team/app")
    assert said["status"] == "fail" and "although ecr-credential-provider serves" in said["message"]


NOBODY = 65534


def _as_nobody_on(etc: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The bundle's credprovider as ``nobody``, in a mount namespace whose /etc is ``etc``."""
    command = [
        "sh", "-c", 'mount --bind "$0" /etc && exec "$@"', str(etc),
        "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
        str(BUNDLE_DIR / "credprovider"), *args,
    ]  # fmt: skip
    return subprocess.run(
        private(command), capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )  # fmt: skip


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a private mount namespace")
def test_a_default_path_hidden_from_this_user_is_no_verdict(tmp_path: Path) -> None:
    """/etc/kubernetes root's and 0700, the config at the default path inside: as nobody, every
    command that looks for the node's config says it cannot read it, exit 2 (before: validate and
    get said nothing is at the default path, explain answered from the shipped matchImages)."""
    require_bundle()
    etc = Path(tempfile.mkdtemp(prefix="credprovider-etc-"))
    try:
        etc.chmod(0o755)
        (etc / "kubernetes").mkdir(mode=0o700)
        config_file(etc / "kubernetes", provider_entry()).rename(
            etc / "kubernetes/image-credential-provider-config.yaml"
        )
        for args in (["validate"], ["get", ECR_IMAGE], ["explain", ECR_IMAGE]):
            done = _as_nobody_on(etc, *args)
            assert (done.returncode, done.stdout) == (2, ""), (args, done)
            # the first path under the hidden directory a layout or the default names
            assert re.fullmatch(
                f"credprovider {args[0]}: cannot read /etc/kubernetes/\\S+ as uid {NOBODY} "
                r"\(permission denied\): run this command as root, as the kubelet runs\n",
                done.stderr,
            ), (args, done.stderr)
    finally:
        shutil.rmtree(etc)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become nobody")
def test_doctor_root_with_a_layout_hidden_from_this_user_is_no_verdict(tmp_path: Path) -> None:
    """An EKS image whose /etc/eks is root's and 0700: as nobody, doctor --root gives no verdict
    (exit 2, 'run it as root'), never "no known layout" (before: a FAIL and exit 1)."""
    require_bundle()
    image = Path(tempfile.mkdtemp(prefix="credprovider-image-"))
    try:
        image.chmod(0o755)
        config = image / "etc/eks/image-credential-provider/config.json"
        config.parent.mkdir(parents=True)
        config_file(config.parent, provider_entry()).rename(config)
        (image / "etc/eks").chmod(0o700)
        done = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
             str(BUNDLE_DIR / "credprovider"), "doctor", "--root", str(image), "--offline",
             "--json"],
            capture_output=True, text=True, timeout=120, check=False,
            env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
        )  # fmt: skip
        assert done.returncode == 2, done
        report = json.loads(done.stdout)
        assert report["ok"] is False and f"as uid {NOBODY}" in report["undecided"]
        assert [c for c in report["checks"] if c["status"] == "fail"] == []
        assert "no known layout" not in done.stdout
    finally:
        shutil.rmtree(image)

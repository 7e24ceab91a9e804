"""``credprovider render``: the lasting way of a platform whose node the agent may not change
(issue #61), rendered and then tested as that platform would apply it.

* Talos: the patch's ``machine.kubelet.credentialProviderConfig`` is a config the kubelet starts
  with (``credprovider validate``, the kubelet's own rules).
* OpenShift: the MachineConfig's files decoded onto the OpenShift fixture node (tests/platformnodes:
  the MCO's unit, its config path, OpenShift's own ECR plugin); its boot script run there as systemd
  would before the kubelet, in a mount namespace of the test's own (a real overlay mount): at the
  first boot OpenShift's own plugin shows through and a plugin it lacks is a placeholder, so the
  kubelet's every provider has its binary; once the chart's agent (mode files) placed the bundle,
  the next boot runs ours from the kubelet's read-only plugin dir.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from credprovider.tool.agent.lasting import (
    OPENSHIFT_CONFIGS,
    OPENSHIFT_PLUGIN_DIR,
    OPENSHIFT_SCRIPT,
    OPENSHIFT_UNIT,
)
from release.bundle import REPO
from tests.helpers import private, run_cli
from tests.integration.cli.conftest import fake_bundle
from tests.platformnodes import openshift

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts and chroot need root")


def test_the_talos_patch_holds_a_config_the_kubelet_starts_with(tmp_path: Path) -> None:
    done = run_cli("render", "talos", "--providers", "aws,gcp")
    assert done.returncode == 0, done.stderr
    patch = yaml.safe_load(done.stdout)
    config = patch["machine"]["kubelet"]["credentialProviderConfig"]
    assert [p["name"] for p in config["providers"]] == [
        "ecr-credential-provider",
        "auth-provider-gcp",
    ]
    written = tmp_path / "kubelet-credentialproviderconfig.yaml"
    written.write_text(yaml.safe_dump(config))
    checked = run_cli("validate", str(written))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_render_refuses_what_it_cannot_render_in_one_line() -> None:
    done = run_cli("render", "openshift", "--providers", "aws,quay", "--cloud", "aws")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "credprovider render openshift: --providers takes a comma list of aws, azure, gcp, registries "
        "(not quay)"
    ]
    done = run_cli("render", "openshift", "--providers", "aws", "--cloud", "vsphere")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "credprovider render openshift: --cloud takes aws, azure, gcp, none (not vsphere)"
    ]
    # the role names the MachineConfig (a DNS subdomain) and is a label value: oc apply refused
    # what "Worker" or "a b" printed
    for role in ("Worker", "a b", "w/x", "x" * 64, "infra-"):
        done = run_cli(
            "render", "openshift", "--providers", "aws", "--cloud", "aws", "--role", role
        )
        assert done.returncode == 2 and done.stdout == "" and "is not a pool role" in done.stderr
    done = run_cli("render", "openshift", "--providers", "aws", "--cloud", "aws", "--role", "infra")
    assert done.returncode == 0 and "name: 99-infra-credprovider" in done.stdout
    assert done.stderr == ""  # a custom pool's role, as given
    # one slip from a pool the MCO makes: printed as asked (a custom pool may be named so), and
    # said, since a MachineConfig no pool selects reaches no node
    for role, pool in (("wroker", "worker"), ("mastr", "master")):
        done = run_cli(
            "render", "openshift", "--providers", "aws", "--cloud", "aws", "--role", role
        )
        assert done.returncode == 0 and f"name: 99-{role}-credprovider" in done.stdout
        assert done.stderr == (
            f"credprovider render openshift: note: --role '{role}' is one slip from the MCO's "
            f"pool '{pool}': a MachineConfig reaches only the nodes of a pool whose role it names, "
            "and none if no pool has this one\n"
        )


@pytest.mark.parametrize(
    ("settings", "kubelet_says"),
    [
        ('{"aws": {"defaultCacheDuration": "1e3h"}}', 'time: unknown unit "e" in duration "1e3h"'),
        ('{"gcp": {"matchImages": ["gcr.io", "a b"]}}', 'providers.matchImages: Invalid value: "a b"'),
        ('{"aws": {"tokenAttributes": {"serviceAccountTokenAudience": "sts.amazonaws.com", '
         '"requireServiceAccount": true}}}', "providers.tokenAttributes.cacheType: Required value"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("platform", [["talos"], ["openshift", "--cloud", "aws"]])
def test_a_config_the_kubelet_would_not_start_with_is_never_printed(
    settings: str, kubelet_says: str, platform: list[str]
) -> None:
    """Talos and the MCO write the rendered config for the kubelet at every boot: one the kubelet
    refuses would stop every node it is applied to. Validated as the kubelet validates it at start
    (as install and the agent validate theirs): nothing on stdout, one line with its message."""
    done = run_cli("render", *platform, "--providers", "aws,gcp", "--provider-settings", settings)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"credprovider render {platform[0]}: nothing printed: ")
    assert kubelet_says in line and line.endswith("(fix --provider-settings)")


def machineconfig(providers: str, cloud: str) -> dict[str, Any]:
    done = run_cli("render", "openshift", "--providers", providers, "--cloud", cloud)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = yaml.safe_load(done.stdout)
    return found


def files_of(document: dict[str, Any]) -> dict[str, tuple[str, int]]:
    """The MachineConfig's files: path -> (text, mode), decoded as Ignition does."""
    found = {}
    for entry in document["spec"]["config"]["storage"]["files"]:
        source = entry["contents"]["source"]
        head, _, data = source.partition(",")
        assert head == "data:text/plain;charset=utf-8;base64", head
        found[entry["path"]] = (base64.b64decode(data).decode(), entry["mode"])
    return found


def boot(root: Path, then: str = "") -> subprocess.CompletedProcess[str]:
    """One boot of the node under ``root``, in a mount namespace of its own: its /proc and the
    host's programs bound in (the fixture has none), the unit's script run chrooted as systemd
    runs it before the kubelet; then ``then``, also chrooted."""
    binds = [d for d in ("/bin", "/sbin", "/lib", "/lib64", "/usr/bin", "/usr/sbin", "/usr/lib",
                         "/usr/lib64")
             if os.path.isdir(d) and not os.path.islink(d)]  # fmt: skip
    lines = ["set -e"]
    for directory in binds:
        inside = shlex.quote(str(root / directory.lstrip("/")))
        lines += [f"mkdir -p {inside}", f"mount --bind {directory} {inside}"]
    for link in ("/bin", "/sbin", "/lib", "/lib64"):
        if os.path.islink(link) and not os.path.lexists(root / link.lstrip("/")):
            os.symlink(os.readlink(link), root / link.lstrip("/"))
    lines += [
        f"mkdir -p {shlex.quote(str(root / 'proc'))}",
        f"mount -t proc proc {shlex.quote(str(root / 'proc'))}",
        f"chroot {shlex.quote(str(root))} {OPENSHIFT_SCRIPT}",
        then,
    ]
    return subprocess.run(
        private(["sh", "-c", "\n".join(lines)]),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_openshift_machineconfig_puts_ours_over_openshifts_plugins(tmp_path: Path) -> None:
    document = machineconfig("aws,azure", "aws")
    assert document["kind"] == "MachineConfig"
    assert document["metadata"]["name"] == "99-worker-credprovider"  # after the MCO's 01-…
    assert document["spec"]["config"]["ignition"]["version"] == "3.2.0"
    [unit] = document["spec"]["config"]["systemd"]["units"]
    assert unit["name"] == OPENSHIFT_UNIT and unit["enabled"] is True
    assert "Before=kubelet.service" in unit["contents"].splitlines()
    assert f"ExecStart={OPENSHIFT_SCRIPT}" in unit["contents"].splitlines()
    files = files_of(document)
    assert set(files) == {OPENSHIFT_CONFIGS["aws"], OPENSHIFT_SCRIPT}
    config, mode = files[OPENSHIFT_CONFIGS["aws"]]
    assert mode == 0o644 and "/etc/kubernetes/cloud.conf" in config  # OpenShift's ACR file

    node = openshift()
    root = node.build(tmp_path / "node")
    assert node.config == OPENSHIFT_CONFIGS["aws"]  # the file the MCO's kubelet flags name
    for path, (text, mode) in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)
    checked = run_cli("validate", str(root / node.config.lstrip("/")))
    assert checked.returncode == 0, checked.stdout + checked.stderr

    plugins = root / OPENSHIFT_PLUGIN_DIR.lstrip("/")
    report = (
        f"{shlex.quote(sys.executable)} -m credprovider credprovider doctor --json --root "
        f"{shlex.quote(str(root))} > {shlex.quote(str(tmp_path / 'doctor.json'))} || true"
    )
    # the first boot: no bundle yet; OpenShift's own ECR plugin shows through, ACR a placeholder
    first = boot(root, f"ls -l {shlex.quote(str(plugins))}; PYTHONPATH={REPO} {report}")
    assert first.returncode == 0, first.stderr
    listed = first.stdout
    assert (
        "ecr-credential-provider" in listed
        and "-> /var/lib/credprovider/openshift/placeholder" in listed
    )
    said = yaml.safe_load((tmp_path / "doctor.json").read_text())
    assert (said["config"], said["binDir"]) == (node.config, node.bin_dir), said
    missing = [c for c in said["checks"] if "not found" in str(c.get("message", ""))]
    assert missing == [], missing
    assert not (plugins / "placeholder").exists()  # the overlay was this boot's alone

    # the chart's agent (mode files) places the bundle; the next boot runs ours
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    placed = run_cli(
        "agent", "apply", "--files-only", "--bin-dir", "/var/lib/credprovider/agent/bin",
        "--config", "/var/lib/credprovider/agent/config.yaml", "--bundle", str(bundle),
        "--providers", "aws,azure", "--root", str(root),
    )  # fmt: skip
    assert placed.returncode == 0, placed.stdout + placed.stderr
    second = boot(
        root,
        f"chroot {shlex.quote(str(root))} {OPENSHIFT_PLUGIN_DIR}/ecr-credential-provider --version",
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "ecr-credential-provider version 0.1.0 (credprovider)"
    # nothing of OpenShift's own is changed on disk: its plugin is where it was, as it was
    assert (plugins / "ecr-credential-provider").read_text() == node.files[
        f"{OPENSHIFT_PLUGIN_DIR}/ecr-credential-provider"
    ]


@pytest.mark.parametrize("platform", [["talos"], ["openshift", "--cloud", "gcp"]])
def test_args_a_plugin_refuses_are_never_printed(platform: list[str]) -> None:
    """Through the bundle, whose plugins it starts with the config's args and env as install and
    the agent do: a typo in a provider's args would fail every pull on every node the rendered
    config reaches. The shipped defaults of all three clouds start."""
    settings = json.dumps({"gcp": {"args": ["get-credentials", "--v=3", "--regon", "x"]}})
    done = run_cli("render", *platform, "--providers", "aws,gcp", "--provider-settings", settings,
                   use_bundle=True)  # fmt: skip
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"credprovider render {platform[0]}: nothing printed: ")
    assert "auth-provider-gcp refuses its args: auth-provider-gcp: error: " in line
    assert "--regon" in line and line.endswith("(fix --provider-settings)")
    shipped = run_cli("render", *platform, "--providers", "aws,azure,gcp", use_bundle=True)
    assert shipped.returncode == 0 and shipped.stderr == "", shipped.stderr


def test_this_machines_settings_never_refuse_config_printed_for_others(tmp_path: Path) -> None:
    """The start check reads, as root, the settings files a plugin's args and env name (an AWS
    profile file, azure.json) as a pull on this node would. A config rendered for Talos or
    OpenShift, or planned by the agent in its pod, runs on other machines, whose files are not
    these: this machine's broken AWS config refused it ("nothing printed"). Their args alone
    are checked; install on this machine still reads them."""
    (tmp_path / "aws-config").write_text("[default\n")
    home = {"AWS_CONFIG_FILE": str(tmp_path / "aws-config")}  # as root's ~/.aws/config would
    done = run_cli("render", "talos", "--providers", "aws", env=home, use_bundle=True)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    installed = run_cli("install", "--providers", "aws", "--bin-dir", f"{tmp_path}/bin",
                        "--config-out", f"{tmp_path}/c.yaml", "--dry-run", env=home,
                        use_bundle=True)  # fmt: skip
    assert installed.returncode == 1 and "Unable to parse config file" in installed.stdout, (
        installed.stdout + installed.stderr
    )

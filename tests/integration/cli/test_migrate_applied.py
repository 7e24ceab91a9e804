"""``migrate --write`` through the bundle, applied to the file each plan came from, then proven.

Every case is a node as operators have it: the kubelet's flags in kubeadm's flags file, an env file, a
systemd drop-in (Environment= or a continued ExecStart=), a KubeletConfiguration, often a credential
provider config the kubelet already runs. After ``migrate --write`` and ``install``:

* the kubelet's flags hold one ``--image-credential-provider-config`` and one
  ``--image-credential-provider-bin-dir`` (never a second), no in-tree ``--cloud-provider``, and no
  feature gate a current kubelet refuses;
* the config holds the node's existing providers (names kept) and ours, the real kubelet code
  accepts it, and ``validate --bin-dir`` is clean;
* every file changed keeps its old text as a backup, byte for byte.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from credprovider.tool.catalog import PLUGINS
from credprovider.tool.change.engine import BACKUP_SUFFIX
from credprovider.tool.change.migrate import REMOVED_GATES, flag_values
from credprovider.tool.node.flagfiles import flags_from_file
from tests.helpers import require_bundle, run_cli
from tests.helpers_kubelet import validate_with_kubelet

OLD_CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: CredentialProviderConfig
providers:
  - name: corp-login
    matchImages: ["registry.corp.example"]
    defaultCacheDuration: 10m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
"""
OTHER_CONFIG = """\
{"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig",
 "providers": [{"name": "mirror-login", "matchImages": ["mirror.corp.example:5000"],
                "defaultCacheDuration": "1m", "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
                "args": ["--mirror"]}]}
"""
# A plugin of the node's own: it runs, and refuses an empty request as a plugin does.
FOREIGN_PLUGIN = '#!/bin/sh\ncat >/dev/null\necho "no request" >&2\nexit 1\n'


@dataclass
class Node:
    name: str
    flags_file: str  # its name
    flags: str  # its text; {tmp} is the case's directory
    providers: list[str]  # the plugins migrate must configure
    kept: list[str] = field(default_factory=list)  # the node's providers to keep
    kubelet_config: str | None = None
    extra: list[str] = field(default_factory=list)  # more migrate arguments


NODES = [
    Node(
        "the issue's kubeadm-flags.env: the credential flags already set",
        "kubeadm-flags.env",
        'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock '
        "--cloud-provider=aws --image-credential-provider-config={tmp}/etc/old.yaml "
        '--image-credential-provider-bin-dir={tmp}/oldbin"\n',
        ["aws"],
        ["corp-login"],
    ),
    Node(
        "/etc/default/kubelet with a removed gate only",
        "kubelet.default",
        "KUBELET_EXTRA_ARGS=--cloud-provider=gce --feature-gates=KubeletCredentialProviders=true\n",
        ["gcp"],
    ),
    Node(
        "a drop-in whose ExecStart= continues, --flag value forms",
        "20-kubelet.conf",
        "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet \\\n  --cloud-provider azure \\\n"
        "  --azure-container-registry-config {tmp}/etc/acr.json \\\n"
        "  --image-credential-provider-bin-dir {tmp}/oldbin \\\n"
        "  --image-credential-provider-config {tmp}/etc/old.yaml \\\n"
        "  --feature-gates=DisableKubeletCloudCredentialProviders=true,RotateKubeletServerCertificate=true\n",
        ["azure"],
        ["corp-login"],
    ),
    Node(
        "Environment= in a drop-in, gates in the KubeletConfiguration",
        "10-cloud.conf",
        '[Service]\nEnvironment="KUBELET_EXTRA_ARGS=--cloud-provider=aws --max-pods=58"\n',
        ["aws"],
        kubelet_config="apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "featureGates:\n  KubeletCredentialProviders: true\n  DisableKubeletCloudCredentialProviders: true\n"
        "  GracefulNodeShutdown: true\nmaxPods: 58\n",
    ),
    Node(
        "a config directory (kubelet >= 1.34) of two files",
        "kubeadm-flags.env",
        'KUBELET_KUBEADM_ARGS="--cloud-provider=gce --image-credential-provider-config={tmp}/etc/conf.d '
        '--image-credential-provider-bin-dir={tmp}/oldbin"\n',
        ["gcp"],
        ["corp-login", "mirror-login"],
    ),
    Node(
        "--cloud-provider=external, the clouds given",
        "kubelet.flags",
        "--cloud-provider=external --v=2\n",
        ["aws", "gcp"],
        extra=["--providers", "aws,gcp"],
    ),
]


def _node(tmp: Path, node: Node) -> tuple[Path, Path | None]:
    (tmp / "etc" / "conf.d").mkdir(parents=True)
    (tmp / "etc" / "old.yaml").write_text(OLD_CONFIG)
    (tmp / "etc" / "conf.d" / "10-corp.yaml").write_text(OLD_CONFIG)
    (tmp / "etc" / "conf.d" / "20-mirror.json").write_text(OTHER_CONFIG)
    (tmp / "etc" / "acr.json").write_text('{"cloud": "AzurePublicCloud"}\n')
    (tmp / "oldbin").mkdir()
    for name in node.kept:
        (tmp / "oldbin" / name).write_text(FOREIGN_PLUGIN)
        (tmp / "oldbin" / name).chmod(0o755)
    flags_file = tmp / node.flags_file
    flags_file.write_text(node.flags.replace("{tmp}", str(tmp)))
    kubelet_config = None
    if node.kubelet_config is not None:
        kubelet_config = tmp / "kubelet-config.yaml"
        kubelet_config.write_text(node.kubelet_config)
    return flags_file, kubelet_config


@pytest.mark.parametrize("node", NODES, ids=[n.name for n in NODES])
def test_a_migration_applied_as_written(tmp_path: Path, node: Node, kubelet_harness: Path) -> None:
    require_bundle()
    flags_file, kubelet_config = _node(tmp_path, node)
    originals = {flags_file: flags_file.read_text()}
    if kubelet_config:
        originals[kubelet_config] = kubelet_config.read_text()
    config = tmp_path / "etc" / "credential-providers.yaml"
    args = ["migrate", "--kubelet-flags-file", str(flags_file), "--config-out", str(config)]
    args += ["--kubelet-config", str(kubelet_config)] if kubelet_config else []
    if not node.kept:
        args += ["--bin-dir", str(tmp_path / "oldbin")]
    # as docs/operators.md says: the plan first; --write before the plugins are in place refuses
    # (the kubelet would not start), changing nothing; then install as the plan says, and write
    shown = run_cli(*args, *node.extra, "--json", use_bundle=True)
    assert shown.returncode == 0, shown.stderr
    early = run_cli(*args, *node.extra, "--write", use_bundle=True)
    assert early.returncode == 1 and early.stdout == "", early
    assert "the kubelet would NOT start" in early.stderr and early.stderr.endswith(
        ": nothing was written\n"
    )
    assert "put the plugins there first (credprovider install --providers=" in early.stderr
    assert {path: path.read_text() for path in originals} == originals and not config.exists()
    first = run_cli(*json.loads(shown.stdout)["install"], use_bundle=True)
    assert first.returncode == 0, first.stderr
    run = run_cli(*args, *node.extra, "--write", "--json", use_bundle=True)
    assert run.returncode == 0, run.stderr
    plan = json.loads(run.stdout)
    assert plan["providers"] == node.providers
    assert plan["binDir"] == str(tmp_path / "oldbin")  # the kept plugins are there
    # the changes in install's vocabulary (change.results.Step): each file edited or written,
    # with where its old text is kept; the config install already wrote is left unchanged
    written = {w["path"]: w.get("backup") for w in plan["written"]}
    changes = {c["path"]: c for c in plan["changes"]}
    assert {p for p, c in changes.items() if c["action"] != "unchanged"} == set(written)
    for path, backup in written.items():
        assert changes[path]["action"] in ("flags", "write") and changes[path]["backup"] == backup
    said = changes[str(config)]
    assert (said["action"], said["detail"]) in (
        ("write", f"wrote {config}"),
        ("unchanged", f"unchanged {config} (it already has these providers)"),
    )

    # The kubelet's flags: one of each credential flag, naming the new config and the bin dir.
    words = shlex.split(flags_from_file(flags_file.read_text()))
    assert flag_values(words, "image-credential-provider-config") == [str(config)]
    assert flag_values(words, "image-credential-provider-bin-dir") == [str(tmp_path / "oldbin")]
    assert flag_values(words, "cloud-provider") in ([], ["external"])
    gates = ",".join(flag_values(words, "feature-gates"))
    assert not [gate for gate in REMOVED_GATES if gate in gates]
    if kubelet_config:
        left = yaml.safe_load(kubelet_config.read_text())["featureGates"]
        assert left == {"GracefulNodeShutdown": True}
        assert yaml.safe_load(kubelet_config.read_text())["maxPods"] == 58
    # Every changed file kept its old text.
    for path, text in originals.items():
        backups = list(path.parent.glob(f"{path.name}{BACKUP_SUFFIX}*"))
        assert [b.read_text() for b in backups] == ([text] if path.read_text() != text else [])

    # The config: theirs first, names kept, then ours; install agrees with it; all of it runs.
    names = [p["name"] for p in yaml.safe_load(config.read_text())["providers"]]
    assert names == node.kept + [PLUGINS[key].name for key in node.providers]
    install = run_cli(*plan["install"], use_bundle=True)
    assert install.returncode == 0, install.stderr
    assert f"unchanged {config}" in install.stdout
    validate = run_cli(
        "validate", str(config), "--bin-dir", str(tmp_path / "oldbin"), use_bundle=True
    )
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert validate_with_kubelet(kubelet_harness, config) == {"valid": True}

    # Run again, the node migrated: nothing to do, nothing written.
    again = run_cli(*args, "--write", "--json", use_bundle=True)
    assert again.returncode == 0, again.stderr
    again_plan = json.loads(again.stdout)
    assert again_plan["written"] == []
    assert {c["action"] for c in again_plan["changes"]} <= {"unchanged"}  # nothing to change


def test_write_never_replaces_someone_elses_config(tmp_path: Path) -> None:
    require_bundle()
    flags_file = tmp_path / "kubelet.flags"
    flags_file.write_text("--cloud-provider=aws\n")
    theirs = tmp_path / "credential-providers.yaml"
    theirs.write_text("# hand-written\napiVersion: kubelet.config.k8s.io/v1\n")
    run = run_cli(
        "migrate", "--kubelet-flags-file", str(flags_file), "--config-out", str(theirs),
        "--bin-dir", str(tmp_path), "--write", use_bundle=True,
    )  # fmt: skip
    assert run.returncode == 1
    assert run.stderr == (
        f"credprovider migrate: {theirs} exists with other content and is not the kubelet's "
        "current config: choose another --config-out, or move it away: nothing was written\n"
    )
    assert flags_file.read_text() == "--cloud-provider=aws\n"
    assert theirs.read_text().startswith("# hand-written")
    assert sorted(p.name for p in tmp_path.iterdir()) == [theirs.name, flags_file.name]


@pytest.mark.parametrize("linked", ["flags", "config"])
def test_write_never_turns_a_link_into_a_file(tmp_path: Path, linked: str) -> None:
    """A flags file or config that is a link (into config management's tree): writing would
    replace it with a file, and what the link names would no longer reach the kubelet. Refused,
    nothing written, naming the file to give instead; given that file, migrate edits it, the link
    left as it is."""
    require_bundle()
    managed = tmp_path / "managed"
    managed.mkdir()
    files = {"flags": ("kubelet.flags", "--cloud-provider=aws\n"), "config": ("c.yaml", "")}
    name, text = files[linked]
    (managed / name).write_text(text or OLD_CONFIG)
    (tmp_path / name).symlink_to(managed / name)
    if linked == "config":
        (tmp_path / "kubelet.flags").write_text(
            f"--cloud-provider=aws --image-credential-provider-config={tmp_path}/c.yaml "
            f"--image-credential-provider-bin-dir={tmp_path}/bin\n"
        )
    before = {p: p.read_bytes() for p in managed.iterdir()} | {tmp_path / "kubelet.flags": b""}
    before[tmp_path / "kubelet.flags"] = (tmp_path / "kubelet.flags").read_bytes()

    def migrate(flags: Path, config: Path) -> subprocess.CompletedProcess[str]:
        return run_cli("migrate", "--kubelet-flags-file", str(flags), "--config-out", str(config),
                       "--bin-dir", str(tmp_path / "bin"), "--write", use_bundle=True)  # fmt: skip

    run = migrate(tmp_path / "kubelet.flags", tmp_path / "c.yaml")
    assert run.returncode == 1
    assert run.stderr == (
        f"credprovider migrate: {tmp_path / name} is a link to {managed / name}, which writing "
        "would replace with a file (what the link points to would no longer reach the kubelet): "
        f"give {managed / name} in its place to change that file instead: nothing was written\n"
    )
    assert {p: p.read_bytes() for p in before} == before
    assert (tmp_path / name).is_symlink() and not list(tmp_path.glob("*backup*"))
    given = {"flags": (managed / name, tmp_path / "c.yaml"),
             "config": (tmp_path / "kubelet.flags", managed / name)}[linked]  # fmt: skip
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin/corp-login").write_text(FOREIGN_PLUGIN)
    (tmp_path / "bin/corp-login").chmod(0o755)
    done = run_cli("install", "--providers", "aws", "--bin-dir", str(tmp_path / "bin"),
                   "--config-out", str(tmp_path / "plugins.yaml"), use_bundle=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = migrate(*given)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / name).is_symlink() and (managed / name).read_bytes() != before.get(
        managed / name
    )


def test_on_a_kubeadm_node_the_later_file_is_read_and_written_too(tmp_path: Path) -> None:
    """Given kubeadm's /var/lib/kubelet/kubeadm-flags.env only, on a node whose
    /etc/default/kubelet still says --cloud-provider=aws: that file is read as well (the drop-in
    passes it last), the cloud flag leaves both, and the new flags go into it. The node is a
    mount namespace of its own (/var/lib and /etc/default private)."""
    import os
    import sys

    from tests.helpers import node_script
    from tests.integration.cli.conftest import fake_bundle

    if os.geteuid() != 0:
        pytest.skip("a node of its own needs mount namespaces")
    out = tmp_path / "out"
    out.mkdir()
    bundle = tmp_path / "bin"
    target = fake_bundle(tmp_path / "bundle", "0.2.0")
    tool = f"{sys.executable} -m credprovider credprovider"
    script = f"""
set -e
mount -t tmpfs tmpfs /var/lib
mkdir -p /etc/default && mount -t tmpfs tmpfs /etc/default
mkdir -p /var/lib/kubelet
printf '%s\\n' 'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 --cloud-provider=aws"' \
  > /var/lib/kubelet/kubeadm-flags.env
printf '%s\\n' 'KUBELET_EXTRA_ARGS=--v=2 --cloud-provider=aws' > /etc/default/kubelet
m="migrate --kubelet-flags-file /var/lib/kubelet/kubeadm-flags.env --bin-dir {bundle} \
  --config-out {tmp_path}/config.yaml"
{tool} $m --json > {out}/plan.json
{tool} install --providers aws --bin-dir {bundle} --config-out {tmp_path}/config.yaml \
  --target {target} >/dev/null
{tool} $m --write > {out}/written.txt
cp /var/lib/kubelet/kubeadm-flags.env {out}/kubeadm-flags.env
cp /etc/default/kubelet {out}/kubelet.default
"""
    done = node_script(script, 120)
    assert done.returncode == 0, done.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert sorted(plan["files"]) == ["/etc/default/kubelet", "/var/lib/kubelet/kubeadm-flags.env"]
    kubeadm = flags_from_file((out / "kubeadm-flags.env").read_text()).split()
    extra = flags_from_file((out / "kubelet.default").read_text()).split()
    assert kubeadm == ["--node-ip=10.0.0.5"]
    assert extra == [
        "--v=2",
        "--cloud-provider=external",
        f"--image-credential-provider-config={tmp_path}/config.yaml",
        f"--image-credential-provider-bin-dir={bundle}",
    ]
    assert "edited /etc/default/kubelet" in (out / "written.txt").read_text()


@pytest.mark.parametrize("cloud", ["aws", ""])
def test_on_kubeadm_from_binaries_the_flags_go_where_its_drop_in_reads_them(
    tmp_path: Path, cloud: str
) -> None:
    """kubeadm as the Kubernetes docs install it without a package manager
    (tests/platformnodes.kubeadm_binaries), on the in-tree cloud or on none: its drop-in reads
    KUBELET_EXTRA_ARGS from /etc/sysconfig/kubelet, which is not there (on Ubuntu, nor is
    /etc/sysconfig). With no credential flags, doctor's fix names the migrate run here (before:
    "no known layout names a config", and "name it"). ``migrate --write`` makes that file, with
    the new flags (before: they went into kubeadm-flags.env, which kubeadm writes anew), and doctor
    reads them as systemd passes them. ``undo`` then puts the node back byte for byte with no
    --force: the version of the kubelet installed (1.30, not running) is read as doctor reads it,
    and it starts with the in-tree flag put back (before: "not known"). The node is a mount
    namespace of its own (/etc an overlay, /var/lib and the unit dir fresh)."""
    import os
    import sys

    from tests.helpers import node_script
    from tests.integration.cli.conftest import fake_bundle
    from tests.platformnodes import kubeadm_binaries

    if os.geteuid() != 0:
        pytest.skip("a node of its own needs mount namespaces")
    staged = kubeadm_binaries(cloud).build(tmp_path / "staged")
    out = tmp_path / "out"
    out.mkdir()
    for top in ("etc", "usr", "var"):  # the node's own layer over each, the host's untouched
        for place in ("upper", "work"):
            (tmp_path / place / top).mkdir(parents=True)
    target = fake_bundle(tmp_path / "bundle", "0.2.0")
    tool = f"{sys.executable} -m credprovider credprovider"
    flags = "/var/lib/kubelet/kubeadm-flags.env"
    migrate = f"migrate --kubelet-flags-file {flags} --providers aws"
    script = f"""
set -e
for top in etc usr var; do
  mount -t overlay overlay \
    -o lowerdir=/$top,upperdir={tmp_path}/upper/$top,workdir={tmp_path}/work/$top /$top
done
for d in /var/lib /usr/local/bin /usr/lib/systemd/system; do mount -t tmpfs -o mode=755 t $d; done
rm -rf /etc/sysconfig /etc/kubernetes /etc/systemd/system/kubelet.service*
# into the layers alone: /etc/os-release is the host's link to /usr/lib/os-release, which a copy
# writes through, and a copy to / itself would set the host root's times
for top in etc usr var; do cp -a {staged}/$top/. /$top/; done
printf '#!/bin/sh\\necho Kubernetes v1.30.5\\n' > /usr/local/bin/kubelet
chmod 755 /usr/local/bin/kubelet
{tool} install --providers aws --bin-dir /etc/kubernetes/image-credential-provider \
  --config-out /etc/kubernetes/image-credential-provider-config.yaml --target {target} \
  > {out}/installed.txt
{tool} doctor --offline --json > {out}/before.json || true
sha256sum {flags} /etc/default/* > {out}/installed.sum
hint=$(grep -o 'migrate --kubelet-flags-file .* --write' {out}/installed.txt)
test -n "$hint"
{tool} $hint > {out}/written.txt
cp /etc/sysconfig/kubelet {out}/sysconfig
{tool} doctor --offline --json > {out}/doctor.json || true
{tool} undo > {out}/undone.txt
sha256sum {flags} /etc/default/* > {out}/undone.sum
ls /var/lib/kubelet > {out}/left.txt
test ! -e /etc/sysconfig
"""
    done = node_script(script)
    assert done.returncode == 0, done.stderr
    assert "The new flags go into /etc/sysconfig/kubelet" in (out / "written.txt").read_text()
    # the line install printed, run as it is: the migrate that sets the flags where they are read
    assert f"(kubeadm: credprovider {migrate} --bin-dir " in (out / "installed.txt").read_text()
    before = json.loads((out / "before.json").read_text())
    failed = [c for c in before["checks"] if c["status"] == "fail"]
    fix = failed[0]["fix"]
    assert fix.startswith(f"credprovider migrate --kubelet-flags-file {flags} "), failed
    assert ("--providers PROVIDERS" in fix) != bool(cloud), fix  # in-tree: the cloud is known
    assert flags_from_file((out / "sysconfig").read_text()).split() == [
        *(["--cloud-provider=external"] if cloud else []),
        "--image-credential-provider-config=/etc/kubernetes/image-credential-provider-config.yaml",
        "--image-credential-provider-bin-dir=/etc/kubernetes/image-credential-provider",
    ]
    report = json.loads((out / "doctor.json").read_text())
    assert report["config"] == "/etc/kubernetes/image-credential-provider-config.yaml", report
    assert "removed the directory /etc/sysconfig" in (out / "undone.txt").read_text()
    assert (out / "undone.sum").read_text() == (out / "installed.sum").read_text()
    assert (out / "left.txt").read_text().split() == ["config.yaml", "kubeadm-flags.env"]

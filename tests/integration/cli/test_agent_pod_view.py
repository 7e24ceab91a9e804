"""``credprovider agent`` seeing the node only as the chart's pod does in mode flags: for each value
of ``flags.platform``, a node of that platform (with the node's secrets beside what the agent
needs) is mounted into a read-only root exactly as platforms.yaml says (each path read-only or
writable, a file alone where it is one), in a mount namespace of the test's own; the agent
installs, then uninstalls, through that view. The host paths' types are checked as the kubelet
checks a hostPath's (a pod whose path is missing would not start).

What must hold: every platform installs and uninstalls through its narrowed mounts, the node ends
as it was, nothing else of the node (its keys, its kubelet's credentials, a platform's tokens) is
visible in the pod, and a wrong platform or a path outside the mounts changes nothing, in one line.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest
import yaml

from credprovider.paths import AGENT_EXEC_HOME, AGENT_HOME, AGENT_HOME_PARENT, LOCK_DIR
from credprovider.tool.agent.mounts import CHOICES, HostMount, choice
from emulators.http import FakeResponse, serve
from release.bundle import REPO
from tests.helpers import private
from tests.integration.cli.conftest import fake_bundle
from tests.integration.cli.test_agent import restart_command, restarts
from tests.platformnodes import BINARY, gke
from tests.unit.tool.test_agent_apply import tree
from tests.unit.tool.test_agent_plan import KUBEADM_NODE, UPSTREAM_ECR, node

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts need root")

K0S_UNIT = "[Service]\nExecStart=/usr/local/bin/k0s worker --token-file=/etc/k0s/k0stoken\n"
# What every node holds that the agent must never see: a control plane's keys, the kubelet's
# client certificate, a platform's join token.
SECRETS = {
    "/etc/kubernetes/admin.conf": "cluster admin\n",
    "/etc/kubernetes/pki/ca.key": "the cluster's CA key\n",
    "/var/lib/kubelet/pki/kubelet-client-current.pem": "the kubelet's credentials\n",
    "/etc/rancher/k3s/k3s.yaml": "k3s admin kubeconfig\n",
    "/etc/k0s/k0stoken": "k0s join token\n",
}
# A platform's own join token where its installer keeps it: k3s' install.sh in its unit's
# environment file, RKE2's tarball unit reading one beside it (%N.env).
OWN_SECRETS = {
    "k3s": {"/etc/systemd/system/k3s-agent.service.env": "K3S_TOKEN=K10secret\n"},
    "rke2": {"/usr/local/lib/systemd/system/rke2-agent.env": "RKE2_TOKEN=secret\n"},
}
# AKS' config is directly in /var/lib/kubelet, so that directory is mounted writable, and with it
# the kubelet's own credentials (docs/security.md says so).
EXPOSED = {"aks": {"/var/lib/kubelet/pki/kubelet-client-current.pem"}}
# Every systemd host has these (the unit directories' mounts need them).
SYSTEMD = {"/etc/systemd/system/": "", "/usr/lib/systemd/": "", "/lib/systemd/": ""}
KUBELET_UNIT = {"/usr/lib/systemd/system/kubelet.service": "[Service]\n"}
NODES: dict[str, tuple[dict[str, str], str, str]] = {
    # flags.platform: (the node's own files, the provider installed, the unit restarted)
    "kubeadm": (
        {**KUBEADM_NODE, "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n"}, "aws", "kubelet"
    ),
    "kubeadm-rpm": (
        {**KUBEADM_NODE, "/etc/sysconfig/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n"}, "aws", "kubelet"
    ),
    "k3s": ({"/etc/systemd/system/k3s-agent.service": "[Service]\n"}, "aws", "k3s-agent"),
    # from its tarball: its units in /usr/local/lib/systemd/system (tests/platformnodes.rke2)
    "rke2": (
        {"/usr/local/lib/systemd/system/rke2-agent.service": "[Service]\n"}, "aws", "rke2-agent"
    ),
    "k0s": ({"/etc/systemd/system/k0sworker.service": K0S_UNIT}, "aws", "k0sworker"),
    "eks": (
        {"/etc/eks/image-credential-provider/config.json": UPSTREAM_ECR,
         "/etc/eks/image-credential-provider/ecr-credential-provider": "EKS's own plugin\n",
         **KUBELET_UNIT},
        "gcp", "kubelet",
    ),
    "aks": (
        {
            "/var/lib/kubelet/credential-provider-config.yaml": UPSTREAM_ECR,
            "/etc/kubernetes/azure.json": "{}\n",
            "/var/lib/kubelet/credential-provider/ecr-credential-provider": "its own plugin\n",
            **KUBELET_UNIT,
        },
        "gcp", "kubelet",
    ),
    "gke": (
        {"/etc/srv/kubernetes/cri_auth_config.yaml": UPSTREAM_ECR,
         "/home/kubernetes/bin/kubelet": "",
         "/home/kubernetes/bin/auth-provider-gcp": "GKE's own plugin\n",
         "/home/kubernetes/bin/ecr-credential-provider": "its own plugin\n", **KUBELET_UNIT},
        "gcp", "kubelet",
    ),
}  # fmt: skip


def test_every_platform_the_chart_offers_has_a_node_here() -> None:
    assert sorted(NODES) == sorted(c.value for c in CHOICES)


def start_pod(root: Path, mounts: tuple[HostMount, ...]) -> None:
    """What the kubelet does with the pod's hostPath volumes before it starts: a Directory or a
    File must be one (else the pod does not start), a DirectoryOrCreate is made."""
    for mount in mounts:
        path = root / mount.path.lstrip("/")
        if mount.create:
            path.mkdir(parents=True, exist_ok=True)
        else:
            kind = path.is_file() if mount.file else path.is_dir()
            assert kind, f"the pod would not start: hostPath {mount.path} is missing"
    (root / LOCK_DIR.lstrip("/")).mkdir(parents=True, exist_ok=True)


def view_script(
    root: Path,
    view: Path,
    mounts: tuple[HostMount, ...],
    seen: Path,
    noexec: tuple[str, ...] = (),
    then: str = "",
    tmpfs: tuple[str, ...] = (),
) -> str:
    """Shell run in the test's mount namespace: a read-only root holding only the pod's mounts
    of ``root`` at ``view`` (and the node's lock directory), then the command in "$@". What the
    pod can see is listed in ``seen`` first. The mounts at ``noexec`` are made so (as COS mounts
    /var and /home: a hostPath bound from them keeps the flag). ``then``: shell run after the
    command succeeded, in the same view (``$VIEW`` names it). The node's paths at ``tmpfs`` are
    a tmpfs of their own first (a node's /run, or a host directory an operator mounted so)."""
    every = [*mounts, HostMount(LOCK_DIR, True, "the node's lock")]
    lines = ["set -e", f"mount -t tmpfs -o mode=0755 pod-root {shlex.quote(str(view))}"]
    lines += [f"mount -t tmpfs volatile {shlex.quote(str(root / p.lstrip('/')))}" for p in tmpfs]
    for mount in every:
        at = shlex.quote(str(view / mount.path.lstrip("/")))
        if mount.file:
            lines.append(f"mkdir -p $(dirname {at}) && touch {at}")
        else:
            lines.append(f"mkdir -p {at}")
    for mount in every:
        source = shlex.quote(str(root / mount.path.lstrip("/")))
        at = shlex.quote(str(view / mount.path.lstrip("/")))
        lines.append(f"mount --bind {source} {at}")
        if not mount.writable:
            lines.append(f"mount -o remount,bind,ro {at}")
        elif mount.path in noexec:
            lines.append(f"mount -o remount,bind,noexec {at}")
    lines.append(f"mount -o remount,ro {shlex.quote(str(view))}")
    lines.append(f"find {shlex.quote(str(view))} -type f > {shlex.quote(str(seen))}")
    if then:
        lines += [f"VIEW={shlex.quote(str(view))}", '"$@"', then]
    else:
        lines.append('exec "$@"')
    return "\n".join(lines)


def in_pod(
    tmp_path: Path,
    root: Path,
    value: str,
    *args: str,
    noexec: tuple[str, ...] = (),
    then: str = "",
    tmpfs: tuple[str, ...] = (),
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``credprovider agent ARGS --root VIEW`` run where only the pod's view of ``root`` is
    mounted: its result and the files it could see (as node paths)."""
    view, seen = tmp_path / "view", tmp_path / "seen"
    view.mkdir(exist_ok=True)
    mounts = choice(value).mounts
    script = view_script(root, view, mounts, seen, noexec, then, tmpfs)
    command = [sys.executable, "-m", "credprovider", "credprovider", "agent", *args,
               "--root", str(view)]  # fmt: skip
    done = subprocess.run(
        private(["sh", "-c", script, "sh", *command]),
        capture_output=True, text=True, timeout=180, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    visible = [
        "/" + str(Path(line).relative_to(view))
        for line in (seen.read_text().splitlines() if seen.exists() else [])
    ]
    return done, visible


@pytest.mark.parametrize("value", sorted(NODES))
def test_each_platform_installs_and_uninstalls_through_its_narrowed_mounts(
    tmp_path: Path, value: str
) -> None:
    files, provider, unit = NODES[value]
    secrets = {**SECRETS, **OWN_SECRETS.get(value, {})}
    root = Path(node(tmp_path / "node", {**SYSTEMD, **secrets, **files}))
    start_pod(root, choice(value).mounts)
    before = tree(str(root))
    trip = round_trip(tmp_path, root, value, provider, "--platform", value)
    assert trip.applied.returncode == 0, trip.applied.stderr + trip.applied.stdout
    assert trip.applied.stdout.splitlines()[0] == "installed"
    assert trip.restarted_by_apply == [unit] and trip.changed
    # the pod saw none of the node's secrets but those its platform's mounts must expose
    assert set(trip.visible) & set(secrets) == EXPOSED.get(value, set()), trip.visible
    assert trip.undone.returncode == 0, trip.undone.stderr + trip.undone.stdout
    assert trip.undone.stdout.splitlines()[0] == "uninstalled"
    assert tree(str(root)) == before
    assert trip.restarted == [unit, unit]


@dataclass
class RoundTrip:
    applied: subprocess.CompletedProcess[str]
    visible: list[str]  # what the pod could see as it applied
    restarted_by_apply: list[str]
    changed: bool  # the node's tree after apply differs from before it
    undone: subprocess.CompletedProcess[str]
    restarted: list[str]


def round_trip(tmp_path: Path, root: Path, value: str, provider: str, *more: str) -> RoundTrip:
    """``agent apply`` then ``agent uninstall`` in the pod of ``value`` on the node ``root``, as
    the chart runs them: restarts over a stand-in for systemd's socket that loads the node's
    units, the kubelet a stand-in that answers healthy."""
    from emulators.systemd import standin_systemd

    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    socket_path, restarted = tmp_path / "private", []
    before = tree(str(root))
    with (
        serve(lambda request: FakeResponse.text("ok")) as kubelet,
        standin_systemd(socket_path, lambda unit: restarted.append(unit) or "done", root=root),
    ):
        common = [
            *more, "--systemd-socket", str(socket_path), "--healthz", f"{kubelet.url}/healthz",
            "--health-timeout", "2",
        ]  # fmt: skip
        applied, visible = in_pod(
            tmp_path, root, value, "apply", "--bundle", str(bundle), "--providers", provider,
            *common,
        )  # fmt: skip
        by_apply, changed = list(restarted), tree(str(root)) != before
        undone, _ = in_pod(tmp_path, root, value, "uninstall", *common)
    return RoundTrip(applied, visible, by_apply, changed, undone, restarted)


def refused_apply(
    tmp_path: Path,
    files: dict[str, str],
    value: str,
    noexec: tuple[str, ...] = (),
    tmpfs: tuple[str, ...] = (),
) -> str:
    """``agent apply --platform value`` in that platform's pod, on a node of ``files``: the line
    that refuses it, once it exited 1 with the node and its kubelet untouched."""
    root = Path(node(tmp_path / "node", {**SYSTEMD, **SECRETS, **files}))
    start_pod(root, choice(value).mounts)
    before = tree(str(root))
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    done, _ = in_pod(
        tmp_path, root, value, "apply", "--platform", value, "--bundle", str(bundle),
        "--providers", "aws", "--restart-command", restart_command(tmp_path), noexec=noexec,
        tmpfs=tmpfs,
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert tree(str(root)) == before and restarts(tmp_path) == []
    return done.stdout.splitlines()[0]


def test_a_node_of_another_platform_changes_nothing_and_says_why(tmp_path: Path) -> None:
    files, _, _ = NODES["kubeadm"]
    said = refused_apply(tmp_path, files, "k3s")
    assert said.startswith("refused: this node shows nothing of k3s (none of /etc/rancher/k3s")
    assert "name the node's own platform (the chart's flags.platform)" in said


def test_a_config_outside_the_mounts_is_refused_before_anything_changes(tmp_path: Path) -> None:
    """A kubeadm node whose kubelet already names a config in /etc/kubernetes (set when it was
    provisioned, or by an agent of mode auto): the agent would keep that path, which the pod of
    flags.platform=kubeadm cannot write."""
    files, _, _ = NODES["kubeadm"]
    given = (
        "KUBELET_EXTRA_ARGS=--image-credential-provider-config=/etc/kubernetes/cp.yaml "
        "--image-credential-provider-bin-dir=/etc/kubernetes/cp-bin\n"
    )
    said = refused_apply(tmp_path, {**files, "/etc/default/kubelet": given}, "kubeadm")
    assert said.startswith("refused: cannot write /etc/kubernetes/"), said
    assert "/etc is read-only here (in the chart's pod: not mounted writable for its " in said
    assert said.endswith("nothing is changed")


# COS mounts /var and /home noexec and remounts only /home/kubernetes/bin exec at every boot
# (paths.AGENT_EXEC_HOME names the vendor file); a pod's hostPath keeps the host mount's flags.
COS_NOEXEC: Final = tuple(
    m.path
    for m in choice("gke").mounts
    if m.path.startswith(("/var/", "/home/"))
    and m.writable
    and not m.path.startswith("/home/kubernetes/bin")
)


def gke_node(tmp_path: Path, files: dict[str, str]) -> Path:
    """A GKE node of ``files``, its pod's hostPaths in place."""
    root = Path(node(tmp_path / "node", {**SYSTEMD, **SECRETS, **files}))
    start_pod(root, choice("gke").mounts)
    return root


def cos_round_trip(
    tmp_path: Path, root: Path, extra: tuple[str, ...], check: Callable[[str], None]
) -> None:
    """The GKE node under ``root`` seen through COS's mounts (/var noexec) in the pod's view:
    ``agent apply`` with ``extra`` installs, the plugin runs as the kubelet runs it (through the
    bin dir's link, which names a host path: followed here inside the pod's view),
    ``check(its output)`` holds, and uninstall leaves the node as it was."""
    before = tree(str(root))
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    with serve(lambda request: FakeResponse.text("ok")) as kubelet:
        common = [
            "--platform", "gke", "--restart-command", restart_command(tmp_path),
            "--healthz", f"{kubelet.url}/healthz", "--health-timeout", "2",
        ]  # fmt: skip
        then = f'"$VIEW{AGENT_EXEC_HOME}/current/auth-provider-gcp" --version'
        applied, _ = in_pod(
            tmp_path, root, "gke", "apply", "--bundle", str(bundle), "--providers", "gcp",
            *extra, *common, noexec=COS_NOEXEC, then=then,
        )  # fmt: skip
        assert applied.returncode == 0, applied.stderr + applied.stdout
        assert applied.stdout.splitlines()[0] == "installed"
        assert applied.stdout.splitlines()[-1] == "auth-provider-gcp version 0.1.0 (credprovider)"
        check(applied.stdout)
        undone, _ = in_pod(tmp_path, root, "gke", "uninstall", *common, noexec=COS_NOEXEC)
        assert undone.returncode == 0, undone.stderr + undone.stdout
    assert tree(str(root)) == before


def test_on_cos_the_bundles_go_where_the_kubelet_can_execute_them(tmp_path: Path) -> None:
    """The agent's home is on COS's noexec /var: the bundles go to /home/kubernetes/bin's exec
    mount instead, the plugin runs through the kubelet's bin dir from the pod's own view of the
    node, and uninstall leaves the node as it was."""
    assert COS_NOEXEC == (AGENT_HOME_PARENT,)
    files, _, _ = NODES["gke"]
    root = gke_node(tmp_path, files)
    plugin = root / "home/kubernetes/bin/auth-provider-gcp"

    def check(said: str) -> None:
        assert f"  changed   {AGENT_EXEC_HOME}/versions/0.1.0" in said.splitlines()
        assert os.readlink(plugin) == f"{AGENT_EXEC_HOME}/current/auth-provider-gcp"
        assert not (root / AGENT_HOME.lstrip("/") / "versions").exists()

    cos_round_trip(tmp_path, root, (), check)
    # GKE's own plugin was kept for uninstall, on the agent's (noexec) home: data, not run
    assert plugin.read_text() == "GKE's own plugin\n"


def test_a_noexec_mount_under_the_bundles_is_refused_before_anything_changes(
    tmp_path: Path,
) -> None:
    """A COS node whose /home/kubernetes/bin was not remounted exec (its installation unit did
    not run): no place the pod can write is executable, and the agent says so, changing
    nothing."""
    files, _, _ = NODES["gke"]
    said = refused_apply(tmp_path, files, "gke", noexec=(*COS_NOEXEC, "/home/kubernetes/bin"))
    assert said.startswith(f"refused: cannot place the plugins in {AGENT_EXEC_HOME}: "), said
    assert "is on a noexec mount, so the kubelet could not run them" in said
    assert "kube-node-installation.service remounts /home/kubernetes/bin" in said
    assert said.endswith("nothing is changed")


def test_beside_leaves_the_platforms_own_plugin_and_entry_as_they_are(tmp_path: Path) -> None:
    """flags.beside on GKE: ours are added as auth-provider-gcp-credprovider, after GKE's own
    entry in its config (the kubelet asks both, GKE's first); GKE's binary is not touched (the
    same file, the same bytes), and uninstall leaves the node as it was."""
    root = gke_node(tmp_path, gke().files)
    own = root / "home/kubernetes/bin/auth-provider-gcp"
    inode = own.stat().st_ino

    def check(said: str) -> None:
        assert own.stat().st_ino == inode and own.read_text() == BINARY
        ours = root / "home/kubernetes/bin/auth-provider-gcp-credprovider"
        assert os.readlink(ours) == f"{AGENT_EXEC_HOME}/current/auth-provider-gcp"
        config = yaml.safe_load((root / "etc/srv/kubernetes/cri_auth_config.yaml").read_text())
        names = [provider["name"] for provider in config["providers"]]
        assert names == ["auth-provider-gcp", "auth-provider-gcp-credprovider"], names

    cos_round_trip(tmp_path, root, ("--beside",), check)


def test_a_home_on_a_tmpfs_is_refused_before_anything_changes(tmp_path: Path) -> None:
    """The host's /var/lib/credprovider on a tmpfs (an operator's mount, a node booted from RAM):
    the bundle would be gone at the next boot, its links in the bin dir dangling, and the
    kubelet would not start. One line, nothing changed."""
    files, _, _ = NODES["kubeadm"]
    said = refused_apply(tmp_path, files, "kubeadm", tmpfs=(AGENT_HOME_PARENT,))
    assert said.startswith(f"refused: cannot place the plugins in {AGENT_HOME}: "), said
    assert "is on a tmpfs, lost at the next boot, while /etc/default/kubelet lasts" in said
    assert said.endswith("nothing is changed")


@pytest.mark.parametrize("config", [False, True], ids=["unit-only", "with-its-config"])
def test_under_auto_systemd_names_the_unit_the_pod_cannot_see(tmp_path: Path, config: bool) -> None:
    """RKE2 from its tarball keeps its units in /usr/local/lib/systemd/system, which the pod of
    the chart's auto does not mount. Asked over the socket the pod restarts through, systemd says
    which unit it has: the agent recognises the node by it (with no /etc/rancher/rke2, as an
    agent whose server and token come from its environment), restarts it after the change and
    after the uninstall, and the node ends as it was."""
    files = dict(NODES["rke2"][0])
    if config:
        files["/etc/rancher/rke2/config.yaml"] = "server: https://10.0.0.1:9345\n"
    root = Path(node(tmp_path / "node", {**SYSTEMD, "/var/lib/": "", **files}))
    start_pod(root, choice("auto").mounts)
    before = tree(str(root))
    trip = round_trip(tmp_path, root, "auto", "aws")
    assert trip.applied.returncode == 0, trip.applied.stderr + trip.applied.stdout
    assert "/usr/local/lib/systemd/system/rke2-agent.service" not in trip.visible
    assert trip.applied.stdout.splitlines()[0] == "installed", trip.applied.stdout
    assert trip.applied.stdout.splitlines()[-1] == "  restarted rke2-agent"
    assert trip.restarted_by_apply == ["rke2-agent"]
    assert trip.undone.returncode == 0, trip.undone.stderr + trip.undone.stdout
    assert trip.restarted == ["rke2-agent", "rke2-agent"]
    assert tree(str(root)) == before

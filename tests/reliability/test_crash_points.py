"""The crash-point suite (issue #46): ``agent apply`` (a first install, then a config change that
restarts the kubelet) and ``agent uninstall``, each killed (SIGKILL, as an OOM kill, an eviction
or a power cut ends it) at every call that changes the node in turn: the engine's kill points
(``credprovider/tool/change/failpoint.py``: every mkdir, write, fsync, rename, link, unlink and
rmdir). After each kill:

(a) the same command run again exits 0 and leaves the node as an uninterrupted run does;
(b) uninstall then restores the original tree byte for byte (files, links, modes, directories);
(c) uninstall right after the kill does the same.

The number of kill points is counted, not listed: a new write in the engine is a new point."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from credprovider.paths import AGENT_EXEC_HOME
from credprovider.tool.agent.state import JOURNAL
from credprovider.tool.change.engine import ChangeKind, Kind
from credprovider.tool.change.failpoint import FAILPOINT_ENV, KILLED_STATUS
from credprovider.tool.change.journalformat import read
from credprovider.tool.node.root import NodeRoot
from emulators.http import FakeResponse, serve
from tests.forkrun import run_cli_forked
from tests.integration.cli.conftest import fake_bundle
from tests.unit.tool.test_agent_apply import kubeadm, tree

STATE = "/var/lib/credprovider/agent/state.json"
KILLED = (-9, KILLED_STATUS)


@pytest.fixture(scope="module")
def healthz() -> Iterator[str]:
    with serve(lambda request: FakeResponse.text("ok")) as kubelet:
        yield f"{kubelet.url}/healthz"


def comparable(found: dict[str, tuple[str, str, int]]) -> dict[str, Any]:
    """A node tree, the agent's state compared without its list of made directories (a rerun
    finds those a killed run made already there)."""
    shown: dict[str, Any] = dict(found)
    if STATE in shown:
        kind, text, mode = shown[STATE]
        state = json.loads(text)
        state.pop("made_dirs", None)
        shown[STATE] = (kind, state, mode)
    return shown


class Node:
    def __init__(self, tmp: Path, healthz: str, name: str, like: Node | None = None) -> None:
        """A kubeadm node with a flags file, or (``like``) a copy of that node as it is now: byte
        for byte, links as links, modes kept. Its state and journal name node paths, never its
        root, so the copy is the same node (what a run killed there left, or a prepared one)."""
        self.said = ""  # what the last command printed
        if like is not None:
            self.root = str(tmp / name)
            shutil.copytree(like.root, self.root, symlinks=True)
            self.bundle = like.bundle
            self.common = [self.root if word == like.root else word for word in like.common]
            return
        self.root = kubeadm(tmp / name)
        Path(self.root, "etc/default").mkdir(parents=True, exist_ok=True)
        Path(self.root, "etc/default/kubelet").write_text("KUBELET_EXTRA_ARGS=--v=2\n")
        self.bundle = str(fake_bundle(tmp / f"{name}-bundle", "0.1.0").parent)
        self.common = ["--root", self.root, "--restart-command", "true {unit}", "--healthz",
                       healthz, "--health-timeout", "5"]  # fmt: skip

    def apply(self, failpoint: int = 0, *more: str) -> int:
        env = {FAILPOINT_ENV: str(failpoint)} if failpoint else {}
        done = run_cli_forked("agent", "apply", "--bundle", self.bundle, "--providers", "aws",
                       *self.common, *more, env=env)  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        self.said = done.stdout
        return done.returncode

    def uninstall(self, failpoint: int = 0, *more: str) -> int:
        env = {FAILPOINT_ENV: str(failpoint)} if failpoint else {}
        done = run_cli_forked("agent", "uninstall", *self.common, *more, env=env)
        assert "Traceback" not in done.stderr, done.stderr
        self.said = done.stdout
        return done.returncode

    def journaled(self) -> bool:
        """A killed apply left its journal (the one format, change/journal.py): its links and
        kubelet inputs, as the node names them."""
        path = Path(self.root, JOURNAL.lstrip("/"))
        found = read(path)
        if found is None:
            return False
        assert found.change is ChangeKind.AGENT
        assert {op.kind for op in found.ops} <= {Kind.LINK, Kind.FILE}
        assert all(not str(op.path).startswith(self.root) for op in found.ops)
        return True

    def tree(self) -> dict[str, Any]:
        return comparable(tree(self.root))


def points(
    tmp: Path, healthz: str, prepare: Any, run: Any, ends: int = 0
) -> Iterator[tuple[int, Node]]:
    """Each kill point of ``run`` on a node ``prepare`` made (once: each point kills a copy of
    it): (point, the killed node); a run not killed exits ``ends``."""
    prepared = Node(tmp / "prepared", healthz, "node")
    prepare(prepared)
    point = 1
    while True:
        node = Node(tmp / f"p{point}", healthz, "node", like=prepared)
        code = run(node, point)
        if code not in KILLED:
            assert code == ends and point > 5, f"the run ended ({code}) at point {point}"
            return
        yield point, node
        point += 1


SETTINGS = '{"aws": {"defaultCacheDuration": "2h"}}'
FLAG_FILES = ("etc/default/kubelet", "var/lib/kubelet/kubeadm-flags.env")


def kubelet_finds_its_files(root: str) -> bool:
    """As a kubelet started now would find them (a power cut, then the boot's start, before any
    rerun): the config and bin dir its flags name are there, and each provider of that config
    has its plugin there, runnable through its links (followed inside the node)."""
    node = NodeRoot.at(root)
    flags = " ".join(
        Path(root, name).read_text() for name in FLAG_FILES if Path(root, name).exists()
    )
    config = re.search(r"--image-credential-provider-config=([^\s\"]+)", flags)
    bin_dir = re.search(r"--image-credential-provider-bin-dir=([^\s\"]+)", flags)
    if config is None and bin_dir is None:
        return True
    if config is None or bin_dir is None or not Path(node.host(config[1])).is_file():
        return False
    names = re.findall(r"^- name: (\S+)$", Path(node.host(config[1])).read_text(), re.MULTILINE)
    return bool(names) and all(
        os.access(node.host(f"{bin_dir[1]}/{name}"), os.X_OK) for name in names
    )


@pytest.fixture(scope="module")
def unhealthy() -> Iterator[str]:
    with serve(lambda request: FakeResponse.text("down", status=500)) as kubelet:
        yield f"{kubelet.url}/healthz"


@pytest.mark.parametrize("change", ["first install", "config change", "upgrade", "rollback"])
def test_apply_killed_at_every_point(
    tmp_path: Path, healthz: str, unhealthy: str, change: str
) -> None:
    """A first install; a config change (a restart); an upgrade to a new bundle (no restart); a
    config change whose kubelet does not come back (the restart, then the rollback and its
    restart): each killed at every point."""

    def prepare(node: Node) -> None:
        if change != "first install":
            assert node.apply() == 0

    more: tuple[str, ...] = ()
    if change in ("config change", "rollback"):
        more = ("--provider-settings", SETTINGS)
    if change == "rollback":
        # given after the node's own, so they count; a short wait: it never comes back
        more += ("--healthz", unhealthy, "--health-timeout", "0.2")
    if change == "upgrade":
        newer = fake_bundle(tmp_path / "bundle-9.9.9", "9.9.9").parent
        more = ("--bundle", str(newer), "--version", "9.9.9")
    ends = 1 if change == "rollback" else 0  # rolled back: exit 1, the node as it was
    reference = Node(tmp_path / "reference", healthz, "node")
    original = reference.tree()
    prepare(reference)
    before = reference.tree()
    assert reference.apply(0, *more) == ends
    applied = reference.tree()
    assert (applied == before) == (change == "rollback")
    covered = journaled = 0
    run = lambda n, p: n.apply(p, *more)  # noqa: E731
    for point, node in points(tmp_path, healthz, prepare, run, ends):
        assert kubelet_finds_its_files(node.root), f"after a kill at point {point}"
        twin = Node(tmp_path / f"p{point}", healthz, "twin", like=node)  # as the kill left it
        # (c) uninstall right after the kill (a change journaled: given up, put back)
        left = twin.journaled()
        assert twin.uninstall() == 0, f"point {point}"
        assert twin.tree() == original, f"uninstall after a kill at point {point}"
        assert left == ("is undone with the rest" in twin.said), twin.said
        # (a) the same command again (a change journaled: finished first), then (b) uninstall
        left = node.journaled()
        journaled += left
        assert node.apply(0, *more) == ends, f"point {point}"
        assert left == ("finished the change a killed agent run began" in node.said), node.said
        assert _same_but_paths(node.tree(), applied, node, reference), f"rerun after point {point}"
        assert node.uninstall() == 0
        assert node.tree() == original, f"uninstall after a rerun, point {point}"
        covered += 1
    print(f"{change}: {covered} kill points, {journaled} with the agent's journal left")
    assert covered >= 20 and journaled >= 3


def test_uninstall_killed_at_every_point(tmp_path: Path, healthz: str) -> None:
    reference = Node(tmp_path / "reference", healthz, "node")
    original = reference.tree()
    covered = 0
    for point, node in points(tmp_path, healthz, lambda n: n.apply(), lambda n, p: n.uninstall(p)):
        assert kubelet_finds_its_files(node.root), f"after a kill at point {point}"
        assert node.uninstall() == 0, f"a second uninstall after a kill at point {point}"
        assert node.tree() == original, f"point {point}"
        covered += 1
    print(f"uninstall: {covered} kill points")
    assert covered >= 10


def _same_but_paths(found: dict[str, Any], expected: dict[str, Any], a: Node, b: Node) -> bool:
    """Two nodes' trees are the same (the config and state name their own root nowhere, so the
    trees compare as they are)."""
    return found == expected and a.root != b.root and shutil.which("true") is not None


def would_not_start(node: Node, *more: str) -> list[str]:
    """What doctor --root (the kubelet's own checks) says would stop the node's kubelet starting
    ([]: it would start)."""
    done = run_cli_forked("doctor", "--root", node.root, "--offline", "--json", *more)
    found = json.loads(done.stdout)
    return [c["message"] for c in found["checks"] if "would NOT start" in c["message"]]


def test_mode_files_uninstall_killed_at_every_point_leaves_a_kubelet_that_starts(
    tmp_path: Path, healthz: str
) -> None:
    """The chart's mode files on a node provisioned with the flags alone (no config before the
    agent's): uninstall killed at every point. At each kill the config the flags name, with its
    bin dir, is one the kubelet starts with (doctor --root, the kubelet's own checks: our config
    with every plugin, or the bootstrap with its own); the uninstall run again ends as an
    uninterrupted one (the bootstrap left, nothing of the agent's)."""
    from credprovider.paths import AGENT_BIN_DIR, AGENT_CONFIG

    files = ["--files-only", "--config", AGENT_CONFIG, "--bin-dir", AGENT_BIN_DIR]

    def prepare(node: Node) -> None:
        shutil.rmtree(Path(node.root))
        Path(node.root, "var/lib/credprovider").mkdir(parents=True)  # the pod's hostPath
        node.common += files
        assert node.apply() == 0

    def starts(node: Node) -> list[str]:
        return would_not_start(node, "--config", AGENT_CONFIG, "--bin-dir", AGENT_BIN_DIR)

    reference = Node(tmp_path / "reference", healthz, "node")
    prepare(reference)
    assert reference.uninstall() == 0
    uninstalled = reference.tree()
    assert AGENT_CONFIG in uninstalled and starts(reference) == []
    covered = 0
    for point, node in points(tmp_path, healthz, prepare, lambda n, p: n.uninstall(p)):
        assert starts(node) == [], f"the kubelet would not start after a kill at point {point}"
        assert node.uninstall() == 0, f"a second uninstall after a kill at point {point}"
        assert node.tree() == uninstalled, f"point {point}"
        covered += 1
    print(f"mode files uninstall: {covered} kill points")
    assert covered >= 8


def test_migrating_apply_killed_at_every_point(tmp_path: Path, healthz: str) -> None:
    """flags.migrateInTree on a kubeadm node on --cloud-provider=aws: the apply killed at every
    point; uninstall right after the kill leaves what an uninterrupted apply's uninstall leaves
    (the node as it was, but external), or, killed before the flags file changed, the node exactly
    as it was. (The same apply run again after a kill is the first install's path, above: the
    migration changes the flags text and the original kept, not the steps.)"""

    def prepare(node: Node) -> None:
        Path(node.root, "var/lib/kubelet/kubeadm-flags.env").write_text(
            'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 --cloud-provider=aws"\n'
        )

    migrating = "--migrate-in-tree"
    reference = Node(tmp_path / "reference", healthz, "node")
    prepare(reference)
    original = reference.tree()
    assert reference.apply(0, migrating) == 0
    applied = reference.tree()
    assert reference.uninstall() == 0
    left = reference.tree()
    assert "--cloud-provider=external" in left["/etc/default/kubelet"][1]
    assert applied not in (left, original)
    covered = 0
    run = lambda n, p: n.apply(p, migrating)  # noqa: E731
    for point, node in points(tmp_path, healthz, prepare, run):
        assert node.uninstall() == 0, f"point {point}"
        assert node.tree() in (left, original), f"uninstall after a kill at point {point}"
        covered += 1
    print(f"migrating apply: {covered} kill points")
    assert covered >= 20


def test_a_cos_apply_and_uninstall_killed_at_every_point(tmp_path: Path, healthz: str) -> None:
    """GKE on COS (#61): the bundles go to /home/kubernetes/bin (paths.AGENT_EXEC_HOME), the state
    stays in the agent's home. The first apply, then uninstall, each killed at every point: the
    same command again (or uninstall right after the kill) ends as an uninterrupted run does, and
    uninstall leaves the node byte for byte as it was."""
    from tests.integration.cli.test_agent_pod_view import NODES, SYSTEMD

    files, _, _ = NODES["gke"]

    def gke(node: Node) -> None:
        shutil.rmtree(node.root)
        # the kubelet's own /var/lib/kubelet is on every node (the fixture's files leave it out)
        for path, text in {**SYSTEMD, **files, "/var/lib/kubelet/": ""}.items():
            place = Path(node.root, path.lstrip("/"))
            if path.endswith("/"):
                place.mkdir(parents=True, exist_ok=True)
                continue
            place.parent.mkdir(parents=True, exist_ok=True)
            place.write_text(text)
        node.common += ["--platform", "gke"]

    def cos_apply(node: Node, point: int) -> int:
        env = {FAILPOINT_ENV: str(point)} if point else {}
        done = run_cli_forked("agent", "apply", "--bundle", node.bundle, "--providers", "gcp",
                       *node.common, env=env)  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode

    reference = Node(tmp_path / "reference", healthz, "node")
    gke(reference)
    original = reference.tree()
    assert cos_apply(reference, 0) == 0
    applied = reference.tree()
    assert any(p.startswith(f"{AGENT_EXEC_HOME}/versions/") for p in applied), sorted(applied)
    covered = {"apply": 0, "uninstall": 0}
    for point, node in points(tmp_path / "apply", healthz, gke, cos_apply):
        twin = Node(tmp_path / "apply" / f"p{point}", healthz, "twin", like=node)
        assert twin.uninstall() == 0 and twin.tree() == original, f"uninstall after {point}"
        assert cos_apply(node, 0) == 0 and node.tree() == applied, f"apply again after {point}"
        assert node.uninstall() == 0 and node.tree() == original, f"point {point}"
        covered["apply"] += 1

    def installed(node: Node) -> None:
        gke(node)
        assert cos_apply(node, 0) == 0

    for point, node in points(
        tmp_path / "uninstall", healthz, installed, lambda n, p: n.uninstall(p)
    ):
        assert node.uninstall() == 0 and node.tree() == original, f"uninstall again after {point}"
        covered["uninstall"] += 1
    print(f"COS: {covered} kill points")
    assert covered["apply"] >= 20 and covered["uninstall"] >= 10


@pytest.mark.parametrize("bin_dir", ["none yet", "with its own plugin"])
def test_a_k3s_apply_and_uninstall_killed_at_every_point_leave_a_kubelet_that_starts(
    tmp_path: Path, healthz: str, bin_dir: str
) -> None:
    """k3s passes the kubelet its bin dir whenever the directory exists beside a config (both or
    neither), and the kubelet does not start while a plugin its config names is missing there. A
    node whose config names ecr-credential-provider, with no bin dir yet or with the node's own
    plugin in it: the first apply and the uninstall, each killed at every point. At each kill the
    kubelet would start (doctor, its own checks: k3s gives it the bin dir with the plugin in it, or
    neither flag; no link points nowhere); uninstall right after the kill leaves the node as it
    was; the same command again ends as an uninterrupted run does. The uninterrupted runs'
    restarts are checked the same way."""
    from tests.platformnodes import k3s

    node_k3s = k3s()
    if bin_dir == "none yet":
        plugin = f"{node_k3s.bin_dir}/ecr-credential-provider"
        files = {path: text for path, text in node_k3s.files.items() if path != plugin}
        node_k3s = replace(node_k3s, files=files, executables=())

    def prepare(node: Node) -> None:
        shutil.rmtree(node.root)
        node_k3s.build(Path(node.root))
        assert Path(node.root, node_k3s.bin_dir.lstrip("/")).exists() == bool(node_k3s.executables)

    reference = Node(tmp_path / "reference", healthz, "node")
    prepare(reference)
    original = reference.tree()
    checked = _restart_checked(tmp_path, reference.root)
    assert reference.apply(0, *checked) == 0 and would_not_start(reference) == [], reference.said
    applied = reference.tree()
    assert any(path.startswith(f"{node_k3s.bin_dir}/") for path in applied)
    covered = {"apply": 0, "uninstall": 0}
    for point, node in points(tmp_path / "apply", healthz, prepare, lambda n, p: n.apply(p)):
        assert would_not_start(node) == [], (
            f"the kubelet would not start after a kill at point {point}"
        )
        twin = Node(tmp_path / "apply" / f"p{point}", healthz, "twin", like=node)
        assert twin.uninstall() == 0 and twin.tree() == original, f"uninstall after {point}"
        assert node.apply() == 0 and node.tree() == applied, f"apply again after {point}"
        covered["apply"] += 1

    def installed(node: Node) -> None:
        prepare(node)
        assert node.apply() == 0

    assert reference.uninstall(0, *checked) == 0 and reference.tree() == original
    for point, node in points(
        tmp_path / "uninstall", healthz, installed, lambda n, p: n.uninstall(p)
    ):
        assert would_not_start(node) == [], (
            f"the kubelet would not start after a kill at point {point}"
        )
        assert node.uninstall() == 0 and node.tree() == original, f"uninstall again after {point}"
        covered["uninstall"] += 1
    print(f"k3s: {covered} kill points")
    assert covered["apply"] >= 20 and covered["uninstall"] >= 10


def _restart_checked(tmp: Path, root: str) -> list[str]:
    """A ``--restart-command`` that fails where the kubelet would not start with the node's files
    (doctor: its own checks); the run then rolls back and exits 1."""
    script = tmp / "restart-checked"
    doctor = f"{sys.executable} -m credprovider credprovider doctor --root {root} --offline"
    script.write_text(f"#!/bin/sh\n! {doctor} | grep -q 'would NOT start'\n")
    script.chmod(0o755)
    return ["--restart-command", f"{script} {{unit}}"]

"""The crash-point suite for the commands operators run by hand (issue #46): ``credprovider
install`` (a first install, and an upgrade to another target with ``--force``) and ``migrate
--write``, each killed (SIGKILL) at every call that changes the node in turn (the engine's kill
points, ``credprovider/tool/change/failpoint.py``). After each kill, the same command run again
exits 0 and leaves the node as an uninterrupted run does: the same files, links, modes and
contents, no temporary left (a backup a killed run made is kept, as the docs say: the old file's
text, whole).

These commands keep backups instead of a journal, so "as an uninterrupted run" is checked with the
backups' names (they carry the time) set aside and their contents compared."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from credprovider.tool.change.failpoint import FAILPOINT_ENV, KILLED_STATUS
from tests.helpers import run_cli
from tests.integration.cli.conftest import fake_bundle
from tests.unit.tool.test_agent_apply import tree

KILLED = (-9, KILLED_STATUS)
BACKUP = re.compile(r"\.credprovider-backup-[0-9TZ.-]+$")


def comparable(root: Path) -> tuple[dict[str, Any], list[Any]]:
    """The tree without its backups, and the backups' contents (sorted); the node's own
    directory, which its files name, written ``{node}``."""
    found = {
        path: (kind, text.replace(str(root), "{node}"), mode)
        for path, (kind, text, mode) in tree(str(root)).items()
    }
    backups = sorted(value for path, value in found.items() if BACKUP.search(path))
    rest = {path: value for path, value in found.items() if not BACKUP.search(path)}
    return rest, backups


def run(node: Path, argv: list[str], point: int = 0) -> int:
    env = {FAILPOINT_ENV: str(point)} if point else {}
    done = run_cli(*[a.replace("{node}", str(node)) for a in argv], env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode


def killed_everywhere(tmp: Path, prepare: Callable[[Path], None], argv: list[str]) -> int:
    """Kill ``argv`` at each point in turn on a node ``prepare`` made; the rerun must converge.
    How many points were covered."""
    reference = tmp / "reference"
    prepare(reference)
    assert run(reference, argv) == 0
    expected = comparable(reference)
    point = 1
    while True:
        node = tmp / f"p{point}"
        prepare(node)
        code = run(node, argv, point)
        if code not in KILLED:
            assert code == 0 and point > 3, f"the run ended ({code}) at point {point}"
            return point - 1
        assert run(node, argv) == 0, f"rerun after a kill at point {point}"
        files, backups = comparable(node)
        assert files == expected[0], f"rerun after a kill at point {point}"
        assert [b for b in backups if b not in expected[1]] == [], f"point {point}"
        assert not [p for p in files if "credprovider-new" in p], f"point {point}"
        point += 1


def fresh(node: Path) -> None:
    (node / "etc/kubernetes").mkdir(parents=True)


INSTALL = [
    "install", "--providers", "aws,gcp", "--bin-dir", "{node}/etc/kubernetes/bin",
    "--config-out", "{node}/etc/kubernetes/credential-providers.yaml",
]  # fmt: skip


def test_install_killed_at_every_point(tmp_path: Path) -> None:
    target = fake_bundle(tmp_path / "target", "0.2.0")
    covered = killed_everywhere(tmp_path, fresh, [*INSTALL, "--target", str(target)])
    print(f"install: {covered} kill points")
    assert covered >= 5


def test_an_upgrade_with_force_killed_at_every_point(tmp_path: Path) -> None:
    old = fake_bundle(tmp_path / "old", "0.1.0")
    new = fake_bundle(tmp_path / "new", "0.2.0")

    def installed(node: Path) -> None:
        fresh(node)
        assert run(node, [*INSTALL, "--target", str(old)]) == 0

    covered = killed_everywhere(tmp_path, installed, [*INSTALL, "--target", str(new), "--force"])
    print(f"install --force: {covered} kill points")
    assert covered >= 3


def test_migrate_write_killed_at_every_point(tmp_path: Path) -> None:
    target = fake_bundle(tmp_path / "target", "0.2.0")

    def kubeadm_node(node: Path) -> None:
        fresh(node)
        (node / "var/lib/kubelet").mkdir(parents=True)
        (node / "var/lib/kubelet/kubeadm-flags.env").write_text(
            'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 --cloud-provider=aws"\n'
        )
        (node / "etc/default").mkdir(parents=True)
        (node / "etc/default/kubelet").write_text("KUBELET_EXTRA_ARGS=--v=2\n")
        assert run(node, [*INSTALL, "--target", str(target)]) == 0  # the plugins first

    migrate = [
        "migrate", "--kubelet-flags-file", "{node}/var/lib/kubelet/kubeadm-flags.env",
        "--kubelet-flags-file", "{node}/etc/default/kubelet",
        "--bin-dir", "{node}/etc/kubernetes/bin",
        "--config-out", "{node}/etc/kubernetes/credential-providers.yaml", "--write",
    ]  # fmt: skip
    covered = killed_everywhere(tmp_path, kubeadm_node, migrate)
    print(f"migrate --write: {covered} kill points")
    assert covered >= 5

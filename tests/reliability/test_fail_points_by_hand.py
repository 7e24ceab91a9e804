"""The failure-point suite for the changes operators make by hand: ``credprovider install`` (a
first install, one with ``--copy`` and its upgrade, an upgrade with ``--force``) and ``migrate
--write``, each made to fail (an ``OSError``, as a full disk, an immutable file or a read-only
mount fails it) at every call that changes the node in turn (``fail:N``,
``credprovider/tool/change/failpoint.py``), where the crash-point suite kills them.

A failure is not a kill: the run is there to handle it. Each ends with one line and exit 1, and
the node is left as it was before the command, byte for byte (every file, link, mode and backup;
no journal), "nothing was changed" (change/abort.py); or, where only the change's commit failed
(each path already changed), the change stands with its journal and the same command run again
finishes it. Where putting back fails too (``fail-from:N``: that call and every later one fail),
the node is left as a kill there leaves it: it holds what the crash-point suite checks, and the
same command run again ends as an uninterrupted run does. An operator's Ctrl-C at each point
(``interrupt:N``) puts the change back as a failure does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from credprovider.tool.change.durable import TEMPORARY_SUFFIX
from credprovider.tool.change.failpoint import FAIL, FAIL_FROM, INTERRUPT
from tests.integration.cli.conftest import fake_bundle
from tests.reliability.test_crash_points_by_hand import (
    INSTALL,
    MIGRATE,
    _config_has_its_plugins,
    _flags_name_what_is_there,
    _kubeadm_node,
    _links_and_flags_hold,
    armed_run,
    comparable,
    copy_and_its_upgrade,
    fresh,
    run,
    theirs,
    undo_of_a_migrate,
)

NOTHING_CHANGED = ": nothing was changed ("


def failed_everywhere(
    tmp: Path,
    prepare: Callable[[Path], None],
    argv: list[str],
    holds: Callable[[Path], bool] = lambda node: True,
) -> int:
    """``argv`` on a node ``prepare`` made, failing at each point in turn (see the module); how
    many points were covered."""
    reference = tmp / "reference"
    prepare(reference)
    assert run(reference, argv) == 0 and holds(reference)
    expected = comparable(reference)
    point, put_back, stopped = 1, 0, 0
    while True:
        node = tmp / f"f{point}"
        prepare(node)
        before = comparable(node)
        code, said = armed_run(node, argv, f"{FAIL}{point}")
        if code == 0:  # the run ended before the point: every point was covered
            assert point > 3 and put_back >= 3, f"the run ended at point {point}"
            assert stopped >= (0 if argv[0] == "undo" else 3), stopped
            return point - 1
        assert code == 1 and said.count("\n") == 1, f"point {point}: {said}"
        assert "Input/output error" in said, f"point {point}: {said}"
        assert TEMPORARY_SUFFIX not in said, f"point {point}: names a temporary: {said}"
        if NOTHING_CHANGED in said:
            assert comparable(node) == before, f"point {point}: {said}"
            put_back += 1
        elif argv[0] == "undo":  # it keeps no backup to put back from: the next run finishes it
            assert "the undo stopped part way; once that is mended, run it again" in said, said
            assert holds(node), f"point {point}: {said}"
            _converges(node, argv, expected, f"point {point}, then a rerun")
        else:  # its commit failed: each path is changed; the journal says so, the rerun commits
            assert f"the {argv[0]} stopped part way; once that is mended, run it again" in said
            assert _changed(node) == _changed(reference) and holds(node), f"point {point}: {said}"
            _converges(node, argv, expected, f"point {point}, then a rerun")
        node = tmp / f"g{point}"
        prepare(node)
        code, said = armed_run(node, argv, f"{FAIL_FROM}{point}")
        assert code == 1 and said.count("\n") == 1, f"from point {point}: {said}"
        assert holds(node), f"{argv[0]}: failing from point {point}: {said}"
        if NOTHING_CHANGED not in said:
            _converges(node, argv, expected, f"failing from point {point}, then a rerun")
        stopped += _interrupted(tmp / f"i{point}", prepare, argv, point, holds, expected)
        point += 1


def _interrupted(
    node: Path,
    prepare: Callable[[Path], None],
    argv: list[str],
    point: int,
    holds: Callable[[Path], bool],
    expected: tuple[object, list[object]],
) -> bool:
    """An operator's Ctrl-C at ``point``: the change put back, as after a failure (exit 1); or,
    where there is nothing to put back from (an undo's) or it had done all but its record, the
    run stops there as a kill does (exit 130, the shell's for SIGINT) and the next one finishes
    it. Whether it was put back."""
    prepare(node)
    before = comparable(node)
    code, said = armed_run(node, argv, f"{INTERRUPT}{point}")
    assert said.count("\n") == 1, f"interrupted at {point}: {said}"
    if code == 1:
        assert said.startswith(f"credprovider {argv[0]}: interrupted: nothing was changed ("), said
        assert comparable(node) == before, f"interrupted at {point}: {said}"
        return True
        assert (code, said) == (130, "credprovider: interrupted\n"), f"at {point}: {said}"
        assert holds(node), f"interrupted at {point}"
        _converges(node, argv, expected, f"interrupted at {point}, then a rerun")
    return False


def _changed(node: Path) -> dict[str, object]:
    """The node's files but the change's journal and records: each path as the change leaves
    it."""
    return {
        path: value
        for path, value in comparable(node)[0].items()
        if not path.endswith((".credprovider-journal", ".credprovider-undo"))
    }


def _converges(node: Path, argv: list[str], expected: tuple[object, list[object]], at: str) -> None:
    """The same command run again ends as an uninterrupted run does (an undo that had done all
    but its last flush finds nothing to undo: exit 1)."""
    done = argv[0] == "undo" and comparable(node) == expected
    assert run(node, argv) == (1 if done else 0), at
    files, backups = comparable(node)
    assert files == expected[0], at
    assert [b for b in backups if b not in expected[1]] == [], at


def test_install_failing_at_every_point(tmp_path: Path) -> None:
    target = fake_bundle(tmp_path / "target", "0.2.0")
    covered = failed_everywhere(
        tmp_path, fresh, [*INSTALL, "--target", str(target)], _config_has_its_plugins
    )
    print(f"install: {covered} failure points")


def test_an_install_with_copy_and_its_upgrade_failing_at_every_point(tmp_path: Path) -> None:
    first, upgrade = copy_and_its_upgrade(tmp_path, failed_everywhere)
    print(f"install --copy: {first} failure points, its upgrade {upgrade}")


def test_an_upgrade_with_force_over_their_files_failing_at_every_point(tmp_path: Path) -> None:
    """Over someone else's plugin and config (kept as backups, which a failure must not leave)."""
    new = fake_bundle(tmp_path / "new", "0.2.0")
    argv = [*INSTALL, "--target", str(new), "--force"]
    covered = failed_everywhere(tmp_path, lambda n: theirs(n, "ecr-credential-provider"), argv)
    print(f"install --force: {covered} failure points")


def test_migrate_write_failing_at_every_point(tmp_path: Path) -> None:
    target = fake_bundle(tmp_path / "target", "0.2.0")
    argv = [arg.replace("credential-providers.yaml", "new-config.yaml") for arg in MIGRATE]
    covered = failed_everywhere(
        tmp_path, lambda node: _kubeadm_node(node, target), argv, _flags_name_what_is_there
    )
    print(f"migrate --write: {covered} failure points")


def test_undo_failing_at_every_point(tmp_path: Path) -> None:
    """``undo`` of a migrate --write keeps no backup of what it replaces (the record's change made
    it): failing part way, it says so and leaves its journal, and the node holds what the
    crash-point suite checks; the same undo run again finishes it."""
    covered = undo_of_a_migrate(tmp_path, failed_everywhere, _links_and_flags_hold)
    print(f"undo: {covered} failure points")


@pytest.mark.parametrize("armed", [f"{FAIL}2", "fail-at:2", "2:fail", f"{FAIL}x"])
def test_the_failure_point_is_armed_only_as_written(armed: str, tmp_path: Path) -> None:
    """Only ``fail:N`` and ``fail-from:N`` fail a run (and a bare ``N`` kills it): any other value
    leaves it to run (an operator's environment can hold anything)."""
    target = fake_bundle(tmp_path / "target", "0.2.0")
    fresh(tmp_path / "node")
    code, said = armed_run(tmp_path / "node", [*INSTALL, "--target", str(target)], armed)
    assert (code == 1) == (armed == f"{FAIL}2"), said
    record = tmp_path / "node/etc/kubernetes/.credential-providers.yaml.credprovider-undo"
    assert record.exists() == (code == 0)
    if code == 0:
        assert json.loads(record.read_text())["change"] == "install"

"""What a path was, and the op that puts it back (credprovider/tool/change/kept.py): the one rule
undo (a journal's record) and the agent (its state's originals and rollback copies) both read
their kept copies by. Through undo: tests/integration/cli/test_undo.py; through the agent's
uninstall and apply: tests/reliability/redteam/test_root_escape.py."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from credprovider.tool.change.engine import Kind, Op
from credprovider.tool.change.kept import MAX_KEPT_FILE, Prior, Was
from tests.integration.cli.conftest import fake_bundle

FLAGS = b"KUBELET_EXTRA_ARGS=--v=2\n"


def _file(mode: int) -> Callable[[Path], None]:
    def make(copy: Path) -> None:
        copy.write_bytes(FLAGS)
        copy.chmod(mode)

    return make


def test_nothing_and_a_link_come_back_as_they_were(tmp_path: Path) -> None:
    path = tmp_path / "kubelet"
    assert Was(Prior.ABSENT).restore(path) == Op(Kind.ABSENT, path)
    assert Was(Prior.LINK, "/opt/x").restore(path) == Op(Kind.LINK, path, target="/opt/x")


def test_a_backup_goes_back_with_its_own_mode_and_a_copy_with_the_recorded_one(
    tmp_path: Path,
) -> None:
    path, copy = tmp_path / "kubelet", tmp_path / "copy"
    _file(0o640)(copy)
    assert Was(Prior.KEPT, copy=copy).restore(path) == Op(Kind.FILE, path, FLAGS, 0o640)
    recorded = Was(Prior.KEPT, copy=copy, mode=0o644).restore(path)
    assert recorded == Op(Kind.FILE, path, FLAGS, 0o644)


def test_a_kept_bundle_goes_back_as_a_tree_but_never_for_a_recorded_file(tmp_path: Path) -> None:
    path, copy = tmp_path / "bin", tmp_path / "kept"
    fake_bundle(copy, "0.1.0")
    assert Was(Prior.KEPT, copy=copy).restore(path) == Op(Kind.TREE, path, source=copy, links=True)
    assert "is not a file credprovider kept" in str(
        Was(Prior.KEPT, copy=copy, mode=0o644).restore(path)
    )


def _sparse(copy: Path) -> None:
    with copy.open("wb") as grown:
        grown.truncate(MAX_KEPT_FILE + 1)


UNFIT: dict[str, tuple[Callable[[Path], None], int | None, str]] = {
    "gone": (lambda copy: None, None, "is gone"),
    "a FIFO": (lambda copy: os.mkfifo(copy), None, "is not a file credprovider kept"),
    "a file too big": (_sparse, None, "is not a file credprovider kept"),
    "a link": (lambda copy: copy.symlink_to("/etc/passwd"), None, "is not a file"),
    "a directory not a bundle": (lambda copy: copy.mkdir(), None, "is not a bundle"),
    "writable by others": (_file(0o666), 0o644, "writable by others"),
    "a set-uid backup": (_file(0o4755), None, "mode 4755"),
    "a set-uid mode recorded": (_file(0o600), 0o2755, "mode 2755"),
    "a mode out of range": (_file(0o600), -1, "mode -1"),
}


@pytest.mark.parametrize("row", UNFIT)
def test_a_copy_that_is_not_what_was_kept_gives_no_op(tmp_path: Path, row: str) -> None:
    make, mode, said = UNFIT[row]
    copy = tmp_path / "copy"
    make(copy)
    found = Was(Prior.KEPT, copy=copy, mode=mode).restore(tmp_path / "kubelet")
    assert isinstance(found, str) and said in found, found
    assert str(copy) in found  # it says which copy

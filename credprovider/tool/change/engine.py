"""The node-change engine: every change credprovider makes to a node's files is a list of
:class:`Op` (a file holds these bytes, a link points there, a directory is a copy of that one,
nothing is there), and :func:`perform` is the one place an op is carried out: what it replaces
kept first under its backup name (made whole, flushed, before the path changes), then the change
as a durable write (:mod:`credprovider.tool.change.durable`: temporary, ``fsync``, rename,
``fsync`` of the directory).

``credprovider install``, ``migrate --write``, ``undo`` and the node agent run their ops as one
transaction (:func:`credprovider.tool.change.journal.run`): the intent (every op, with its new
content and, for a change by hand, its backup's name) journaled and flushed before the first
change, committed after the last. Every such run first finishes the change a killed run left
(``journal.recover``, the one recovery): an op already done is skipped, a backup already kept is
not taken again (it holds the original). The agent journals its links and its kubelet config and
flags beside its state (:mod:`credprovider.tool.agent.state`), which is its memory of the node
rather than a journal: what each path was before its first install, for uninstall, and what this
change found, for its rollback. Its bundle is placed before its journal begins, a fresh directory
made whole by one rename: a killed run's bundle may be gone with its image, and the next run's
plan places its own. What a transaction makes in a directory the node does not have yet is placed
with it, whole at one rename (:func:`carry_out`): a new bin dir never stands without its plugins.
"""

from __future__ import annotations

import filecmp
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from credprovider.tool.change.durable import (
    DIR_MODE,
    make_dirs,
    place_tree,
    remove_tree,
    remove_whole,
    removed_on_failure,
    rename_into_place,
    replace_file,
    replace_link,
    sync_directory,
    temporary_for,
)
from credprovider.tool.change.failpoint import reached

NEW_FILE_MODE = 0o644
# What a file, link or tree a change replaces is kept as, beside it: NAME.credprovider-backup-TIME.
BACKUP_SUFFIX = ".credprovider-backup-"


def backup_stamp() -> str:
    """The TIME of ``NAME.credprovider-backup-TIME``, for every path one run replaces."""
    return time.strftime("%Y%m%d%H%M%S")


class ChangeKind(StrEnum):
    """Which command's change a journal records."""

    INSTALL = "install"
    MIGRATE = "migrate"
    UNDO = "undo"
    AGENT = "agent"  # the node agent's links and kubelet inputs (agent/apply.py)


class Kind(StrEnum):
    """What an op makes of its path."""

    FILE = "file"  # a regular file holding ``data``
    LINK = "link"  # a symbolic link to ``target``
    TREE = "tree"  # a copy of the directory ``source``
    ABSENT = "absent"  # nothing (a file, link or tree removed)


@dataclass(frozen=True)
class Op:
    """One change to one node path (a host path: under ``--root`` already resolved)."""

    kind: Kind
    path: Path
    data: bytes = b""  # FILE
    mode: int | None = None  # FILE: None keeps the mode of the file there (a new one: 0644)
    target: str = ""  # LINK
    source: Path | None = None  # TREE
    links: bool = True  # TREE: the source's own top-level links copied too
    backup: Path | None = None  # where what ``path`` was is kept, made before it changes

    def done(self) -> bool:
        """Whether ``path`` already is as this op makes it (a killed run got this far)."""
        try:
            found = os.lstat(self.path)
        except (FileNotFoundError, NotADirectoryError):  # a file above it: nothing is there
            # ... and nothing a killed removal renamed away (durable.remove_whole) is left
            return self.kind is Kind.ABSENT and not os.path.lexists(temporary_for(self.path))
        except OSError:
            return False
        if self.kind is Kind.FILE:
            return stat.S_ISREG(found.st_mode) and _holds(self.path, self.data, found, self.mode)
        if self.kind is Kind.LINK:
            return stat.S_ISLNK(found.st_mode) and os.readlink(self.path) == self.target
        if self.kind is Kind.TREE:
            assert self.source is not None
            return stat.S_ISDIR(found.st_mode) and _same_tree(self.source, self.path, self.links)
        return False


def _holds(path: Path, data: bytes, found: os.stat_result, mode: int | None) -> bool:
    if mode is not None and stat.S_IMODE(found.st_mode) != mode:
        return False
    if found.st_size != len(data):
        return False
    try:
        return path.read_bytes() == data
    except OSError:
        return False


def _listing(top: Path, links: bool) -> list[tuple[str, str, int]]:
    """A tree's names, each with a link's target or a file's size (the top's links left out
    unless ``links``): what a copy must match."""
    found = []
    for directory, dirs, files in os.walk(top):
        for name in sorted([*dirs, *files]):
            place = Path(directory, name)
            relative = str(place.relative_to(top))
            if place.is_symlink():
                if links or place.parent != top:
                    found.append((relative, os.readlink(place), -1))
            elif place.is_file():
                found.append((relative, "", place.stat().st_size))
            else:
                found.append((relative, "/", 0))
    return sorted(found)


def _same_tree(source: Path, copy: Path, links: bool) -> bool:
    """``copy`` is ``source`` copied: the same names, links and file bytes."""
    listing = _listing(source, links)
    if listing != _listing(copy, True):
        return False
    return all(
        size < 0 or target == "/" or filecmp.cmp(source / name, copy / name, shallow=False)
        for name, target, size in listing
    )


def keep(path: Path, backup: Path) -> None:
    """What ``path`` is now, kept as ``backup``: a second name for a file or link, a flushed copy
    renamed into place for a directory, so that ``backup`` existing means it is whole. One that
    exists is kept as it is: a killed run of this change made it from the original."""
    if os.path.lexists(backup) or not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink():
        place_tree(path, backup)
        return
    reached(f"link {path} {backup}")
    os.link(path, backup, follow_symlinks=False)
    sync_directory(backup.parent)


def perform(op: Op) -> None:
    """Carry ``op`` out: its backup kept first, then the change, durably."""
    if op.backup is not None:
        keep(op.path, op.backup)
    if op.kind is Kind.FILE:
        replace_file(op.path, op.data, _mode_for(op))
    elif op.kind is Kind.LINK:
        replace_link(op.path, op.target)
    elif op.kind is Kind.TREE:
        assert op.source is not None
        place_tree(op.source, op.path, links=op.links)
    elif os.path.lexists(op.path) and not (op.path.is_dir() and not op.path.is_symlink()):
        remove_tree(op.path)  # a file or a link
    else:
        remove_whole(op.path)  # a directory, gone at one instant (or what a killed run left)


def _mode_for(op: Op) -> int:
    if op.mode is not None:
        return op.mode
    try:
        found = os.lstat(op.path)
    except OSError:
        return NEW_FILE_MODE
    return stat.S_IMODE(found.st_mode) if stat.S_ISREG(found.st_mode) else NEW_FILE_MODE


def carry_out(ops: Sequence[Op]) -> None:
    """``ops`` carried out in order (those already done skipped), what they make in a directory
    that is not there yet placed with it at the first one's turn, whole at one rename
    (:func:`_place_whole`), and a directory they empty and remove
    taken away whole at the first removal in it (``durable.remove_whole``). k3s and RKE2 pass the
    kubelet its bin dir whenever the directory exists beside a config, and the kubelet does not
    start while a plugin the config names is missing there: a bin dir never stands without its
    links."""
    removed = {op.path for op in ops if op.kind is Kind.ABSENT}
    for op in ops:
        directory = op.path.parent
        if op.kind is not Kind.ABSENT and not os.path.lexists(directory):
            _place_whole(directory, [o for o in ops if o.path.parent == directory])
        elif (
            op.kind is Kind.ABSENT
            and directory in removed
            and _only_removed(directory, ops, removed)
        ):
            remove_whole(directory)  # its entries and itself at one instant, not one by one
        if not op.done():
            perform(op)


def _place_whole(directory: Path, ops: Sequence[Op]) -> None:
    """``directory``, not there yet, made holding what ``ops`` put in it (links, files, a bundle
    copy), whole before one rename puts it in place: no instant shows it without them. A partial
    one a killed run left is made again; one a failure (a full disk) left is removed."""
    make_dirs(directory.parent)
    partial = temporary_for(directory)
    remove_tree(partial)
    with removed_on_failure(partial):
        reached(f"mkdir {partial}")
        partial.mkdir(mode=DIR_MODE)
        for op in ops:
            inside = partial / op.path.name
            if op.kind is Kind.LINK:  # no one sees the directory yet: made in place
                reached(f"symlink {inside}")
                inside.symlink_to(op.target)
            elif op.kind is not Kind.ABSENT:
                perform(replace(op, path=inside, backup=None))
        sync_directory(partial)
        rename_into_place(partial, directory)


def _only_removed(directory: Path, ops: Sequence[Op], removed: set[Path]) -> bool:
    """``ops`` remove ``directory`` (a real one) and everything in it (``removed``: the paths they
    remove), and make nothing in it."""
    if not directory.is_dir() or directory.is_symlink():
        return False
    made = any(op.kind is not Kind.ABSENT and directory in op.path.parents for op in ops)
    return not made and all(entry in removed for entry in directory.iterdir())

"""What a journal or a record may make a node do (:mod:`credprovider.tool.change.journal`): they
are read as hostile input, so every op must fit before any is carried out (:func:`unfit`). Paths
normalized and absolute, at least two levels deep; a backup beside its file, named as credprovider
names backups; file modes from :func:`allowed_mode` (never set-uid, never written by others); a
file replaced is the config the journal belongs to, or one holding kubelet flags (or a flag file's
name, when it is new); nothing replaces a directory but a bundle copy, over a bundle; an undo
removes only links, bundles, backups, the config, flag files, and directories it empties."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Final

from credprovider.paths import PACKAGE_LINKS_FILE
from credprovider.runtime.bundlecheck import FILES_MANIFEST
from credprovider.tool.change.engine import BACKUP_SUFFIX, ChangeKind, Kind, Op
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.access import FileProblem, UnreadableError, read_text
from credprovider.tool.node.flagfiles import units

# Names a new kubelet flag file has (/etc/default/kubelet, a drop-in, kubeadm's own).
_FLAG_FILE_NAMES: Final = ("kubelet", "kubeadm-flags.env", "environment")
_FLAG_FILE_SUFFIXES: Final = (".conf", ".env", ".service")
# What marks a bundle, or a copy of one (install --copy): its manifest.
BUNDLE_MANIFEST: Final = Path("_internal") / FILES_MANIFEST
_BACKUP_NAME: Final = re.compile(re.escape(BACKUP_SUFFIX) + r"[0-9]{14}(?:\.[0-9]{1,3})?")


def allowed_mode(mode: object) -> bool:
    """A mode a journal may give a file: permission bits only (never set-uid, set-gid or sticky),
    none that lets others write."""
    return type(mode) is int and 0 <= mode <= 0o777 and not mode & 0o002


def absolute(value: object, depth: int = 2) -> bool:
    """A normalized absolute path (no ``..``, ``.`` or empty part, no NUL), never ``/``, at least
    ``depth`` levels deep (2: never ``/etc`` or ``/var`` either, which hold everything else)."""
    return (
        isinstance(value, str)
        and "\0" not in value
        and os.path.isabs(value)
        and os.path.normpath(value) == value
        and not value.startswith("//")
        and value != "/"
        and value.count("/") >= depth
    )


def above(made: object, path: Path) -> bool:
    """``made`` lists directories above ``path``, the nearest first (never ``/`` or ``/etc``)."""
    if not isinstance(made, list) or len(made) > 64:
        return False
    parents = [str(parent) for parent in path.parents]
    return all(absolute(d) for d in made) and made == parents[: len(made)]


def beside(backup: str, path: str) -> bool:
    return os.path.dirname(backup) == os.path.dirname(path) and backup != path


def unfit(
    op: Op, anchor: Path, change: ChangeKind = ChangeKind.INSTALL, going: Collection[str] = ()
) -> str:
    """Why ``op`` (its paths as this run reaches them) is not one ``change`` could have journaled
    for the config ``anchor`` ("": it is): see the module. ``going``: the paths the ops before it
    remove (a directory an undo removes holds nothing else)."""
    try:
        found: os.stat_result | None = os.lstat(op.path)
    except FileNotFoundError:
        found = None
    except OSError as exc:
        return f"{op.path}: {exc.strerror}"
    if op.kind is Kind.TREE or (op.kind is Kind.ABSENT and found and stat.S_ISDIR(found.st_mode)):
        if found is None or (stat.S_ISDIR(found.st_mode) and bundle_or_empty(op.path, going)):
            return ""
        return f"it would replace {op.path}, which is not a bundle"
    if found is not None and stat.S_ISDIR(found.st_mode):
        return f"it would replace the directory {op.path}"
    if found is None:
        return "" if op.kind is not Kind.FILE or op.path == anchor else _new_file(op.path)
    if op.kind is Kind.LINK or op.path == anchor:
        return ""
    if stat.S_ISLNK(found.st_mode):
        # an undo removes the links install made, or puts back a file one --force replaced
        return "" if change is ChangeKind.UNDO else _no_flags(op.path)
    if _is_package_links(op.path) or (op.kind is Kind.ABSENT and is_backup(op.path)):
        return ""
    return "" if _holds_flags(op.path) else _no_flags(op.path)


def is_backup(path: Path) -> bool:
    """``path`` is named as a backup credprovider keeps (``NAME.credprovider-backup-TIME``)."""
    name, _, stamp = path.name.rpartition(BACKUP_SUFFIX)
    return bool(name) and _BACKUP_NAME.fullmatch(BACKUP_SUFFIX + stamp) is not None


def backup_of(backup: Path, path: Path) -> bool:
    """``backup`` is a backup of ``path``, beside it."""
    return (
        backup.parent == path.parent
        and is_backup(backup)
        and (backup.name.rpartition(BACKUP_SUFFIX)[0] == path.name)
    )


def _new_file(path: Path) -> str:
    name = path.name
    if name in _FLAG_FILE_NAMES or name.endswith(_FLAG_FILE_SUFFIXES) or _is_package_links(path):
        return ""
    return f"it would create {path}, which is neither its config nor a kubelet flag file"


def _no_flags(path: Path) -> str:
    return f"it would replace {path}, which holds no kubelet flags"


def _is_package_links(path: Path) -> bool:
    return path.name == Path(PACKAGE_LINKS_FILE).name


def is_bundle(path: Path) -> bool:
    """A credprovider bundle (or a copy of one) is at ``path``: its manifest is there."""
    return (path / BUNDLE_MANIFEST).is_file()


def bundle_or_empty(path: Path, going: Collection[str] = ()) -> bool:
    """A bundle, or a directory holding nothing but what is ``going``."""
    try:
        return is_bundle(path) or all(str(entry) in going for entry in path.iterdir())
    except OSError:
        return False


def unfit_ops(ops: Sequence[Op], anchor: Path, change: ChangeKind) -> list[str]:
    """Why each of ``ops``, in order, is not one ``change`` could have journaled (:func:`unfit`,
    each judged with the removals before it done); [] when they all fit."""
    going: set[str] = set()
    problems = []
    for op in ops:
        problem = unfit(op, anchor, change, going)
        if op.kind is Kind.ABSENT:
            going.add(str(op.path))
        if problem:
            problems.append(problem)
    return problems


def _holds_flags(path: Path) -> bool:
    try:
        return bool(units(read_text(str(path))))
    except (FileProblem, UnreadableError, NodeChangeError):
        return False

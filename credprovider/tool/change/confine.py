"""What a journal or a record may make a node do (:mod:`~credprovider.tool.change.journalformat`):
they are read as hostile input, so every op must fit before any is carried out (:func:`unfit`). Paths
normalized and absolute, at least two levels deep; a backup beside its file, named as credprovider
names backups; file modes from :func:`allowed_mode` (never set-uid, never written by others); a
file replaced is the config the journal belongs to, the package's list of links, or one holding
kubelet flags; a new file is the config, that list or the file kubeadm's drop-in reads last (an
undo's: one it puts back from a backup beside it); a link made, replaced or removed is a plugin's
(its name a plugin's name), the config (an undo's: a flag file too) or, removed, a backup; one
install makes points at a bundle's executable; nothing replaces a directory but a bundle copy, over
a bundle, named as install names it; an undo removes only links, bundles, backups, the config, flag
files, and directories it empties."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Final

from credprovider.entry import plugin_of
from credprovider.paths import PACKAGE_LINKS_FILE
from credprovider.runtime.bundlecheck import FILES_MANIFEST
from credprovider.tool.change.engine import BACKUP_SUFFIX, ChangeKind, Kind, Op
from credprovider.tool.change.render import BUNDLE_COPY_DIR
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.access import FileProblem, UnreadableError, read_text
from credprovider.tool.node.flagfiles import units
from credprovider.tool.node.layouts import KUBEADM_EXTRA_ARGS_FILES

# Names a kubelet flag file has (/etc/default/kubelet, a drop-in, kubeadm's own): where an undo
# may put back a link migrate replaced.
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
    op: Op,
    anchor: Path,
    change: ChangeKind = ChangeKind.INSTALL,
    going: Collection[str] = (),
    journal: Sequence[Op] = (),
) -> str:
    """Why ``op`` (its paths as this run reaches them) is not one ``change`` could have journaled
    for the config ``anchor`` ("": it is): see the module. ``going``: the paths the ops before it
    remove (a directory an undo removes holds nothing else); ``journal``: all its ops."""
    try:
        found: os.stat_result | None = os.lstat(op.path)
    except FileNotFoundError:
        found = None
    except OSError as exc:
        return f"{op.path}: {exc.strerror}"
    if op.kind is Kind.TREE and op.path.name != BUNDLE_COPY_DIR:
        return f"it would copy a directory to {op.path}, which is not where install copies a bundle"
    if op.kind is Kind.TREE or (op.kind is Kind.ABSENT and found and stat.S_ISDIR(found.st_mode)):
        if found is None or (stat.S_ISDIR(found.st_mode) and bundle_or_empty(op.path, going)):
            return ""
        return f"it would replace {op.path}, which is not a bundle"
    if found is not None and stat.S_ISDIR(found.st_mode):
        return f"it would replace the directory {op.path}"
    if op.kind is Kind.LINK or (found is not None and stat.S_ISLNK(found.st_mode)):
        return _unfit_link(op, anchor, change, journal)
    if found is None:
        return "" if op.kind is not Kind.FILE else _new_file(op.path, anchor, change, journal)
    if op.path == anchor or str(op.path) == PACKAGE_LINKS_FILE:
        return ""
    if op.kind is Kind.ABSENT and is_backup(op.path):
        return ""
    return "" if _holds_flags(op.path) else _no_flags(op.path)


def _unfit_link(op: Op, anchor: Path, change: ChangeKind, journal: Sequence[Op]) -> str:
    """A link made, replaced or removed (or a file an undo puts back in a link's place): at a
    plugin's name or the config (a link an undo puts back: at a flag file's too, one migrate
    replaced); one install makes points at a bundle's executable, or at the copy it makes."""
    undo = change is ChangeKind.UNDO
    if op.kind is Kind.ABSENT and is_backup(op.path):
        return ""  # a link kept as a backup, removed: only the link goes
    if not (
        plugin_of(op.path.name) is not None
        or op.path == anchor
        or (undo and op.kind is Kind.LINK and _flag_file_name(op.path))
    ):
        return f"it would change the link {op.path}, which is not a plugin's or its config"
    if op.kind is Kind.FILE and not undo and op.path != anchor:
        return _no_flags(op.path)  # only an undo puts a file back where install made a link
    if op.kind is not Kind.LINK or undo:
        return ""  # an undo puts back the link the node had, wherever it pointed
    target = Path(op.target)  # a package's goes through its bin dir's link into the bundle
    copies = {o.path for o in journal if o.kind is Kind.TREE}
    if target.is_absolute() and (
        is_bundle(Path(os.path.realpath(target)).parent) or target.parent in copies
    ):
        return ""
    return f"it would point {op.path} at {op.target}, which is not a bundle's executable"


def _new_file(path: Path, anchor: Path, change: ChangeKind, journal: Sequence[Op]) -> str:
    """A file made where nothing is: the config, the package's list of links, the file kubeadm's
    drop-in reads last (where migrate adds the new flags); an undo's, one it puts back from a
    backup beside it (the journal removes that backup after)."""
    if path == anchor or str(path) in (PACKAGE_LINKS_FILE, *KUBEADM_EXTRA_ARGS_FILES):
        return ""
    removed = [o.path for o in journal if o.kind is Kind.ABSENT]
    if change is ChangeKind.UNDO and any(backup_of(kept, path) for kept in removed):
        return ""
    return f"it would create {path}, which is neither its config nor a kubelet flag file"


def _flag_file_name(path: Path) -> bool:
    return path.name in _FLAG_FILE_NAMES or path.name.endswith(_FLAG_FILE_SUFFIXES)


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


def _no_flags(path: Path) -> str:
    return f"it would replace {path}, which holds no kubelet flags"


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
        problem = unfit(op, anchor, change, going, ops)
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

"""The journaled transaction of a change run by hand (``credprovider install``, ``migrate
--write``; :func:`run`, and :func:`recover` after a kill): the engine's ops
(:mod:`credprovider.tool.change.engine`), each with its new content and its backup's name,
recorded and flushed before the first of them changes the node, removed once the last is done. A run killed between two ops (an OOM kill, a power cut) leaves the journal; the next run of
either command finishes it first, so the node never keeps half a change (a cloud flag gone from
one file, the credential flags not yet in the other; a link re-pointed, its config not written).

The journal lives beside the config the change writes (``.NAME.credprovider-journal``, 0600, in a
directory only root writes); it is used only if it is a regular file of this user's that no one
else may write, at most :data:`MAX_JOURNAL_BYTES` (checked before it is read), holding absolute
paths (anything else: one line, nothing done). A journal of an earlier version (``path``, ``text``,
``backup``: a file's whole new text) is read as file ops.

A journal is read as hostile input (a forged or damaged one must not act on the node): it may hold
only what install and migrate write, and every op must fit before any is carried out
(:func:`unfit`): files, links and bundle copies (never a removal), at normalized paths at least two
levels deep, their backups beside them, file modes from :data:`FILE_MODES` (never set-uid); a file
replaced is the config the journal belongs to, or one holding kubelet flags (or a flag file's name,
when it is new); nothing replaces a directory but a bundle copy, over a bundle.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from credprovider.tool.change.durable import remove_file, replace_file
from credprovider.tool.change.engine import Kind, Op, perform
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.structured import JsonTooDeep, bounded_json
from credprovider.tool.node.trust import owner_problem

SUFFIX: Final = ".credprovider-journal"
# A few configs and flag files, base64: far below this.
MAX_JOURNAL_BYTES: Final = 32 * 1024 * 1024
# The modes install and migrate give what they write.
FILE_MODES: Final = frozenset({0o600, 0o640, 0o644, 0o700, 0o750, 0o755})
# Names a new kubelet flag file has (/etc/default/kubelet, a drop-in, kubeadm's own).
_FLAG_FILE_NAMES: Final = ("kubelet", "kubeadm-flags.env", "environment")
_FLAG_FILE_SUFFIXES: Final = (".conf", ".env", ".service")


def journal_for(anchor: str | Path) -> Path:
    """The journal of changes anchored to the file ``anchor`` (the config they write)."""
    where = Path(anchor)
    return where.with_name(f".{where.name}{SUFFIX}")


def _entry(op: Op) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": str(op.kind), "path": str(op.path)}
    if op.kind is Kind.FILE:
        entry |= {"data": base64.b64encode(op.data).decode(), "mode": op.mode}
    elif op.kind is Kind.LINK:
        entry["target"] = op.target
    elif op.kind is Kind.TREE:
        entry |= {"source": str(op.source), "links": op.links}
    entry["backup"] = str(op.backup) if op.backup is not None else None
    return entry


def begin(journal: Path, ops: list[Op]) -> None:
    """The intent, flushed, before any of ``ops`` is carried out."""
    replace_file(journal, json.dumps([_entry(op) for op in ops]).encode(), 0o600)


def end(journal: Path) -> None:
    remove_file(journal)


def _absolute(value: object) -> bool:
    """A normalized absolute path at least two levels deep (never ``/`` or ``/etc``)."""
    return (
        isinstance(value, str)
        and "\0" not in value
        and os.path.isabs(value)
        and os.path.normpath(value) == value
        and not value.startswith("//")
        and value.count("/") >= 2
    )


def _op(item: object) -> Op | None:
    """The op a journal entry records, or None for one that is not an op install or migrate
    writes (see the module)."""
    if not isinstance(item, dict) or not _absolute(item.get("path")):
        return None
    backup = item.get("backup")
    if not (backup is None or (_absolute(backup) and _beside(backup, item["path"]))):
        return None
    path, kept = Path(item["path"]), Path(backup) if backup else None
    if "kind" not in item and isinstance(item.get("text"), str):  # an earlier version's
        return Op(Kind.FILE, path, item["text"].encode("utf-8"), backup=kept)
    kind = item.get("kind")
    if kind == Kind.FILE and isinstance(item.get("data"), str):
        mode = item.get("mode")
        if not (mode is None or (type(mode) is int and mode in FILE_MODES)):
            return None
        try:
            data = base64.b64decode(item["data"], validate=True)
        except (binascii.Error, ValueError):
            return None
        return Op(Kind.FILE, path, data, mode, backup=kept)
    if kind == Kind.LINK and isinstance(item.get("target"), str) and "\0" not in item["target"]:
        return Op(Kind.LINK, path, target=item["target"], backup=kept)
    if kind == Kind.TREE and _absolute(item.get("source")) and type(item.get("links")) is bool:
        return Op(Kind.TREE, path, source=Path(item["source"]), links=item["links"], backup=kept)
    return None  # a removal, or anything else: install and migrate never journal it


def _beside(backup: str, path: str) -> bool:
    return os.path.dirname(backup) == os.path.dirname(path) and backup != path


def unfit(op: Op, anchor: Path) -> str:
    """Why ``op`` (its paths as this run reaches them) is not one install or migrate could have
    journaled for the config ``anchor`` ("": it is): see the module."""
    try:
        found: os.stat_result | None = os.lstat(op.path)
    except FileNotFoundError:
        found = None
    except OSError as exc:
        return f"{op.path}: {exc.strerror}"
    if op.kind is Kind.TREE:
        if found is None or (stat.S_ISDIR(found.st_mode) and _bundle_or_empty(op.path)):
            return ""
        return f"it would replace {op.path}, which is not a bundle"
    if found is not None and stat.S_ISDIR(found.st_mode):
        return f"it would replace the directory {op.path}"
    if op.kind is Kind.LINK or op.path == anchor:
        return ""
    if found is None:
        name = op.path.name
        if name in _FLAG_FILE_NAMES or name.endswith(_FLAG_FILE_SUFFIXES):
            return ""
        return f"it would create {op.path}, which is neither its config nor a kubelet flag file"
    if stat.S_ISLNK(found.st_mode) or not _holds_flags(op.path):
        return f"it would replace {op.path}, which holds no kubelet flags"
    return ""


def _bundle_or_empty(path: Path) -> bool:
    from credprovider.runtime.bundlecheck import FILES_MANIFEST

    try:
        return (path / "_internal" / FILES_MANIFEST).is_file() or not any(path.iterdir())
    except OSError:
        return False


def _holds_flags(path: Path) -> bool:
    from credprovider.tool.node.access import FileProblem, UnreadableError, read_text
    from credprovider.tool.node.flagfiles import units

    try:
        return bool(units(read_text(str(path))))
    except (FileProblem, UnreadableError, NodeChangeError):
        return False


def pending(journal: Path) -> list[Op]:
    """What an interrupted run meant to do ([] when there is no journal)."""
    try:
        found = os.lstat(journal)
    except FileNotFoundError:
        return []
    except PermissionError:  # a directory this user cannot search: no change of theirs is there
        return []
    problem = owner_problem(str(journal), found, os.geteuid())
    if not stat.S_ISREG(found.st_mode) or problem:
        raise NodeChangeError(
            f"{journal} is not a journal credprovider wrote ({problem or 'not a regular file'}): "
            "nothing was changed; remove it once you have checked the files it would name"
        )
    if found.st_size > MAX_JOURNAL_BYTES:
        raise NodeChangeError(
            f"{journal} is {found.st_size} bytes, more than a journal credprovider writes: "
            "nothing was changed; check the files a killed run was writing, then remove it"
        )
    try:
        data = bounded_json(journal.read_bytes())
    except (ValueError, JsonTooDeep, OSError):
        data = None
    ops = [_op(item) for item in data] if isinstance(data, list) else [None]
    if any(op is None for op in ops):
        raise NodeChangeError(
            f"{journal} is damaged: nothing was changed; check the files a killed run was "
            "writing (their backups are beside them), then remove it"
        )
    return [op for op in ops if op is not None]


def check_source(journal: Path, op: Op) -> None:
    """Refuse to finish a copy whose source is gone (the bundle a killed install copied)."""
    if op.kind is Kind.TREE and not (op.source is not None and op.source.is_dir()):
        raise NodeChangeError(
            f"{journal} would finish copying {op.source} to {op.path}, and {op.source} is gone: "
            "nothing was changed; remove the journal, then run the install again"
        )


def run(journal: Path, ops: Sequence[Op]) -> list[Op]:
    """``ops`` as one transaction: those not already done journaled (flushed) first, carried out
    in order, the journal removed after the last. The ops carried out."""
    todo = [op for op in ops if not op.done()]
    if not todo:
        return []
    begin(journal, todo)
    for op in todo:
        perform(op)
    end(journal)
    return todo


def recover(journal: Path, rebase: Callable[[Op], Op] | None = None) -> list[Op]:
    """The change a killed run journaled, finished (each op not yet done, carried out; its
    backup taken only if the killed run had not); the journal then removed. ``rebase``: each op
    as this run reaches its paths (the agent's, under ``--root``). The ops finished."""
    ops = [rebase(op) if rebase is not None else op for op in pending(journal)]
    todo = [op for op in ops if not op.done()]
    anchor = journal.with_name(journal.name[1 : -len(SUFFIX)])
    for op in todo:
        problem = unfit(op, anchor)
        if problem:
            raise NodeChangeError(
                f"{journal} is not a change credprovider journals ({problem}): nothing was "
                "changed; check the files it names, then remove it"
            )
        check_source(journal, op)
    finished = []
    for op in todo:
        perform(op)
        finished.append(op)
    end(journal)
    return finished

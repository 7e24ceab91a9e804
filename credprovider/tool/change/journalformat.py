"""The journal's format: where a change's journal and the record of the last change live, their
typed entries (:class:`Entry`: an op and what its path was; :class:`Transaction`: a change's
kind and its entries), how an entry is written (:func:`encoded`), and :func:`read`, which takes a
journal or record as hostile input. The transactions that write and replay them are
:mod:`credprovider.tool.change.journal`.

The journal and the record live beside the config the change writes (``.NAME.credprovider-*``,
0600, in a directory only root writes); each is used only if it is a regular file of this user's
that no one else may write, at most :data:`MAX_JOURNAL_BYTES` (checked before it is read), holding
absolute paths (anything else: one line, nothing done). A journal of an earlier version (a list of
ops, or of ``path``, ``text``, ``backup``: a file's whole new text) is read as file ops.

A journal is read as hostile input (a forged or damaged one must not act on the node): it may hold
only what install, migrate, undo and the agent write (a removal only in an undo's), and every op
must fit before any is carried out: one by hand as :mod:`credprovider.tool.change.confine` says,
the agent's as its state says (:mod:`credprovider.tool.agent.recovery`), neither in the other's
place.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from credprovider.tool.change.confine import above, absolute, allowed_mode, beside
from credprovider.tool.change.engine import ChangeKind, Kind, Op
from credprovider.tool.change.kept import Prior, Was
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.access import FileProblem, read_bytes
from credprovider.tool.node.structured import JsonTooDeep, bounded_json
from credprovider.tool.node.trust import owner_problem

SUFFIX: Final = ".credprovider-journal"
RECORD_SUFFIX: Final = ".credprovider-undo"
# A few configs and flag files, base64: far below this.
MAX_JOURNAL_BYTES: Final = 32 * 1024 * 1024


@dataclass(frozen=True)
class Entry:
    """One op of a change and what its path was before it (``None``: a journal of an earlier
    version, which did not say)."""

    op: Op
    was: Was | None = None


@dataclass(frozen=True)
class Transaction:
    change: ChangeKind
    entries: tuple[Entry, ...]

    @property
    def ops(self) -> list[Op]:
        return [entry.op for entry in self.entries]


def journal_for(anchor: str | Path) -> Path:
    """The journal of changes anchored to the file ``anchor`` (the config they write)."""
    where = Path(anchor)
    return where.with_name(f".{where.name}{SUFFIX}")


def record_for(anchor: str | Path) -> Path:
    """The record of the last change anchored to ``anchor``, which ``credprovider undo`` reads."""
    where = Path(anchor)
    return where.with_name(f".{where.name}{RECORD_SUFFIX}")


def anchor_of(journal: Path) -> Path:
    """The config a journal or record is anchored to."""
    suffix = SUFFIX if journal.name.endswith(SUFFIX) else RECORD_SUFFIX
    return journal.with_name(journal.name[1 : -len(suffix)])


def encoded(entry: Entry) -> dict[str, Any]:
    """``entry`` as the journal holds it (JSON: a file's content in base64)."""
    op = entry.op
    found: dict[str, Any] = {"kind": str(op.kind), "path": str(op.path)}
    if op.kind is Kind.FILE:
        found |= {"data": base64.b64encode(op.data).decode(), "mode": op.mode}
    elif op.kind is Kind.LINK:
        found["target"] = op.target
    elif op.kind is Kind.TREE:
        found |= {"source": str(op.source), "links": op.links}
    found["backup"] = str(op.backup) if op.backup is not None else None
    if entry.was is not None:
        was = entry.was
        found["was"] = (
            {"prior": str(was.prior)}
            | ({"target": was.target} if was.prior is Prior.LINK else {})
            | ({"for_undo": True} if was.for_undo else {})
            | ({"made": list(was.made)} if was.made else {})
        )
    return found


def _op(item: object, removal: bool) -> Op | None:
    """The op a journal entry records, or None for one that is not an op install, migrate or (a
    removal, when ``removal``) undo writes (see the module)."""
    if not isinstance(item, dict) or not absolute(item.get("path")):
        return None
    backup = item.get("backup")
    if not (backup is None or (absolute(backup) and beside(backup, item["path"]))):
        return None
    path, kept = Path(item["path"]), Path(backup) if backup else None
    if "kind" not in item and isinstance(item.get("text"), str):  # an earlier version's
        return Op(Kind.FILE, path, item["text"].encode("utf-8"), backup=kept)
    kind = item.get("kind")
    if kind == Kind.FILE and isinstance(item.get("data"), str):
        mode = item.get("mode")
        if not (mode is None or allowed_mode(mode)):
            return None
        try:
            data = base64.b64decode(item["data"], validate=True)
        except (binascii.Error, ValueError):
            return None
        return Op(Kind.FILE, path, data, mode, backup=kept)
    if kind == Kind.LINK and isinstance(item.get("target"), str) and "\0" not in item["target"]:
        return Op(Kind.LINK, path, target=item["target"], backup=kept)
    if kind == Kind.TREE and absolute(item.get("source")) and type(item.get("links")) is bool:
        return Op(Kind.TREE, path, source=Path(item["source"]), links=item["links"], backup=kept)
    if kind == Kind.ABSENT and removal and kept is None:
        return Op(Kind.ABSENT, path)
    return None  # anything else: install, migrate and undo never journal it


def _was(item: dict[str, Any], op: Op) -> Was | bool | None:
    """What an entry says its path was (``None``: it does not say; ``False``: damaged)."""
    if "was" not in item:
        return None
    found = item["was"]
    if not isinstance(found, dict):
        return False
    prior = found.get("prior")
    made = found.get("made", [])
    if prior == Prior.ABSENT and set(found) <= {"prior", "made"} and above(made, op.path):
        return Was(Prior.ABSENT, made=tuple(made))
    target = found.get("target")
    if prior == Prior.LINK and isinstance(target, str) and "\0" not in target and target:
        return Was(Prior.LINK, target)
    for_undo = found.get("for_undo", False)
    if prior == Prior.KEPT and op.backup is not None and type(for_undo) is bool:
        return Was(Prior.KEPT, for_undo=for_undo)
    return False


def read(journal: Path, what: str = "journal") -> Transaction | None:
    """The change a journal (or record: ``what``) holds; ``None`` when there is none. Read as
    hostile input (see the module): anything else is refused, in one line."""
    try:
        found = os.lstat(journal)
    except (FileNotFoundError, NotADirectoryError):  # a file where its directory would be
        return None
    except PermissionError:  # a directory this user cannot search: no change of theirs is there
        return None
    problem = owner_problem(str(journal), found, os.geteuid())
    if not stat.S_ISREG(found.st_mode) or problem:
        raise NodeChangeError(
            f"{journal} is not a {what} credprovider wrote ({problem or 'not a regular file'}): "
            "nothing was changed; remove it once you have checked the files it would name"
        )
    if found.st_size > MAX_JOURNAL_BYTES:
        raise NodeChangeError(
            f"{journal} is {found.st_size} bytes, more than a {what} credprovider writes: "
            "nothing was changed; check the files a killed run was writing, then remove it"
        )
    try:  # bounded again as it is read: a journal that grew since its lstat is not read whole
        data = bounded_json(read_bytes(str(journal), limit=MAX_JOURNAL_BYTES))
    except (ValueError, JsonTooDeep, FileProblem):  # UnreadableError: root's, read by another user
        data = None
    transaction = _transaction(data)
    if transaction is None:
        raise NodeChangeError(
            f"{journal} is damaged: nothing was changed; check the files a killed run was "
            "writing (their backups are beside them), then remove it"
        )
    return transaction


def _transaction(data: object) -> Transaction | None:
    if isinstance(data, list):  # an earlier version's: install or migrate, priors not said
        change, items = ChangeKind.INSTALL, data
    elif isinstance(data, dict) and isinstance(data.get("ops"), list) and len(data) == 2:
        try:
            change, items = ChangeKind(str(data.get("change"))), data["ops"]
        except ValueError:
            return None
    else:
        return None
    entries = []
    for item in items:
        op = _op(item, removal=change is ChangeKind.UNDO)
        was = _was(item, op) if op is not None and isinstance(item, dict) else False
        if op is None or was is False:
            return None
        entries.append(Entry(op, was if isinstance(was, Was) else None))
    return Transaction(change, tuple(entries))

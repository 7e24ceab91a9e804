"""The journaled transaction of every change credprovider makes to a node (``credprovider
install``, ``migrate --write``, ``undo``, the node agent's runs; :func:`run`, and :func:`recover`
after a kill): the engine's ops (:mod:`credprovider.tool.change.engine`), each with its new
content, its backup's name and what its path was before (:class:`Was`), recorded and flushed
before the first of them changes the node. A run killed between two ops (an OOM kill, a power cut)
leaves the journal; the next run finishes it first, so the node never keeps half a change (a cloud
flag gone from one file, the credential flags not yet in the other; a link re-pointed, its config
not written).

Once the last op of a change by hand is done its journal becomes the record of the last change
(:func:`commit`: one rename to ``.NAME.credprovider-undo``), which ``credprovider undo`` reverses
(:mod:`credprovider.tool.change.undo`); an undo's own journal, committed, removes the record. So
that every op can be reversed, whatever a path held is kept first: a link's target in the journal,
a file or tree under its backup name (one taken for the undo alone, ``for_undo``, is removed when a
later change's record replaces this one). The agent's journal (``ChangeKind.AGENT``, beside its
state) keeps no backup and leaves no record: its state keeps what each path was, and ``agent
uninstall`` is its undo.

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
import json
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from credprovider.tool.change.confine import (
    above,
    absolute,
    allowed_mode,
    backup_of,
    beside,
    bundle_or_empty,
    unfit_ops,
)
from credprovider.tool.change.durable import (
    missing_dirs,
    remove_file,
    remove_tree,
    rename_into_place,
    replace_file,
    sync_file,
)
from credprovider.tool.change.engine import (
    BACKUP_SUFFIX,
    ChangeKind,
    Kind,
    Op,
    backup_stamp,
    carry_out,
)
from credprovider.tool.change.kept import Prior, Was
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.access import FileProblem, read_bytes
from credprovider.tool.node.structured import JsonTooDeep, bounded_json
from credprovider.tool.node.trust import owner_problem

SUFFIX: Final = ".credprovider-journal"
RECORD_SUFFIX: Final = ".credprovider-undo"
# A few configs and flag files, base64: far below this.
MAX_JOURNAL_BYTES: Final = 32 * 1024 * 1024
# Changes whose journal keeps no backup and leaves no record behind.
_UNKEPT: Final = frozenset({ChangeKind.UNDO, ChangeKind.AGENT})


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


def _anchor_of(journal: Path) -> Path:
    suffix = SUFFIX if journal.name.endswith(SUFFIX) else RECORD_SUFFIX
    return journal.with_name(journal.name[1 : -len(suffix)])


def _entry(entry: Entry) -> dict[str, Any]:
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


def _with_prior(op: Op, stamp: str) -> Entry:
    """``op`` and what its path is now; a file or tree with no backup given one (for undo)."""
    try:
        found = os.lstat(op.path)
    except FileNotFoundError:
        return Entry(op, Was(Prior.ABSENT, made=tuple(map(str, missing_dirs(op.path.parent)))))
    if stat.S_ISLNK(found.st_mode):
        return Entry(op, Was(Prior.LINK, os.readlink(op.path)))
    if op.backup is not None:
        return Entry(replace(op, backup=_unused(op.backup)), Was(Prior.KEPT))
    kept = _unused(Path(f"{op.path}{BACKUP_SUFFIX}{stamp}"))
    return Entry(replace(op, backup=kept), Was(Prior.KEPT, for_undo=True))


def _unused(backup: Path) -> Path:
    """``backup``, or, when an earlier change took that name this second, the first
    ``backup.N`` free: a backup that exists is never taken for this change's."""
    found, number = backup, 0
    while os.path.lexists(found) and number < 999:
        number += 1
        found = backup.with_name(f"{backup.name}.{number}")
    return found


def begin(journal: Path, ops: Sequence[Op], change: ChangeKind = ChangeKind.INSTALL) -> list[Op]:
    """The intent, flushed, before any of ``ops`` is carried out; each op as it is journaled
    (with the backup that keeps what it replaces)."""
    stamp = backup_stamp()
    # an undo's ops need no undo of their own: what they replace is what the record's change made;
    # the agent's state keeps what its paths were
    entries = [Entry(op) if change in _UNKEPT else _with_prior(op, stamp) for op in ops]
    document = {"change": str(change), "ops": [_entry(entry) for entry in entries]}
    replace_file(journal, json.dumps(document).encode(), 0o600)
    return [entry.op for entry in entries]


def commit(journal: Path, change: ChangeKind, rebase: Callable[[Op], Op] | None = None) -> None:
    """The change journaled in ``journal`` is done: it becomes the record of the last change (the
    record it replaces losing the backups taken for its undo alone), or, an undo's, the record
    it reversed goes with it."""
    record = record_for(_anchor_of(journal))
    if change in _UNKEPT:
        if change is ChangeKind.UNDO:
            remove_file(record)
        remove_file(journal)
        return
    for kept in _undo_only_backups(record):
        where = rebase(Op(Kind.ABSENT, kept)).path if rebase is not None else kept
        remove_tree(where)
    sync_file(journal)  # flushed when it was written; said again where the rename is
    rename_into_place(journal, record)


def _undo_only_backups(record: Path) -> list[Path]:
    """The backups an earlier record took for its undo alone (none if it is not one of ours):
    only names beside their path that a backup has."""
    try:
        earlier = read(record)
    except NodeChangeError:
        return []
    return [
        entry.op.backup
        for entry in (earlier.entries if earlier is not None else ())
        if entry.was is not None
        and entry.was.for_undo
        and entry.op.backup is not None
        and backup_of(entry.op.backup, entry.op.path)
    ]


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
    except FileNotFoundError:
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


def _put_back(op: Op, change: ChangeKind) -> bool:
    """An undo's bundle copy put back from its backup, whose backup the undo then removed: done."""
    return (
        change is ChangeKind.UNDO
        and op.kind is Kind.TREE
        and op.source is not None
        and not os.path.lexists(op.source)
        and os.path.isdir(op.path)
        and bundle_or_empty(op.path)
    )


def check_source(journal: Path, op: Op) -> None:
    """Refuse to finish a copy whose source is gone (the bundle a killed install copied)."""
    if op.kind is Kind.TREE and not (op.source is not None and op.source.is_dir()):
        raise NodeChangeError(
            f"{journal} would finish copying {op.source} to {op.path}, and {op.source} is gone: "
            "nothing was changed; remove the journal, then run the install again"
        )


def run(
    journal: Path,
    ops: Sequence[Op],
    change: ChangeKind = ChangeKind.INSTALL,
    rebase: Callable[[Op], Op] | None = None,
) -> list[Op]:
    """``ops`` as one transaction: those not already done journaled (flushed) first, carried out
    in order, the journal then committed (:func:`commit`). ``rebase``: each op as this run
    reaches its paths (the agent's, journaled as the node names them, under ``--root``). The ops
    carried out, as journaled."""
    reach = rebase if rebase is not None else _as_is
    todo = [op for op in ops if not reach(op).done()]
    if not todo:
        return []
    journaled = begin(journal, todo, change)
    carry_out([reach(op) for op in journaled])
    commit(journal, change)
    return journaled


def _as_is(op: Op) -> Op:
    return op


def recover(
    journal: Path,
    rebase: Callable[[Op], Op] | None = None,
    judge: Callable[[Op], str] | None = None,
    first: Callable[[list[Op]], None] | None = None,
) -> list[Op]:
    """The change a killed run journaled, finished (each op not yet done, carried out; its
    backup taken only if the killed run had not), then committed. ``rebase``: each op as this
    run reaches its paths (under ``--root``). ``judge``: the agent's (and only the agent's
    journal's) rule for its ops, why one is not its own ("": it is). ``first``: given the ops
    left, once they are judged and before any is carried out (the agent records the
    directories they will make). The ops finished."""
    left = _left(journal, rebase, judge)
    if left is None:
        return []
    change, todo = left
    for op in todo:
        check_source(journal, op)
    if first is not None:
        first(todo)
    carry_out(todo)
    commit(journal, change, rebase)
    return todo


def discard(
    journal: Path, rebase: Callable[[Op], Op] | None, judge: Callable[[Op], str]
) -> list[Op]:
    """The agent's change a killed run journaled, given up rather than finished, by a run that
    puts back every path it names (``agent uninstall``): judged as :func:`recover` judges it (a
    forged one is refused, nothing changed), then removed. The ops it had left to do."""
    left = _left(journal, rebase, judge)
    if left is None:
        return []
    remove_file(journal)
    return left[1]


def _left(
    journal: Path, rebase: Callable[[Op], Op] | None, judge: Callable[[Op], str] | None
) -> tuple[ChangeKind, list[Op]] | None:
    """The change ``journal`` holds and its ops not yet done, each as this run reaches it, once
    every one of them fits (see the module); ``None``: no journal."""
    transaction = read(journal)
    if transaction is None:
        return None
    ops = [rebase(op) if rebase is not None else op for op in transaction.ops]
    todo = [op for op in ops if not (op.done() or _put_back(op, transaction.change))]
    if (transaction.change is ChangeKind.AGENT) != (judge is not None):
        problems = [f"the {transaction.change} change it holds is not journaled there"]
    elif judge is not None:
        problems = [problem for problem in map(judge, todo) if problem]
    else:
        problems = unfit_ops(todo, _anchor_of(journal), transaction.change)
    if problems:
        raise NodeChangeError(
            f"{journal} is not a change credprovider journals ({problems[0]}): nothing was "
            "changed; check the files it names, then remove it"
        )
    return transaction.change, todo


def finish_left(anchor: str | Path) -> list[Op]:
    """The change a killed install, migrate --write or undo left beside the config ``anchor``
    (its journal), finished: what every such run does first. The ops finished."""
    return recover(journal_for(anchor))

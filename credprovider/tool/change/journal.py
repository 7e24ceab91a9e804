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

The format (its names, its typed entries, reading one as hostile input) is
:mod:`credprovider.tool.change.journalformat`.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from credprovider.tool.change.abort import put_back
from credprovider.tool.change.confine import (
    backup_of,
    bundle_or_empty,
    unfit_ops,
)
from credprovider.tool.change.durable import (
    missing_dirs,
    overlong,
    remove_file,
    remove_tree,
    rename_into_place,
    replace_file,
    sync_file,
    temporary_for,
)
from credprovider.tool.change.engine import (
    BACKUP_SUFFIX,
    ChangeKind,
    Kind,
    Op,
    backup_stamp,
    carry_out,
)
from credprovider.tool.change.journalformat import (
    Entry,
    anchor_of,
    encoded,
    journal_for,
    read,
    record_for,
)
from credprovider.tool.change.kept import Prior, Was
from credprovider.tool.change.lock import node_lock
from credprovider.tool.errors import NodeChangeError, node_failure
from credprovider.tool.node.access import FileProblem
from credprovider.tool.node.root import HOST

# Changes whose journal keeps no backup and leaves no record behind.
_UNKEPT: Final = frozenset({ChangeKind.UNDO, ChangeKind.AGENT})


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


def begin(journal: Path, ops: Sequence[Op], change: ChangeKind = ChangeKind.INSTALL) -> list[Entry]:
    """The intent, flushed, before any of ``ops`` is carried out; each op as it is journaled
    (with the backup that keeps what it replaces) and what its path was."""
    stamp = backup_stamp()
    # an undo's ops need no undo of their own: what they replace is what the record's change made;
    # the agent's state keeps what its paths were
    entries = [Entry(op) if change in _UNKEPT else _with_prior(op, stamp) for op in ops]
    _require_names_fit(journal, [entry.op for entry in entries])
    document = {"change": str(change), "ops": [encoded(entry) for entry in entries]}
    replace_file(journal, json.dumps(document).encode(), 0o600)
    return entries


def _require_names_fit(journal: Path, ops: Sequence[Op]) -> None:
    """Every name the change would make (each path, the temporary name it is first written
    under, its backup's; the journal's and the record's) one the file system takes: a name too
    long fails at its op, every time, and a journal left then could never be finished. Refused
    before anything is written (NodeChangeError)."""
    made = [(name, journal) for name in (temporary_for(journal), record_for(anchor_of(journal)))]
    for op in ops:
        made.append((temporary_for(op.path.parent), op.path))  # a new directory, made whole
        for name in (op.path, op.backup):
            if name is not None:
                made += [(name, op.path), (temporary_for(name), op.path)]
    for name, for_path in made:
        problem = overlong(name)
        if problem:
            raise NodeChangeError(
                f"nothing was changed: {for_path} cannot be written, since {name}, a name the "
                f"change makes for it, is too long ({problem}): give a shorter name"
            )


def commit(journal: Path, change: ChangeKind, rebase: Callable[[Op], Op] | None = None) -> None:
    """The change journaled in ``journal`` is done: it becomes the record of the last change (the
    record it replaces losing the backups taken for its undo alone), or, an undo's, the record
    it reversed goes with it."""
    record = record_for(anchor_of(journal))
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
    try:
        entries = begin(journal, todo, change)
    except OSError as failure:
        if change is ChangeKind.AGENT:
            raise
        raise _aborted(journal, [], change, failure) from None
    journaled = [entry.op for entry in entries]
    try:
        carry_out([reach(op) for op in journaled])
    except (OSError, FileProblem) as failure:
        if change is ChangeKind.AGENT:  # left to its next run to finish, or to its rollback
            raise
        if change is ChangeKind.UNDO:  # it keeps no backup to put back from: finished later
            raise _left_part_done(journal, change, failure) from None
        raise _aborted(journal, entries, change, failure) from None
    except KeyboardInterrupt:  # an operator's Ctrl-C: stop, as if it had not begun
        if change in _UNKEPT:
            raise
        raise _aborted(journal, entries, change, None) from None
    try:
        commit(journal, change)
    except OSError as failure:  # every op done, its record not made: finished by the next run
        if change is ChangeKind.AGENT:
            raise
        raise _left_part_done(journal, change, failure) from None
    return journaled


def _aborted(
    journal: Path,
    entries: Sequence[Entry],
    change: ChangeKind,
    failure: OSError | FileProblem | None,
) -> NodeChangeError:
    """The error for a change by hand that failed part way (``None``: was interrupted), once
    what it did is put back (:mod:`credprovider.tool.change.abort`), or, where that fails too,
    left to the next run. A second interrupt while it puts back leaves the journal, as a kill."""
    try:
        changed = put_back(journal, entries)
    except (OSError, NodeChangeError, FileProblem) as again:
        how = node_failure(again) if isinstance(again, OSError) else str(again)
        also = f", and putting back what it did failed too ({how})"
        return _left_part_done(journal, change, failure, also)
    said = _said(failure)
    done = (
        f"what it had changed, {changed} path{'s' if changed > 1 else ''}, put back as it was"
        if changed
        else "it had changed no path yet"
    )
    return NodeChangeError(f"{said}: nothing was changed ({done})")


def _said(failure: OSError | FileProblem | None) -> str:
    if failure is None:
        return "interrupted"
    return node_failure(failure) if isinstance(failure, OSError) else str(failure)


def _left_part_done(
    journal: Path, change: ChangeKind, failure: OSError | FileProblem | None, also: str = ""
) -> NodeChangeError:
    said = _said(failure)
    return NodeChangeError(
        f"{said}: the {change} stopped part way{also}; once that is mended, run it again to "
        f"finish it (its journal {journal} says what is left)"
    )


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
    return _finish(journal, rebase, judge, first).ops


@dataclass(frozen=True)
class Finished:
    """What a change by hand finished first: the kind of change a killed run left beside its
    config (``None``: none was left) and the ops it had left to do."""

    change: ChangeKind | None
    ops: list[Op]


def _finish(
    journal: Path,
    rebase: Callable[[Op], Op] | None = None,
    judge: Callable[[Op], str] | None = None,
    first: Callable[[list[Op]], None] | None = None,
) -> Finished:
    """:func:`recover`'s work, saying also which kind of change it finished."""
    left = _left(journal, rebase, judge)
    if left is None:
        return Finished(None, [])
    change, todo = left
    for op in todo:
        check_source(journal, op)
    if first is not None:
        first(todo)
    carry_out(todo)
    commit(journal, change, rebase)
    return Finished(change, todo)


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
    judged = _judged(journal, rebase, judge)
    if judged is None:
        return None
    change, ops, todo = judged
    # a tree a kill left swapped aside (durable.place_tree), its op done: removed where the op
    # is one this journal may hold, as those left to do were judged
    for op in ops:
        if op.kind is not Kind.TREE or op in todo:
            continue
        if judge(op) if judge is not None else unfit_ops([op], anchor_of(journal), change):
            continue
        remove_tree(temporary_for(op.path))
    return change, todo


def _judged(
    journal: Path, rebase: Callable[[Op], Op] | None, judge: Callable[[Op], str] | None
) -> tuple[ChangeKind, list[Op], list[Op]] | None:
    """The change ``journal`` holds, its ops (each as this run reaches it) and those not yet
    done, once every one of them fits; nothing is changed. ``None``: no journal."""
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
        problems = unfit_ops(todo, anchor_of(journal), transaction.change)
    if problems:
        raise NodeChangeError(
            f"{journal} is not a change credprovider journals ({problems[0]}): nothing was "
            "changed; check the files it names, then remove it"
        )
    return transaction.change, ops, todo


def pending(anchor: str | Path) -> tuple[ChangeKind, int] | None:
    """The change a killed run left beside the config ``anchor`` and how many of its ops are left,
    judged as a run by hand judges it before it finishes it, with nothing changed (a dry run's
    question); ``None``: none was left. ``NodeChangeError``: one a run would refuse."""
    judged = _judged(journal_for(anchor), None, None)
    return None if judged is None else (judged[0], len(judged[2]))


@contextlib.contextmanager
def by_hand(anchor: str | Path, command: str) -> Iterator[Finished]:
    """A change by hand (``credprovider install``, ``migrate --write``, ``undo``) on this node:
    under the node's lock (change/lock.py, held as ``credprovider <command>``), once the change a
    killed one left beside the config ``anchor`` (its journal) is finished, which every such run
    does first."""
    with node_lock(HOST, f"credprovider {command}"):
        journal = journal_for(anchor)
        try:
            finished = _finish(journal)
        except OSError as exc:
            raise NodeChangeError(
                f"{node_failure(exc)}: the change an earlier run left part done (its journal "
                f"{journal}) cannot be finished until that is mended; nothing more was changed"
            ) from None
        yield finished

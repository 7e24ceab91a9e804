"""A change by hand that failed part way put back as it was, from its own journal: a database's
abort. A failure is an error the change meets while it runs (a full disk, an immutable file, a
read-only mount, a security module's refusal), not a kill: the run is still there to reverse what
it did, and the node is left as it was before the command, not half changed until someone mends
the cause and runs it again.

Each entry the change reached is put back as it says its path was (:meth:`Was.restore`, as
``credprovider undo`` does), last first, and the backups the change took are removed; the
directories it made are removed if they are empty then; the journal goes last. An entry the
change never reached is as it was (its path untouched, no backup taken): its put-back op is
already done. Killed while it puts back, the journal stays and the next run finishes the change
instead: either way, one whole change or none. Where the putting back fails too (the same cause),
the journal stays, and the next run finishes the change once that is mended.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from credprovider.tool.change.durable import remove_empty_dir, remove_file
from credprovider.tool.change.engine import Kind, Op, carry_out
from credprovider.tool.change.journalformat import Entry
from credprovider.tool.change.kept import Prior
from credprovider.tool.errors import NodeChangeError


def putting_back(entries: Sequence[Entry]) -> tuple[list[Op], list[Op]]:
    """The ops that put back each path ``entries`` (a change's, in its order) reached, last first,
    and those that then remove the backups it took. ``NodeChangeError``: a backup it took cannot
    give the path back (gone, or not what it kept)."""
    ops: list[Op] = []
    backups: list[Op] = []
    for entry in reversed(entries):
        op, was = entry.op, entry.was
        if was is None:  # a change that keeps no backup (an undo's): not put back
            continue
        taken = op.backup is not None and os.path.lexists(op.backup)
        if was.prior is Prior.KEPT and not taken:
            continue  # never reached: its backup is taken first, then the path changed
        restoring = replace(was, copy=op.backup).restore(op.path)
        if isinstance(restoring, str):
            raise NodeChangeError(restoring)
        ops.append(restoring)
        if taken and op.backup is not None:
            backups.append(Op(Kind.ABSENT, op.backup))
    return ops, backups


def put_back(journal: Path, entries: Sequence[Entry]) -> int:
    """The change ``journal`` holds (its ``entries``), which failed part way, reversed; the
    journal then removed. How many paths it had changed."""
    restoring, backups = putting_back(entries)
    changed = sum(not op.done() for op in restoring)
    carry_out(restoring + backups)
    made = {d for entry in entries if entry.was is not None for d in entry.was.made}
    for directory in sorted(made, key=lambda d: -d.count("/")):  # the deepest first
        remove_empty_dir(Path(directory))
    remove_file(journal)
    return changed

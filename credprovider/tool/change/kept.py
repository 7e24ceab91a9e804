"""What a node path was before a change, and the op that puts it back: one record (:class:`Was`)
for every change credprovider makes to a node. The journal's entries (``install``, ``migrate
--write``, read back by ``undo``: :mod:`credprovider.tool.change.journal`) and the agent's
originals and rollback copies (:mod:`credprovider.tool.agent.state`) are both a ``Was``, and both
are put back by :meth:`Was.restore`, the engine's op (:mod:`credprovider.tool.change.engine`).

A kept copy is read as hostile input, whoever kept it: the file or link it was replaced by, a FIFO
that would hold the reader for ever, a file too big to be a config or a flags file, one that others
may write (so not necessarily what was kept), a set-uid mode to give back, or a directory that is
not a bundle each make :meth:`Was.restore` say why, in one phrase, and give no op. A copy this
user may not read gives no verdict either way: its ``UnreadableError`` goes up to the caller
(``doctor`` as an operator, who is told to run it as root), never a "not what was kept".
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from credprovider.tool.change.confine import is_bundle
from credprovider.tool.change.engine import Kind, Op
from credprovider.tool.node.access import FileProblem, read_bytes

# A config or a flags file, kept: far below this.
MAX_KEPT_FILE: Final = 8 * 1024 * 1024


class Prior(StrEnum):
    """What a path was before the change."""

    ABSENT = "absent"  # nothing there
    LINK = "link"  # a link to ``Was.target``
    KEPT = "kept"  # a file (or, by hand, a bundle) kept as ``Was.copy``


@dataclass(frozen=True)
class Was:
    """What a path was before a change."""

    prior: Prior
    target: str = ""  # LINK
    # KEPT: where it is kept: a copy in the agent's home (a journal's entry keeps it as its op's
    # backup, beside the path, and undo gives it here)
    copy: Path | None = None
    # KEPT: the mode it goes back with, recorded with a file's copy (None: the copy's own, a
    # backup that is the file itself, or a bundle)
    mode: int | None = None
    for_undo: bool = False  # the journal's backup taken for the undo alone
    made: tuple[str, ...] = ()  # ABSENT: the directories above it that were not there either

    def restore(self, path: Path) -> Op | str:
        """The op that puts ``path`` back as this says it was, or why it cannot be (a kept copy
        that is not one credprovider kept: see the module)."""
        if self.prior is Prior.ABSENT:
            return Op(Kind.ABSENT, path)
        if self.prior is Prior.LINK:
            return Op(Kind.LINK, path, target=self.target)
        copy = self.copy
        if copy is None:
            return f"the record of {path} names no copy"
        try:
            found = os.lstat(copy)
        except OSError:
            return f"the copy {copy} of {path} is gone"
        if stat.S_ISDIR(found.st_mode) and self.mode is None:
            if not is_bundle(copy):
                return f"the copy {copy} of {path} is not a bundle"
            return Op(Kind.TREE, path, source=copy, links=True)
        if not stat.S_ISREG(found.st_mode) or found.st_size > MAX_KEPT_FILE:
            return f"the copy {copy} of {path} is not a file credprovider kept"
        if found.st_mode & 0o002:
            return f"the copy {copy} of {path} is writable by others, so not what was kept"
        mode = stat.S_IMODE(found.st_mode) if self.mode is None else self.mode
        if not 0 <= mode <= 0o777:  # permission bits only: never set-uid, set-gid or sticky
            return f"the copy {copy} of {path} would be put back with mode {mode:o}, never given"
        try:
            data = read_bytes(str(copy), limit=MAX_KEPT_FILE)
        except FileProblem as exc:
            return f"the copy {copy} of {path} cannot be read ({exc})"
        return Op(Kind.FILE, path, data, mode)

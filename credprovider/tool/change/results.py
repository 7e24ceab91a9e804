"""What a node change did, and what each of its steps does: one definition each, printed as their
values (``installed``, ``rolled back``; ``link``, ``unchanged``) by every command and annotation;
and :class:`Step`, the one vocabulary of install's and the agent's plans."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class Result(StrEnum):
    """The outcome of one run of a change (the agent's ``result``, the node's annotation)."""

    INSTALLED = "installed"
    UNCHANGED = "unchanged"  # nothing needed changing
    UNINSTALLED = "uninstalled"
    ROLLED_BACK = "rolled back"  # changed, the kubelet was not well, put back as it was
    REFUSED = "refused"  # nothing changed: the change would break the node (the detail says why)
    WAITING = "waiting"  # for a restart slot of the fleet's
    FAILED = "failed"

    @property
    def good(self) -> bool:
        """The node is as asked (a fleet's node needs no look)."""
        return self in (Result.INSTALLED, Result.UNCHANGED, Result.UNINSTALLED)


class Action(StrEnum):
    """One step of a change (install's and the agent's plans)."""

    PLACE = "place"  # a bundle in its versioned directory
    SWITCH = "switch"  # the ``current`` link to another version
    LINK = "link"  # a plugin name linked to the bundle
    UPGRADE = "upgrade"  # a link or copy of another credprovider version replaced
    REPLACE = "replace"  # someone else's file replaced (--force), kept as a backup
    COPY = "copy"  # the bundle copied (install --copy)
    WRITE = "write"  # the kubelet's config written
    MERGE = "merge"  # our providers merged into a config the platform manages
    FLAGS = "flags"  # the kubelet's two flags set
    RESTART = "restart"  # the kubelet's unit restarted
    UNCHANGED = "unchanged"


@dataclass
class Step:
    """One step of a planned change (install's, the agent's): what it does at ``path``, in one
    sentence (``detail``); a link's ``target``; why it needs ``--force`` (``refused``); where what
    it replaces is kept (``backup``)."""

    action: Action
    path: str
    detail: str
    target: str = ""  # a link's (place, switch and link steps)
    refused: str | None = None
    backup: str | None = None

    @property
    def would_change(self) -> bool:
        """It changes something when applied (it is neither refused nor already so)."""
        return not self.refused and self.action is not Action.UNCHANGED

    def describe(self, applied: bool = True) -> str:
        """The step as it was done; not ``applied``: as it would be (a dry run's plan), or, where
        another step was refused, as it was not done."""
        if self.refused:
            return f"refused: {planned(self.detail)}: {self.refused}"
        if applied or not self.would_change:
            return self.detail + (f" (the old one kept as {self.backup})" if self.backup else "")
        return planned(self.detail) + (
            f" (the old one to be kept as {self.backup})" if self.backup else ""
        )


# What a step's detail (and an undo's) starts with when said as done, and its verb as planned: a
# dry run, a refused plan and an undo's --dry-run say "write X", not "wrote X", of what is not done.
_PLANNED: Final = {
    "linked": "link",
    "re-pointed": "re-point",
    "replaced": "replace",
    "copied": "copy",
    "wrote": "write",
    "added": "add",
    "edited": "edit",
    "removed": "remove",
}


def planned(said: str) -> str:
    """``said`` (what a step did: ``wrote X``) as what it would do (``write X``)."""
    verb, space, rest = said.partition(" ")
    return f"{_PLANNED.get(verb, verb)}{space}{rest}"

"""What a node change did, and what each of its steps does: one definition each, printed as their
values (``installed``, ``rolled back``; ``link``, ``unchanged``) by every command and annotation;
and :class:`Step`, the one vocabulary of install's and the agent's plans."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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

    def describe(self, applied: bool = True) -> str:
        """The step as it was done; not ``applied``: as it was planned, and not done."""
        if self.refused:
            return f"refused: {self.detail}: {self.refused}"
        kept = f" (the old one kept as {self.backup})" if self.backup else ""
        if not applied and self.action is not Action.UNCHANGED:
            return f"not done (a step was refused): {self.detail}{kept}"
        return f"{self.detail}{kept}"

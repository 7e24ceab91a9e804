"""A change to the kubelet's inputs, confirmed or rolled back (the agent's apply and uninstall):
``restart(service)`` restarts the kubelet and ``healthy()`` must say so; if the restart fails or
the kubelet is not healthy, its config and flags are put back as the change found them
(``before``, kept in the state: :mod:`credprovider.tool.agent.state`), it is restarted again, and
the outcome says so (a rollback). With a :class:`Watch`, the node's own rollback is armed before
the restart and disarmed after (:mod:`credprovider.tool.agent.watchdog`): the restart is
commit-confirmed. Once the change is over, its rollback copies and debt go (:func:`settle`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from credprovider.tool.agent.restart import Restart
from credprovider.tool.agent.state import (
    BEFORE,
    AgentState,
    keep,
    restore_op,
    save,
)
from credprovider.tool.change.durable import remove_tree
from credprovider.tool.change.engine import carry_out
from credprovider.tool.change.kept import Was
from credprovider.tool.change.results import Result
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.root import NodeRoot


class Watch(Protocol):
    """The node's own rollback for a kubelet restart (agent/watchdog.py's Watchdog), and what
    the host itself does after an uninstall."""

    def arm(self, root: NodeRoot, state: AgentState) -> str: ...  # journals and starts it: its unit

    def disarm(self, unit: str) -> None: ...

    # removes, on the host, those of ``directories`` left empty
    def tidy(self, directories: tuple[str, ...]) -> None: ...


Healthy = Callable[[], str | None]  # None: healthy; else what is wrong


@dataclass
class Outcome:
    """What a run did."""

    result: Result
    changed: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # someone else's change, left as it is
    detail: str = ""
    healed: str = ""  # what the node's own rollback did since the last run (agent/watchdog.py)
    notes: list[str] = field(default_factory=list)


def keep_before(root: NodeRoot, state: AgentState, before: dict[str, Was], path: str) -> None:
    """``path`` as this change finds it, kept for its rollback with what the agent had written
    there."""
    before[path] = keep(root, BEFORE, path)
    written = state.written.get(path)
    if written is None:
        state.before_written.pop(path, None)
    else:
        state.before_written[path] = written


def settle(root: NodeRoot, state: AgentState) -> None:
    """The change is over (confirmed, or rolled back): its rollback copies and debt go."""
    state.before, state.before_written, state.restart_due, state.watchdog = None, {}, "", None
    save(root, state)
    remove_tree(root.host(BEFORE, follow=False))


def put_back(root: NodeRoot, state: AgentState) -> None:
    """The kubelet's config and flags back as the change under way found them (``before``)."""
    restoring = {
        path: restore_op(root, path, was) for path, was in sorted((state.before or {}).items())
    }
    carry_out(list(restoring.values()))
    for path in restoring:
        written = state.before_written.get(path)
        if written is None:
            state.written.pop(path, None)
        else:
            state.written[path] = written
    save(root, state)


def arm(root: NodeRoot, state: AgentState, watch: Watch | None, outcome: Outcome) -> str:
    """The node's own rollback armed for the restart about to be made ('' if none)."""
    if watch is None:
        return ""
    from credprovider.tool.agent.systemd import SystemdError

    try:
        return watch.arm(root, state)
    except SystemdError as exc:  # the restart is still checked by this run
        state.watchdog = None
        save(root, state)
        outcome.notes.append(f"the node's own rollback could not be armed ({exc})")
        return ""


def disarm(watch: Watch | None, unit: str) -> None:
    """The armed rollback stopped (it would find its change settled anyway)."""
    if watch is None or not unit:
        return
    from credprovider.tool.agent.systemd import SystemdError

    with contextlib.suppress(SystemdError):  # if it fires, it finds nothing unconfirmed
        watch.disarm(unit)


def rolled_back(outcome: Outcome, detail: str) -> Outcome:
    """``outcome`` as a rollback ended it: what changed and restarted on the way, nothing kept."""
    return replace(outcome, result=Result.ROLLED_BACK, detail=detail, kept=[])


def restarted(
    service: str, restart: Restart, healthy: Healthy | None, outcome: Outcome
) -> str | None:
    """``service`` restarted and, with ``healthy``, checked: what went wrong, or None."""
    try:
        restart(service)
    except NodeChangeError as exc:
        return str(exc)
    outcome.restarted.append(service)
    return healthy() if healthy is not None else None


def restarted_again(service: str, restart: Restart, outcome: Outcome, detail: str) -> str:
    """A rollback's restart; ``detail`` with what became of it."""
    try:
        restart(service)
    except NodeChangeError as exc:
        return f"{detail}; restarting it again failed too ({exc})"
    outcome.restarted.append(service)
    return f"{detail} and it was restarted again"


def healed(root: NodeRoot, state: AgentState) -> str:
    """What the node's own rollback did since the last run, taken from the state (said once)."""
    healed = state.healed
    if healed is None:
        return ""
    state.healed = None
    save(root, state)
    return (
        f"the node rolled the change back by itself at {healed.at} (no agent "
        f"confirmed the kubelet's restart within the health wait): {healed.detail}"
    ).rstrip(": ")


def confirmed(
    root: NodeRoot,
    state: AgentState,
    restart: Restart,
    healthy: Healthy,
    outcome: Outcome,
    watch: Watch | None,
) -> Outcome:
    """The restart an apply owes the kubelet, made and checked (the node's own rollback armed
    meanwhile); rolled back if it fails."""
    service = state.restart_due
    armed = arm(root, state, watch, outcome)
    problem = restarted(service, restart, healthy, outcome)
    if problem is None:
        settle(root, state)
        disarm(watch, armed)
        return outcome
    put_back(root, state)
    detail = restarted_again(
        service,
        restart,
        outcome,
        f"the kubelet was not healthy after the restart ({problem}): its config and flags were "
        "put back",
    )
    settle(root, state)
    disarm(watch, armed)
    return rolled_back(outcome, detail)

"""``credprovider undo`` on a node whose change is the chart's agent's (its state is there, and no
change by hand is recorded beside the config): the agent's own uninstall
(:mod:`credprovider.tool.agent.uninstall`), by hand, nothing restarted, as every undo is. It is
planned and checked first the way an undo of install's is (:mod:`credprovider.tool.change.undo`):
what it puts back, and whether the kubelet would start on the node it leaves (an in-tree
``--cloud-provider`` its version refuses, flags naming a config the undo removes: refused without
``--force``). A file someone changed since the agent wrote it is kept, as uninstall keeps it (a
flags file loses only the agent's two flags: ``uninstall.agents_flags_out``). A kill at any
instant is finished by the next undo (or ``agent uninstall``): the agent's journal and its state,
recorded before each step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from credprovider.paths import AGENT_HOME
from credprovider.tool.agent.confirm import Outcome
from credprovider.tool.agent.state import (
    HOME_CHAIN,
    STATE,
    AgentState,
    home_top,
    recover_home,
    restoring,
    state_there,
)
from credprovider.tool.agent.statecheck import load
from credprovider.tool.agent.uninstall import agents_flags_out, holds_ours, uninstall
from credprovider.tool.change.durable import temporary_for
from credprovider.tool.change.engine import ChangeKind, Kind, Op
from credprovider.tool.change.kept import Prior, Was
from credprovider.tool.change.undo import PutBack, UndoPlan, config_named, start_problems
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.root import NodeRoot

# What the undo says the agent's change is, where by hand it would say "the install recorded
# beside X".
WHOSE: Final = f"the chart's agent's change (its state {STATE})"
# Said after it: the agent, still scheduled on the node, would make its change again.
STILL_SCHEDULED: Final = (
    "take the node out of the agent's nodeSelector (or uninstall the chart), or the agent's next "
    "start changes it again"
)


@dataclass
class AgentUndo:
    """The plan (its steps said, and what stands in its way) and the paths it keeps."""

    plan: UndoPlan
    kept: list[str] = field(default_factory=list)  # changed since the agent wrote them


def agents_change_left(root: NodeRoot) -> bool:
    """Something of the agent's change is on the node under ``root``: its state, or what a killed
    removal of its home left beside it (nothing is changed here)."""
    homes = (temporary_for(root.host(home, follow=False)) for home in HOME_CHAIN)
    return state_there(root) or any(os.path.lexists(home) for home in homes)


def agents_change_there(root: NodeRoot) -> bool:
    """The agent's state is on the node under ``root``, once what a killed removal of its home
    left beside it is gone (as uninstall clears it first: a kill after everything was put back
    leaves only that). Under the node's lock."""
    recover_home(root)
    return state_there(root)


def plan_agent_undo(
    root: NodeRoot, flags: Mapping[str, Sequence[str]], version: tuple[int, int] | None
) -> AgentUndo:
    """What undoing the agent's change on the node under ``root`` does (from its state, read as
    hostile input: :func:`credprovider.tool.agent.statecheck.load`), and what stands in its way:
    ``flags`` (each flag file's flags now) and ``version`` (the kubelet's) as for an undo of
    install's."""
    state = load(root)
    found = AgentUndo(UndoPlan(ChangeKind.AGENT))
    for path in sorted(state.originals):
        was = state.originals[path]
        op = restoring(root, path, was)
        if isinstance(op, str):
            found.plan.blocked.append(f"{path} cannot be put back: {op}")
        elif not op.done():
            if not _changed_since(root, state, path):
                found.plan.steps.append(PutBack(op, _said(path, was, op)))
                continue
            possible, edit = agents_flags_out(root, state, path, op)
            if not possible:
                found.kept.append(path)
            elif edit is not None:
                said = f"edited {path}: the agent's flags out, the edit made since it wrote it kept"
                found.plan.steps.append(PutBack(edit, said))
    top = home_top(state)  # a home provisioning made (mode files' bootstrap) keeps its files
    found.plan.steps.append(
        PutBack(Op(Kind.ABSENT, root.host(top, follow=False)),
                f"removed {top}, made for the agent's home (its state, bundles and kept copies)")
        if top
        else PutBack(Op(Kind.ABSENT, root.host(STATE, follow=False)),
                     f"removed the agent's state, bundles and kept copies from {AGENT_HOME}")
    )  # fmt: skip
    steps = found.plan.steps
    found.plan.would_not_start = start_problems(steps, flags, version)
    named = config_named(steps, flags)
    if any(step.op.kind is Kind.ABSENT and step.op.path == named for step in steps):
        found.plan.instead = (
            f"run credprovider agent uninstall --files-only, which leaves a bootstrap config at "
            f"{named} for the kubelet to start with"
        )
    return found


def _changed_since(root: NodeRoot, state: AgentState, path: str) -> bool:
    """``path`` is the kubelet's config or flags the agent wrote, and holds something else now
    (uninstall keeps it, only the agent's flags taken out of a flags file)."""
    ours = {sha for sha in (state.written.get(path), state.before_written.get(path)) if sha}
    return bool(ours) and not holds_ours(root, path, ours)


def _said(path: str, was: Was, op: Op) -> str:
    if was.prior is Prior.ABSENT:
        return f"removed {'the link ' if op.path.is_symlink() else ''}{path}"
    if was.prior is Prior.LINK:
        return f"{path} -> {was.target} again"
    return f"put back {path} from {was.copy}"


def kept_line(path: str) -> str:
    """What the undo says of a path it keeps."""
    return f"{path} was changed since the agent wrote it: kept as it is"


def apply_agent_undo(root: NodeRoot) -> Outcome:
    """The agent's uninstall with nothing restarted (the operator restarts the kubelet, as after
    every undo). Under the node's lock, which the caller holds."""
    return uninstall(root, "", _no_restart)


def _no_restart(unit: str) -> None:
    raise NodeChangeError(f"an undo restarts nothing (asked to restart {unit})")

"""The node agent applying its plan (:mod:`credprovider.tool.agent.plan`) to the node under
``root``, and taking it off again, as transactions:

* **Checked first.** Nothing changes when the bundle lacks a plugin the plan links, a path is not
  writable or lasting, or a plugin of the config it writes, started from the bundle with its
  entry's args and env, refuses them (a ``providerSettings`` typo would fail every pull).
* **Intent first.** Before the first change, what the run does to what the node had is recorded
  in its state (:mod:`credprovider.tool.agent.state`) and flushed: each path's original (before
  the first install), each directory it will make, the digest of each kubelet input it writes, the
  kubelet inputs as this change found them (``before``) and the restart it owes the kubelet
  (``restart_due``). Its bundle is then placed (a fresh directory, whole at one rename), and its
  links and kubelet inputs are one transaction of the one journal
  (:func:`credprovider.tool.change.journal.run`, ``ChangeKind.AGENT``): ops of the node-change
  engine, journaled as the node names their paths, carried out by its one executor.
* **Recovery first.** A run killed at any instant is finished by the next ``apply`` (its journal
  replayed by the one recovery before the node is planned again, each op judged against the
  state first: :mod:`credprovider.tool.agent.recovery`; then the files as the plan says, the
  restart that was due made and checked) or undone by ``uninstall`` (its journal judged the same
  way, then given up: every path it names is put back); neither takes the agent's own files for
  the node's originals.
* **Confirmed restarts.** When the kubelet's input changed, the restart is made and checked, and
  rolled back if the kubelet does not come back (:mod:`credprovider.tool.agent.confirm`).

Taking the agent off the node is :mod:`credprovider.tool.agent.uninstall`, built on the same steps.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Final

from credprovider.entry import TOOL_NAME
from credprovider.paths import AGENT_HOME
from credprovider.tool.agent.confirm import (
    Healthy,
    Outcome,
    Watch,
    confirmed,
    healed,
    keep_before,
    settle,
)
from credprovider.tool.agent.placement import not_executable, not_lasting, not_writable
from credprovider.tool.agent.plan import AgentPlan
from credprovider.tool.agent.recovery import under
from credprovider.tool.agent.restart import Restart
from credprovider.tool.agent.state import (
    BEFORE,
    JOURNAL,
    ORIGINALS,
    STATE,
    AgentState,
    digest,
    keep,
    keep_data,
    record_made_dirs,
    recover_home,
    save,
)
from credprovider.tool.agent.statecheck import load
from credprovider.tool.change.durable import TEMPORARY_SUFFIX, remove_tree
from credprovider.tool.change.engine import NEW_FILE_MODE, ChangeKind, Kind, Op, perform
from credprovider.tool.change.journal import run
from credprovider.tool.change.kept import Was
from credprovider.tool.change.merge import config_mode
from credprovider.tool.change.results import Action, Result
from credprovider.tool.change.startcheck import loaded_as_left, plugin_refusing
from credprovider.tool.node.root import NodeRoot

load_state = load  # the name the daemon and the tests know


def _kubelet_inputs(plan: AgentPlan) -> list[tuple[str, bytes]]:
    return [
        (path, text.encode())
        for path, text in ((plan.config_path, plan.config_text), (plan.flag_file, plan.flag_text))
        if text is not None
    ]


def _intent(root: NodeRoot, plan: AgentPlan, state: AgentState) -> None:
    """Record, before any change, what this run will change (see the module): first the
    directories it will make (the state's own among them), then each original and ``before``
    (copies flushed before the state names them), each digest and the restart owed."""
    inputs = _kubelet_inputs(plan)
    for path in [STATE, *(step.path for step in plan.steps), *(path for path, _ in inputs)]:
        record_made_dirs(root, state, path)
    save(root, state)
    for step in plan.steps:
        if step.action is Action.SWITCH:
            current = root.host(step.path, follow=False)
            if current.is_symlink():
                state.previous = os.readlink(current)
        if step.action in (Action.SWITCH, Action.LINK) and step.path not in state.originals:
            state.originals[step.path] = keep(root, ORIGINALS, step.path)
    before = state.before if state.before is not None else {}
    for path, data in inputs:
        if path not in state.originals:
            state.originals[path] = _original(root, plan, path)
        if path not in before:  # an unfinished change keeps the before it recorded
            keep_before(root, state, before, path)
        state.written[path] = digest(data)
    state.before = before or None
    if inputs and plan.restart:
        state.restart_due = plan.restart
    if plan.flag_text is not None and plan.flag_file not in state.flag_files:
        state.flag_files.append(plan.flag_file)
    save(root, state)


def _original(root: NodeRoot, plan: AgentPlan, path: str) -> Was:
    """What uninstall puts back at ``path``: the file as it is, or (a migrated node's flags) the
    text the plan says, with the file's mode."""
    restored = plan.flags_restored.get(path)
    if restored is None:
        return keep(root, ORIGINALS, path)
    found = root.host(path, follow=False)
    mode = found.stat().st_mode & 0o7777 if found.is_file() else NEW_FILE_MODE
    return keep_data(root, ORIGINALS, path, restored.encode(), mode)


def _ops(plan: AgentPlan) -> list[Op]:
    """The engine's op for each link and kubelet input of ``plan``, as the node names its path
    (what the agent journals)."""
    ops = [
        Op(Kind.LINK, Path(step.path), target=step.target)
        for step in plan.steps
        if step.action in (Action.SWITCH, Action.LINK)
    ]
    return ops + [
        Op(Kind.FILE, Path(path), data, config_mode(data) if path == plan.config_path else None)
        for path, data in _kubelet_inputs(plan)
    ]


def _change(root: NodeRoot, plan: AgentPlan, bundle: Path, outcome: Outcome) -> None:
    """Each step of ``plan`` (its intent already recorded in the state): the bundle placed, then
    its links and the kubelet's inputs as one journaled transaction."""
    placed = [step.path for step in plan.steps if step.action is Action.PLACE]
    for path in placed:
        perform(Op(Kind.TREE, root.host(path, follow=False), source=bundle))
    ops = _ops(plan)
    run(root.host(JOURNAL, follow=False), ops, ChangeKind.AGENT, under(root))
    outcome.changed += placed + [str(op.path) for op in ops]


def _move_home(root: NodeRoot, state: AgentState, bundles: str) -> None:
    """Record where this run places the bundles (before it does). A home left behind (an agent
    of an earlier release placed them in AGENT_HOME on COS) is retired: its bundles go at the
    next run that finds them unused, since a plugin may still be running from them."""
    was = state.bundle_home
    if was == bundles:
        return
    if os.path.lexists(root.host(f"{was}/current", follow=False)):
        state.retired = was
    state.bundles = bundles
    save(root, state)


def _prune_versions(root: NodeRoot, state: AgentState) -> None:
    """Keep the bundle ``current`` points to and the one before it (a plugin may still be running
    from it); remove older ones, and a retired home's when the run before this one retired it."""
    retired = state.retired
    if retired and state.retiring == retired:
        for own in (f"{retired}/current", f"{retired}/versions"):
            perform(Op(Kind.ABSENT, root.host(own, follow=False)))
        state.retired = state.retiring = ""
        save(root, state)
    elif retired:
        state.retiring = retired
        save(root, state)
    home = state.bundle_home
    versions = root.host(f"{home}/versions")
    current = root.host(f"{home}/current", follow=False)
    if not versions.is_dir() or not current.is_symlink():
        return
    keep_names = {
        os.path.basename(os.readlink(current)),
        os.path.basename(state.previous),
    }
    for found in sorted(versions.iterdir()):
        if found.name.startswith(".") and found.name.endswith(TEMPORARY_SUFFIX):
            remove_tree(found)  # a copy or a removal a killed run left part way
        elif found.name not in keep_names and not found.name.startswith("."):
            perform(Op(Kind.ABSENT, found))


def apply(
    root: NodeRoot,
    plan: AgentPlan,
    bundle: Path,
    version: str,
    restart: Restart,
    healthy: Healthy,
    watch: Watch | None = None,
) -> Outcome:
    """Make the node under ``root`` as ``plan`` says (the bundle copied from ``bundle``); a change
    an earlier run left unfinished was finished before the plan was made (agent/recovery.py), and
    is said first in the notes; with ``watch``, a kubelet restart is commit-confirmed
    (agent/watchdog.py)."""
    outcome = _apply(root, plan, bundle, version, restart, healthy, watch)
    if plan.finished:
        outcome.notes.insert(0, plan.finished)
    return outcome


def _apply(
    root: NodeRoot,
    plan: AgentPlan,
    bundle: Path,
    version: str,
    restart: Restart,
    healthy: Healthy,
    watch: Watch | None,
) -> Outcome:
    if plan.refused:
        return Outcome(Result.REFUSED, detail=plan.refused)
    absent = _not_in_bundle(plan, bundle)
    if absent:  # links the kubelet would find dangling: it would not start
        return Outcome(
            Result.REFUSED,
            detail=f"the bundle {bundle} has no {', '.join(absent)}: the kubelet would not start "
            "with its bin dir linking there; nothing is changed",
        )
    refusing = _plugin_refusing(plan, bundle)
    if refusing:
        return Outcome(Result.REFUSED, detail=f"{refusing}; nothing is changed")
    unwritable = (
        not_writable(
            root, [AGENT_HOME, plan.bundles, *(s.path for s in plan.steps if s.action in WRITES)]
        )
        or not_executable(root, plan.bundles)
        or not_lasting(root, plan.bundles, _kubelet_reads(plan))
    )
    if unwritable:
        return Outcome(Result.REFUSED, detail=f"{unwritable}; nothing is changed")
    recover_home(root)
    state = load(root)
    if state.before is None:  # a change settled, its copies not yet removed when it was killed
        remove_tree(root.host(BEFORE, follow=False))
    outcome = Outcome(Result.INSTALLED, healed=healed(root, state))
    _intent(root, plan, state)
    _move_home(root, state, plan.bundles)
    _change(root, plan, bundle, outcome)
    if state.version != version:
        state.version = version
        save(root, state)
    _prune_versions(root, state)
    if state.restart_due:
        return confirmed(root, state, restart, healthy, outcome, watch)
    if state.before:
        settle(root, state)  # files only: nothing to confirm
    return outcome if outcome.changed else replace(outcome, result=Result.UNCHANGED)


# the steps that write at their path (the bundle's place, links, the config, the flags file)
WRITES: Final = frozenset(
    {Action.PLACE, Action.SWITCH, Action.LINK, Action.WRITE, Action.MERGE, Action.FLAGS}
)


def _kubelet_reads(plan: AgentPlan) -> list[str]:
    """What the kubelet reads at its start that this plan writes or links in."""
    return [path for path in (plan.bin_dir, plan.config_path, plan.flag_file) if path]


def _not_in_bundle(plan: AgentPlan, bundle: Path) -> list[str]:
    """The plugins the plan links to that the bundle does not hold."""
    current = f"{plan.bundles}/current/"
    names = [s.target[len(current) :] for s in plan.steps if s.target.startswith(current)]
    return [name for name in names if not os.path.exists(bundle / name)]


def _plugin_refusing(plan: AgentPlan, bundle: Path) -> str:
    """Why a plugin of ours in the config the plan writes would fail every pull ("": none would):
    started from the bundle with its entry's args and env (the settings are the cluster's, so
    every node would refuse them alike; the files they name are the node's, not the pod's: not
    read), before anything on the node changes."""
    if plan.config_text is None:
        return ""
    loaded = loaded_as_left(Path(plan.config_path), plan.config_text)
    if isinstance(loaded, str):  # refused when planned: not reached
        return loaded
    ours = set(plan.providers.values())
    return plugin_refusing(loaded, ours, str(bundle), str(bundle / TOOL_NAME), settings=False)

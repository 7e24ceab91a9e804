"""What a killed run left on the node, finished or given up through the one journal
(:mod:`credprovider.tool.change.journal`) before the agent changes anything: a change by hand
(``credprovider install``, ``migrate --write``) finished as the next such run would finish it, and
the agent's own (its links and kubelet inputs, journaled beside its state) finished by ``agent
apply`` (:func:`plan_finished`, which then plans the node again as it now is) or given up by
``agent uninstall``, which puts back every path it names. The agent's journal is read as hostile
input: each op is judged against the agent's state (:func:`finish_journal`) before any is carried
out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final

from credprovider.paths import AGENT_BUNDLE_HOMES
from credprovider.runtime.excerpt import clip
from credprovider.tool.agent.plan import AgentPlan
from credprovider.tool.agent.state import (
    JOURNAL,
    AgentState,
    digest,
    journal_left,
    placed_version,
    record_made_dirs,
    recover_home,
    save,
)
from credprovider.tool.agent.statecheck import load
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.change.engine import Kind, Op
from credprovider.tool.change.journal import discard, recover
from credprovider.tool.node.root import NodeRoot


def plan_finished(root: NodeRoot, plan: Callable[[], AgentPlan]) -> AgentPlan:
    """``plan()``, once the changes a kill left half made on the node are finished from their
    journals by the one recovery: one by hand (``credprovider install``, ``migrate --write``), as
    the next such run would finish it, then the agent's own (:func:`finish_journal`); the plan is
    then made again, on the node as it now is. Said in the outcome's notes."""
    first = plan()
    own = journal_left(root)
    if first.refused or not (first.unfinished or own):
        return first
    notes = []
    if first.unfinished:
        done = recover(root.host(first.unfinished, follow=False), under(root))
        paths = ", ".join(root.node_path(op.path) for op in done) or "nothing was left to do"
        notes.append(
            f"finished the change a killed credprovider install or migrate --write began: {paths}"
        )
    if own:
        recover_home(root)
        notes.append(finish_journal(root, load(root)))
    again = plan()
    again.finished = "; ".join(note for note in notes if note)
    return again


def under(root: NodeRoot) -> Callable[[Op], Op]:
    """Each op as this run reaches its paths under ``root`` (a journal names them as the node
    does)."""

    def rebase(op: Op) -> Op:
        return replace(
            op,
            path=root.host(str(op.path), follow=False),
            backup=root.host(str(op.backup), follow=False) if op.backup else None,
            source=root.host(str(op.source)) if op.source else None,
        )

    return rebase


def finish_journal(root: NodeRoot, state: AgentState, *, undo: bool = False) -> str:
    """The links and kubelet inputs a killed run journaled, finished by the one recovery (or,
    ``undo``, given up by an uninstall, which puts back every path they name), each op first
    judged against ``state`` as hostile input (:func:`_own`). What was done, as a note ('' if
    there is no journal)."""
    if not journal_left(root):
        return ""
    journal, rebase, judge = root.host(JOURNAL, follow=False), under(root), _own(root, state)

    def record(ops: list[Op]) -> None:  # what finishing them makes, for uninstall to remove
        for op in ops:
            record_made_dirs(root, state, root.node_path(op.path))
        save(root, state)

    left = discard(journal, rebase, judge) if undo else recover(journal, rebase, judge, record)
    paths = ", ".join(root.node_path(op.path) for op in left) or "nothing was left to do"
    if undo:
        return f"the change a killed agent run began is undone with the rest: {paths}"
    return f"finished the change a killed agent run began: {paths}"


def _own(root: NodeRoot, state: AgentState) -> Callable[[Op], str]:
    """Why an op of the agent's journal is not one the agent journaled ("": it is): a file must
    be a kubelet input the state says the agent writes, holding the bytes whose digest it
    recorded; a link must be at a path whose original the state keeps, to one of the agent's
    bundles; nothing else."""
    files = {root.host(path, follow=False): sha for path, sha in state.written.items()}
    links = {root.host(path, follow=False): path for path in state.originals}

    def judge(op: Op) -> str:
        if op.kind is Kind.FILE and op.mode is None and files.get(op.path) == digest(op.data):
            return ""
        path = links.get(op.path, "")
        if op.kind is Kind.LINK and op.path not in files and path:
            if _links_to_ours(path, op.target):
                return ""
            return (
                f"it would link {path} to {clip(op.target)}, which is not a bundle of the agent's"
            )
        return (
            f"the agent's state records no {op.kind} it writes at {clip(root.node_path(op.path))}"
        )

    return judge


def _links_to_ours(path: str, target: str) -> bool:
    """``target`` is what the agent links ``path`` to: its ``current`` to one of its versions, a
    plugin's name to that plugin under ``current`` (never a program of anyone else's)."""
    for home in AGENT_BUNDLE_HOMES:
        if path == f"{home}/current":
            version = target.removeprefix("versions/")
            return target.startswith("versions/") and placed_version(version)
        if target.startswith(f"{home}/current/"):
            return target.removeprefix(f"{home}/current/") in _PLUGIN_NAMES
    return False


_PLUGIN_NAMES: Final = frozenset(plugin.name for plugin in PLUGINS.values())

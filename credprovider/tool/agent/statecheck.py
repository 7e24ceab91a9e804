"""The agent's state read as hostile input (:func:`load`): it must be root's, written by no one
else, parse as :class:`~credprovider.tool.agent.state.AgentState`, and name only what the agent
changes on a node (docs/security.md). A state that is not the agent's own (a forged or damaged one,
one another user owns or others may write, a path that is none the agent changes, bytes it says it
wrote that are neither a config nor flags, or a kept copy that is not what the agent kept: a FIFO,
a file too big, one others may write) is refused before anything changes, in one line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from credprovider.entry import plugin_of
from credprovider.paths import AGENT_BUNDLE_HOMES
from credprovider.tool.agent.state import STATE, AgentState, digest, restoring
from credprovider.tool.change.kept import MAX_KEPT_FILE
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.kubeconfig.model import CONFIG_KIND
from credprovider.tool.node.access import FileProblem, read_bytes
from credprovider.tool.node.kubelet_flags import CONFIG_FLAG
from credprovider.tool.node.root import NodeRoot, RootPathError
from credprovider.tool.node.structured import JsonTooDeep, bounded_json
from credprovider.tool.node.trust import owner_problem

_REFUSED: Final = "nothing is changed; restore it, or remove it to make the agent start afresh"


def load(root: NodeRoot) -> AgentState:
    """The agent's state of the node under ``root`` (a fresh one if there is none), read as
    hostile input: a state that is not the agent's own is refused in one line (see the module)."""
    path = root.host(STATE)
    if not os.path.lexists(path):
        return AgentState()
    owner = owner_problem(STATE, os.stat(path), os.geteuid())
    if owner:  # root acts only on a state only root could have written
        raise NodeChangeError(f"{STATE} is not the agent's state ({owner}): {_REFUSED}")
    try:
        found = AgentState.parse(bounded_json(read_bytes(str(path))))
    except (ValueError, FileProblem, JsonTooDeep):
        found = None
    if found is None:
        raise NodeChangeError(f"{STATE} is not the agent's state (edited or truncated): {_REFUSED}")
    problem = _unfit(root, found)
    if problem:  # forged, or changed under it
        raise NodeChangeError(f"{STATE} is not the agent's state ({problem}): {_REFUSED}")
    return found


def _unfit(root: NodeRoot, state: AgentState) -> str:
    """Why the state cannot be the agent's ("": it can be): a path it records as a file it
    replaced that is a directory on the node (the agent replaces files and links only), or a kept
    copy that is not one the agent kept (:meth:`Was.restore`), checked before anything changes."""
    recorded = [*state.originals, *(state.before or {}), *state.written]
    kept = [*state.originals.items(), *(state.before or {}).items()]
    try:
        for path in recorded:
            where = root.host(path, follow=False)
            if where.is_dir() and not where.is_symlink():
                return f"it records {path}, a directory, as a file the agent replaced"
        for path, was in kept:
            found = restoring(root, path, was)
            if isinstance(found, str):
                return found
            if not (_agents(state, path) or found.done()):  # (put back already: nothing to do)
                return (
                    f"it would put back {path}, none of the agent's paths (a plugin's link, its "
                    "bundles' current, the kubelet config or flags it writes)"
                )
        for path, sha in state.written.items():
            if not _as_the_agent_writes(root.host(path, follow=False), sha):
                return f"it says the agent wrote {path}, which holds neither a config nor flags"
    except (OSError, ValueError, RootPathError) as exc:
        return f"a path it records cannot be reached: {exc}"
    return ""


def _agents(state: AgentState, path: str) -> bool:
    """``path`` is one the agent changes: a plugin's link (its name a plugin's), a bundle home's
    ``current`` (of either home: an earlier agent's too), or the kubelet config or flags file it
    writes."""
    currents = {f"{home}/current" for home in AGENT_BUNDLE_HOMES}
    return (
        path in state.written
        or path in state.flag_files
        or path in currents
        or plugin_of(os.path.basename(path)) is not None
    )


def _as_the_agent_writes(where: Path, sha: str) -> bool:
    """What is at ``where`` is not what the agent wrote (digest ``sha``), or it is a credential
    provider config or a kubelet flags file, as everything the agent writes is: a path that
    holds those bytes is put back (or removed) by uninstall."""
    try:
        data = read_bytes(str(where), limit=MAX_KEPT_FILE)
    except (FileProblem, OSError):
        return True  # nothing there, or not a file: never the agent's bytes
    if digest(data) != sha:
        return True
    text = data.decode("utf-8", "replace")
    return CONFIG_KIND in text or CONFIG_FLAG in text  # its kind, or the flag naming it

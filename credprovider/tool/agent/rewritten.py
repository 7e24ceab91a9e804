"""What the chart's agent wrote on a node, still as it wrote it: a platform that writes the
kubelet's config or flags again at every boot (GKE, EKS nodeadm, kOps, Bottlerocket, Talos, the
Machine Config Operator: docs/platforms.md) replaces the agent's providers with its own, and the
kubelet pulls without them until the agent's pod merges them again. Compared by the digests the
agent keeps in its state (``state``), read as the agent reads it (a forged one is said to be, and
nothing of it is used). ``credprovider doctor`` says what this finds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from credprovider.paths import AGENT_HOME
from credprovider.tool.agent.state import JOURNAL, STATE, digest, journal_left, state_there
from credprovider.tool.agent.statecheck import load
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.access import FileProblem, UnreadableError, read_bytes
from credprovider.tool.node.root import NodeRoot, RootPathError


@dataclass(frozen=True)
class AgentFiles:
    """``written``: how many files the agent wrote; ``changed``: those that hold something else
    now; ``problem``: why they could not be compared ("": they were); ``hidden``: only because
    this user may not read the agent's files (root would: no verdict); ``unfinished``: the
    journal a killed agent run left ("": none)."""

    written: int = 0
    changed: tuple[str, ...] = field(default_factory=tuple)
    problem: str = ""
    hidden: bool = False
    unfinished: str = ""


def agent_files(root: NodeRoot) -> AgentFiles | None:
    """The files the agent wrote under ``root``, compared with what it wrote (None: no agent ever
    changed this node)."""
    if not state_there(root):
        return None
    unfinished = JOURNAL if journal_left(root) else ""
    try:
        state = load(root)
    except UnreadableError as exc:  # its kept copies are root's alone (0600)
        return AgentFiles(
            problem=f"what the agent wrote cannot be checked as this user: {exc}",
            hidden=True,
            unfinished=unfinished,
        )
    except (NodeChangeError, FileProblem) as exc:
        return AgentFiles(problem=f"the agent's state ({AGENT_HOME}) cannot be used: {exc}")
    written = state.written
    changed = []
    for path, sha in sorted(written.items()):
        try:
            now = digest(read_bytes(str(root.host(path, follow=False))))
        except FileProblem:
            now = ""
        except UnreadableError as exc:
            return AgentFiles(
                len(written),
                problem=f"what the agent wrote cannot be checked as this user: {exc}",
                hidden=True,
                unfinished=unfinished,
            )
        if now != sha:
            changed.append(path)
    return AgentFiles(len(written), tuple(changed), unfinished=unfinished)


def agent_manages(root: NodeRoot, paths: Iterable[str]) -> str:
    """Why a change by hand to ``paths`` (as the node names them) would fight the chart's agent on
    the node under ``root``: the first of them that it manages (a file or link it replaced, or
    anything in its home or its bundles'), in one sentence; "" for none, or where no agent's state
    can be read (none is there, or it is damaged: then the agent refuses to run)."""
    if not state_there(root):
        return ""
    try:
        state = load(root)
    except (NodeChangeError, FileProblem, UnreadableError):
        return ""
    homes = {AGENT_HOME, *state.bundle_homes}
    for path in paths:
        given = os.path.abspath(path) if root.is_host else path
        try:  # as given, and with the links on its way resolved (not its own)
            names = {given, "/" + "/".join(root.resolve(given, follow=False))}
        except RootPathError:
            names = {given}
        if any(n in state.originals or n.startswith(tuple(f"{h}/" for h in homes)) for n in names):
            return (
                f"{path} is the chart's agent's (its state {STATE} records it): its next start "
                "would make its change again; change the chart's values (providers, "
                "providerSettings) instead, or take the node out of the agent's nodeSelector and "
                "run credprovider agent uninstall first"
            )
    return ""

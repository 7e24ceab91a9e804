"""What the chart's agent wrote on a node, still as it wrote it: a platform that writes the
kubelet's config or flags again at every boot (GKE, EKS nodeadm, kOps, Bottlerocket, Talos, the
Machine Config Operator: docs/platforms.md) replaces the agent's providers with its own, and the
kubelet pulls without them until the agent's pod merges them again. Compared by the digests the
agent keeps in its state (``state``), read as the agent reads it (a forged one is said to be, and
nothing of it is used). ``credprovider doctor`` says what this finds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from credprovider.paths import AGENT_HOME
from credprovider.tool.agent.state import JOURNAL, STATE, digest, journal_left, load
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.access import FileProblem, UnreadableError, read_bytes
from credprovider.tool.node.root import NodeRoot


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
    if not os.path.lexists(root.host(STATE, follow=False)):
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

"""What the chart's agent wrote on this node, still as it wrote it: a platform that writes the
kubelet's config or flags again at every boot (GKE, EKS nodeadm, kOps, Bottlerocket, Talos, the
Machine Config Operator: docs/platforms.md) replaces the agent's providers with its own, and the
kubelet pulls without them until the agent's pod merges them again. Compared by the digests the
agent keeps in its state (``agent/state.py``); the state is read as the agent reads it (a forged
one is said to be, and nothing of it is used).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from credprovider.tool.doctor.model import INFO, PASS, WARN

if TYPE_CHECKING:
    from credprovider.tool.doctor.model import Diagnosis
    from credprovider.tool.node.discovery import NodeView


def check_agent_files(view: NodeView, diagnosis: Diagnosis) -> None:
    """A WARN for each file the agent wrote that now holds something else; PASS when all are
    as written; nothing when no agent ever changed this node."""
    import os

    from credprovider.paths import AGENT_HOME
    from credprovider.tool.agent.state import digest, load
    from credprovider.tool.errors import NodeChangeError
    from credprovider.tool.node.access import FileProblem, UnreadableError, read_bytes

    if not os.path.lexists(view.host_path(f"{AGENT_HOME}/state.json")):
        return
    try:
        state = load(view.root)
    except (NodeChangeError, FileProblem, UnreadableError) as exc:
        diagnosis.add("config", WARN, f"the agent's state cannot be used: {exc}")
        return
    written: dict[str, str] = state.get("written", {})
    changed = []
    for path, sha in sorted(written.items()):
        try:
            now = digest(read_bytes(view.host_path(path)))
        except FileProblem:
            now = ""
        except UnreadableError as exc:
            diagnosis.add("config", INFO, f"what the agent wrote cannot be compared: {exc}")
            return
        if now != sha:
            changed.append(path)
    if changed:
        diagnosis.add(
            "config",
            WARN,
            f"{', '.join(changed)} no longer holds what the credprovider agent wrote: the platform "
            "(or a hand) wrote it again, at boot on GKE, EKS, kOps, Bottlerocket, Talos and "
            "OpenShift, and the kubelet pulls without the agent's providers until they are back",
            "the agent's pod merges them again when it starts (kubectl -n <ns> delete pod on this "
            "node restarts it); for a change that lasts, the platform's own way "
            "(docs/platforms.md)",
        )
    elif written:
        diagnosis.add(
            "config",
            PASS,
            f"what the credprovider agent wrote is as it wrote it ({len(written)} files)",
        )

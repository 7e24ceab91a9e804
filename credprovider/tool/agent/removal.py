"""``helm uninstall`` restoring the nodes: the chart's pre-delete hook runs ``credprovider fleet
uninstall``, which tells every node's agent to uninstall (``--uninstall`` added to the agent
DaemonSet's arguments, as ``action=uninstall`` renders it) and waits, bounded, for each node that
an agent reported on to say ``uninstalled``. Helm deletes the DaemonSet only once that is so: a
node that could not be restored (its agent refused, rolled back or did not answer in time) fails
the hook, so ``helm uninstall`` fails with each node's outcome in the hook's log, and nothing is
left half removed. The decisions are pure; :func:`remove_fleet` is the I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from credprovider.tool.change.results import Result
from credprovider.tool.cluster.connect import ClusterError, api_call

if TYPE_CHECKING:
    from lightkube import Client

    from credprovider.tool.agent.cluster import NodeStatus

UNINSTALL_FLAG: Final = "--uninstall"
POLL_SECONDS: Final = 5.0


def with_uninstall(args: Sequence[str]) -> list[str] | None:
    """The agent's arguments with ``--uninstall`` after ``agent run`` (as the chart renders
    ``action=uninstall``); ``None`` when they already have it."""
    if UNINSTALL_FLAG in args:
        return None
    if list(args[:2]) != ["agent", "run"]:
        raise ClusterError(
            f"the DaemonSet's agent does not run `agent run` (its args: {' '.join(args[:4])}): "
            "is it credprovider's?"
        )
    return [*args[:2], UNINSTALL_FLAG, *args[2:]]


@dataclass(frozen=True)
class NodeOutcome:
    node: str
    result: str  # the agent's last result there ("" before it reported)
    detail: str

    @property
    def done(self) -> bool:
        return self.result == Result.UNINSTALLED.value

    def line(self) -> str:
        said = self.result or "no report yet"
        return f"{self.node}: {said}" + (
            f" ({self.detail})" if self.detail and not self.done else ""
        )


def outcomes(found: Sequence[tuple[str, NodeStatus | None, bool]]) -> list[NodeOutcome]:
    """Each node an agent reported on (the others never had one), with its last result."""
    return [
        NodeOutcome(name, status.result, status.detail)
        for name, status, _ in found
        if status is not None
    ]


def remove_fleet(
    client: Client,
    namespace: str,
    daemonset: str,
    timeout: float,
    say: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[NodeOutcome]:
    """Tell the agents to uninstall, then wait until every reported node says ``uninstalled``
    or ``timeout`` seconds pass: each node's outcome then."""
    from credprovider.tool.agent.cluster import fleet

    _tell_agents(client, namespace, daemonset, say)
    deadline = clock() + timeout
    shown: dict[str, str] = {}
    while True:
        found = outcomes(list(fleet(client)))
        for outcome in found:
            if shown.get(outcome.node) != outcome.line():
                shown[outcome.node] = outcome.line()
                say(outcome.line())
        if all(outcome.done for outcome in found) or clock() >= deadline:
            return found
        sleep(min(POLL_SECONDS, max(0.0, deadline - clock())))


def _tell_agents(
    client: Client, namespace: str, daemonset: str, say: Callable[[str], None]
) -> None:
    from lightkube.resources.apps_v1 import DaemonSet
    from lightkube.types import PatchType

    found = api_call(
        f"reading DaemonSet {namespace}/{daemonset}",
        client.get,
        DaemonSet,
        daemonset,
        namespace=namespace,
    )
    containers = found.spec.template.spec.containers if found.spec else []
    if not containers:
        raise ClusterError(f"DaemonSet {namespace}/{daemonset} has no container")
    args = with_uninstall(list(containers[0].args or []))
    if args is None:
        say(f"the agents of {namespace}/{daemonset} are already told to uninstall")
        return
    api_call(
        f"telling the agents of {namespace}/{daemonset} to uninstall",
        client.patch,
        DaemonSet,
        daemonset,
        [{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": args}],
        namespace=namespace,
        patch_type=PatchType.JSON,
    )
    say(
        f"told the agents of {namespace}/{daemonset} to uninstall; each node restarts its kubelet in turn"
    )

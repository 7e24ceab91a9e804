"""The node agent's side of the API server, through lightkube (imported here only, so never on a
plugin's exec path): the restart slots (``coordination.k8s.io`` Leases) that let one node at a
time restart its kubelet, the node's status annotations, the Events on the node, and the node's
Ready condition. The decisions (is a slot free, what the annotations say) are pure functions.

What the agent may touch (the chart's RBAC): its own Node (get, patch), Leases in its namespace,
Events in ``default`` (where events about cluster-scoped objects such as Nodes live).
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from credprovider.tool.cluster.connect import COMPONENT, ClusterError, api_call
from credprovider.tool.node.kubelet_facts import parse_version

if TYPE_CHECKING:
    from lightkube import Client

PREFIX: Final = "credprovider.io/"
# The node's annotations, one fact each, so that kubectl can show any of them as a column.
VERSION_KEY: Final = PREFIX + "version"
HASH_KEY: Final = PREFIX + "config-hash"
RESULT_KEY: Final = PREFIX + "result"
DETAIL_KEY: Final = PREFIX + "detail"
TIME_KEY: Final = PREFIX + "time"
# When the platform last wrote again what the agent wrote (GKE, nodeadm, MCO at boot), and which
# files: set only then, so that it stays on the node until the next such finding.
REWRITTEN_KEY: Final = PREFIX + "rewritten"
SLOT_PREFIX: Final = "credprovider-restart-"
EVENTS_NAMESPACE: Final = "default"


@dataclass(frozen=True)
class NodeStatus:
    """What the agent last did on a node, as its annotations say."""

    version: str
    config_hash: str  # the kubelet's hash of the config it reads (sha256:...), or ""
    result: str  # installed, unchanged, refused, rolled back, failed, uninstalled, waiting
    detail: str
    time: str  # RFC 3339, UTC
    # "<time> <path>, ...": the platform wrote those again since the agent wrote them ("": not
    # found by this run, the node's earlier finding left as it is)
    rewritten: str = ""

    def annotations(self) -> dict[str, str]:
        found = {
            VERSION_KEY: self.version,
            HASH_KEY: self.config_hash,
            RESULT_KEY: self.result,
            DETAIL_KEY: self.detail[:1000],
            TIME_KEY: self.time,
        }
        return found | ({REWRITTEN_KEY: self.rewritten[:1000]} if self.rewritten else {})

    @classmethod
    def from_annotations(cls, annotations: dict[str, str] | None) -> NodeStatus | None:
        """The status a node's annotations hold, or None: the agent never reported there."""
        found = annotations or {}
        if RESULT_KEY not in found:
            return None
        return cls(
            found.get(VERSION_KEY, ""),
            found.get(HASH_KEY, ""),
            found[RESULT_KEY],
            found.get(DETAIL_KEY, ""),
            found.get(TIME_KEY, ""),
            found.get(REWRITTEN_KEY, ""),
        )


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def stamp(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def slot_free(
    holder: str | None,
    renewed: datetime.datetime | None,
    duration: int | None,
    me: str,
    moment: datetime.datetime,
) -> bool:
    """Whether ``me`` may take a restart slot whose Lease says this: nobody holds it, ``me``
    already does, or its holder stopped renewing it (a node that died holding it frees the slot
    after one duration)."""
    if not holder or holder == me:
        return True
    if renewed is None or not duration:
        return True
    return moment > renewed + datetime.timedelta(seconds=duration)


def slot_names(slots: int) -> list[str]:
    return [f"{SLOT_PREFIX}{index}" for index in range(slots)]


class Cluster:
    """The API calls of one node's agent: ``node`` is its Node, ``namespace`` the Leases'."""

    def __init__(self, client: Client, node: str, namespace: str) -> None:
        self.client = client
        self.node = node
        self.namespace = namespace

    # -- restart slots -------------------------------------------------------------------------
    def try_slot(self, slots: int, duration: int) -> str | None:
        taken: str | None = api_call("taking a restart slot", self._try_slot, slots, duration)
        return taken

    def _try_slot(self, slots: int, duration: int) -> str | None:
        """Take a free restart slot (a Lease named ``credprovider-restart-<n>``, n < ``slots``):
        its name, or None when all are held. A race with another node is lost cleanly: the
        API server refuses the older resourceVersion (409) and the next slot is tried."""
        from lightkube import ApiError
        from lightkube.models.coordination_v1 import LeaseSpec
        from lightkube.models.meta_v1 import ObjectMeta
        from lightkube.resources.coordination_v1 import Lease

        for name in slot_names(slots):
            moment = now()
            spec = LeaseSpec(
                holderIdentity=self.node,
                leaseDurationSeconds=duration,
                acquireTime=moment,
                renewTime=moment,
            )
            try:
                lease = self.client.get(Lease, name, namespace=self.namespace)
            except ApiError as exc:
                if getattr(exc.status, "code", None) != 404:
                    raise ClusterError(f"reading Lease {name}: {exc.status.message}") from exc
                try:
                    self.client.create(
                        Lease(metadata=ObjectMeta(name=name, namespace=self.namespace), spec=spec)
                    )
                    return name
                except ApiError as raced:
                    if getattr(raced.status, "code", None) == 409:
                        continue
                    raise ClusterError(f"creating Lease {name}: {raced.status.message}") from raced
            held = lease.spec or LeaseSpec()
            if not slot_free(
                held.holderIdentity, held.renewTime, held.leaseDurationSeconds, self.node, moment
            ):
                continue
            spec.leaseTransitions = (held.leaseTransitions or 0) + (
                held.holderIdentity != self.node
            )
            lease.spec = spec
            try:
                self.client.replace(lease)
                return name
            except ApiError as raced:
                if getattr(raced.status, "code", None) == 409:
                    continue
                raise ClusterError(f"taking Lease {name}: {raced.status.message}") from raced
        return None

    def holders(self, slots: int) -> list[str]:
        """Who holds the slots now (for the log line while the agent waits)."""
        found: list[str] = api_call("reading the restart slots", self._holders, slots)
        return found

    def _holders(self, slots: int) -> list[str]:
        from lightkube import ApiError
        from lightkube.resources.coordination_v1 import Lease

        found = []
        for name in slot_names(slots):
            try:
                lease = self.client.get(Lease, name, namespace=self.namespace)
            except ApiError:
                continue
            if lease.spec is not None and lease.spec.holderIdentity:
                found.append(lease.spec.holderIdentity)
        return found

    def renew(self, name: str) -> None:
        self._patch_lease(f"renewing Lease {name}", name, self.node, _micro(now()))

    def release(self, name: str) -> None:
        self._patch_lease(f"releasing Lease {name}", name, None, None, acquireTime=None)

    def _patch_lease(
        self, what: str, name: str, holder: str | None, renewed: str | None, **more: None
    ) -> None:
        from lightkube.resources.coordination_v1 import Lease

        spec = {"holderIdentity": holder, "renewTime": renewed, **more}
        api_call(
            what, self.client.patch, Lease, name, {"spec": spec},
            namespace=self.namespace, patch_type=_merge(),
        )  # fmt: skip

    # -- the node ----------------------------------------------------------------------------
    def report(self, status: NodeStatus) -> None:
        from lightkube.resources.core_v1 import Node

        api_call(
            f"annotating node {self.node}",
            self.client.patch,
            Node,
            self.node,
            {"metadata": {"annotations": status.annotations()}},
            patch_type=_merge(),
        )

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        """An Event about the node, as ``kubectl describe node`` finds them (the kubelet's
        convention: the involved object's uid is the node's name)."""
        from lightkube.models.core_v1 import EventSource, ObjectReference
        from lightkube.models.meta_v1 import ObjectMeta
        from lightkube.resources.core_v1 import Event

        moment = now()
        api_call(
            f"recording the Event {reason} on node {self.node}",
            self.client.create,
            Event(
                metadata=ObjectMeta(
                    generateName=f"{self.node}.credprovider-", namespace=EVENTS_NAMESPACE
                ),
                involvedObject=ObjectReference(
                    kind="Node", apiVersion="v1", name=self.node, uid=self.node
                ),
                reason=reason,
                message=message[:1000],
                type="Warning" if warning else "Normal",
                source=EventSource(component=COMPONENT, host=self.node),
                firstTimestamp=moment,
                lastTimestamp=moment,
                count=1,
                reportingComponent=COMPONENT,
                reportingInstance=self.node,
            ),
        )

    def kubelet_version(self) -> tuple[int, int] | None:
        """The node's kubelet version as it reports it (``status.nodeInfo``), or None."""
        from lightkube.resources.core_v1 import Node

        node = api_call(f"reading node {self.node}", self.client.get, Node, self.node)
        info = node.status.nodeInfo if node.status else None
        found = parse_version(info.kubeletVersion) if info and info.kubeletVersion else None
        return found[1] if found else None

    def ready_since(self, moment: datetime.datetime) -> bool:
        """Whether the node's Ready condition is True, heard from the kubelet after ``moment``."""
        from lightkube.resources.core_v1 import Node

        node = api_call(f"reading node {self.node}", self.client.get, Node, self.node)
        # the API's times are whole seconds: a heartbeat in the second of the restart counts
        since = moment.replace(microsecond=0)
        for condition in (node.status.conditions if node.status else None) or []:
            if condition.type == "Ready":
                heard = condition.lastHeartbeatTime
                return condition.status == "True" and heard is not None and heard >= since
        return False


def _merge() -> Any:
    from lightkube.types import PatchType

    return PatchType.MERGE


def _micro(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Renewer:
    """Renews a held Lease every third of its duration until stopped (a thread)."""

    def __init__(self, cluster: Cluster, name: str, duration: int) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, args=(cluster, name, duration), daemon=True
        )
        self._thread.start()

    def _loop(self, cluster: Cluster, name: str, duration: int) -> None:
        while not self._stop.wait(max(duration / 3, 1)):
            try:
                cluster.renew(name)
            except ClusterError:
                continue  # the next try; the Lease lasts a whole duration

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


# Nodes asked for in one page of a list (kubectl's default chunk size).
LIST_PAGE: Final = 500


def fleet(client: Client) -> Iterator[tuple[str, NodeStatus | None, bool]]:
    """Every node: its name, the agent's status there, and whether it is Ready."""
    from lightkube.resources.core_v1 import Node

    # in pages, as kubectl asks: a cluster of thousands of Nodes (each with its images) is a list
    # past the one answer's bound (cluster/bounds.py), which pages keep within it
    nodes = api_call("listing the nodes", lambda: list(client.list(Node, chunk_size=LIST_PAGE)))
    for node in sorted(nodes, key=lambda found: found.metadata.name if found.metadata else ""):
        meta = node.metadata
        ready = any(
            condition.type == "Ready" and condition.status == "True"
            for condition in ((node.status.conditions if node.status else None) or [])
        )
        name = (meta.name if meta else None) or ""
        yield name, NodeStatus.from_annotations(meta.annotations if meta else None), ready

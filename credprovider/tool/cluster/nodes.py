"""What a Node object says of its cloud (KEP-2395): the ``spec.providerID`` a cloud controller
manager sets when it initializes the node, and the taint the kubelet registers a
``--cloud-provider=external`` node with, which only that controller manager removes. Read with
any credentials that may get the Node (the kubelet's own may get its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from credprovider.runtime.excerpt import clip
from credprovider.tool.cluster.connect import api_call

if TYPE_CHECKING:
    from lightkube import Client

UNINITIALIZED_TAINT: Final = "node.cloudprovider.kubernetes.io/uninitialized"


@dataclass(frozen=True)
class CloudFacts:
    """One Node's cloud facts: ``provider_id`` ("" when none), whether the uninitialized taint is
    on it."""

    name: str
    provider_id: str
    uninitialized: bool


def cloud_facts(name: str, node: Mapping[str, Any]) -> CloudFacts:
    """The facts of the Node object ``node`` (its JSON form); anything of another shape reads as
    absent."""
    spec = node.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    provider_id = spec.get("providerID")
    taints = spec.get("taints")
    keys = {
        taint.get("key")
        for taint in (taints if isinstance(taints, list) else [])
        if isinstance(taint, Mapping)
    }
    shown = clip(provider_id) if isinstance(provider_id, str) else ""  # an 8 MiB one: an excerpt
    return CloudFacts(clip(name), shown, UNINITIALIZED_TAINT in keys)


def read_cloud_facts(client: Client, name: str) -> CloudFacts:
    """The Node ``name``'s cloud facts, asked of the API server (one GET; a refusal or an
    unreachable server is one :class:`~credprovider.tool.cluster.connect.ClusterError`)."""
    from lightkube.resources.core_v1 import Node

    node = api_call(f"reading node {name}", client.get, Node, name)
    return cloud_facts(name, node.to_dict())

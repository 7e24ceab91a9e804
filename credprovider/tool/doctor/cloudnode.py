"""The other half of the CCM pairing (KEP-2395), read from the API server: a node whose kubelet
runs ``--cloud-provider=external`` is registered with the uninitialized taint, and only a cloud
controller manager removes it and sets the Node's ``spec.providerID``. Without one running, the
node takes no pod that does not tolerate the taint. The decision is pure; doctor's ``__init__``
asks the API server with the kubelet's own kubeconfig (or ``--kubeconfig``)."""

from __future__ import annotations

from collections.abc import Sequence

from credprovider.tool.cluster.nodes import UNINITIALIZED_TAINT, CloudFacts
from credprovider.tool.doctor.model import FAIL, INFO, PASS, WARN, Diagnosis
from credprovider.tool.node.kubelet_flags import KubeletSettings

_ANY_MANAGER = "the cloud's controller manager"


def run_manager(managers: Sequence[str]) -> str:
    """The fix: run the controller manager of the clouds the node's plugins are for."""
    named = " or ".join(dict.fromkeys(managers)) or _ANY_MANAGER
    return f"run {named} in the cluster: it initializes the node, removes the taint and sets the providerID"


def check_node_object(
    facts: CloudFacts | str,
    settings: KubeletSettings,
    managers: Sequence[str],
    diagnosis: Diagnosis,
) -> None:
    """One line on the Node's cloud facts, or on why they could not be read (``facts`` is then
    that sentence)."""
    if isinstance(facts, str):
        diagnosis.add(
            "kubelet",
            WARN,
            f"the Node object was not read, so its providerID and taints are not checked: {facts}",
            "pass --kubeconfig with a kubeconfig that may get this Node (and --node-name if "
            "it is not the host name), or --offline",
        )
        return
    external = settings.cloud_provider == "external"
    if facts.uninitialized:
        diagnosis.add(
            "kubelet",
            FAIL,
            f"Node {facts.name} keeps the {UNINITIALIZED_TAINT} taint: no cloud controller "
            "manager has initialized it, and no pod that does not tolerate the taint is scheduled "
            "on it",
            run_manager(managers),
        )
    elif external and not facts.provider_id:
        diagnosis.add(
            "kubelet",
            WARN,
            f"Node {facts.name} has no spec.providerID although its kubelet runs "
            "--cloud-provider=external: no cloud controller manager has initialized it",
            run_manager(managers),
        )
    elif facts.provider_id:
        diagnosis.add(
            "kubelet",
            PASS,
            f"Node {facts.name} was initialized by its cloud controller manager (providerID "
            f"{facts.provider_id})",
        )
    else:
        diagnosis.add(
            "kubelet",
            INFO,
            f"Node {facts.name} has no providerID and its kubelet runs no cloud provider: a node "
            "no cloud controller manager serves",
        )

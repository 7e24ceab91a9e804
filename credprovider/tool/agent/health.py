"""Whether a kubelet came back after the agent restarted it, and whether the node can get
credentials once the agent is done (its readiness).

Back means, in order: ``/healthz`` answers 200; the node's Ready condition is True with a heartbeat
after the restart (when the agent talks to the API server); and, where the kubelet reports it
(1.34+), ``kubelet_credential_provider_config_info{hash}`` is the hash of the config the agent wrote,
so the kubelet runs *this* config and not an older one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from credprovider.tool.catalog import plugin_for_name
from credprovider.tool.cluster.connect import ClusterError
from credprovider.tool.images.lookup import run_provider
from credprovider.tool.images.selection import select_providers
from credprovider.tool.node.kubelet_facts import CONFIG_INFO_METRIC, reported_config_hashes
from credprovider.tool.node.kubelet_http import KubeletUnanswered, kubelet_get
from credprovider.tool.node.root import HOST, NodeRoot

if TYPE_CHECKING:
    import datetime

    from credprovider.tool.agent.cluster import Cluster
    from credprovider.tool.kubeconfig.model import LoadedConfig

# A metrics page is a few hundred KiB; more is not a kubelet's.
METRICS_CAP: Final = 8 << 20


def reported_hashes(metrics: str) -> list[str] | None:
    """The config hashes a kubelet's metrics page reports, or None: it reports none (a kubelet
    before 1.34 has no such metric)."""
    if CONFIG_INFO_METRIC not in metrics:
        return None
    return reported_config_hashes(metrics)


def _get(url: str, token: str, timeout: float) -> tuple[int, str]:
    """``url``'s status and body (the body only when 200), the whole exchange within
    ``timeout`` seconds (node/kubelet_http.py); :class:`KubeletUnanswered`, naming ``url``, when
    there is no whole answer."""
    status, body = kubelet_get(url, timeout, METRICS_CAP, token)
    return status, body.decode("utf-8", "replace") if status == 200 else ""


@dataclass
class KubeletHealth:
    """How the agent asks after the kubelet; ``check(since, expected_hash)`` waits until it is back
    (None) or says what is wrong after ``timeout`` seconds."""

    healthz: str
    timeout: float
    metrics: str = ""  # "": the config hash is not checked
    token: str = ""  # for the metrics (the pod's service account; RBAC nodes/metrics get)
    cluster: Cluster | None = None  # None: the Ready condition is not checked

    def problem(self, since: datetime.datetime, expected_hash: str) -> str | None:
        """What is wrong right now, or None."""
        try:
            status, _ = _get(self.healthz, "", 5)
        except KubeletUnanswered as exc:  # it names the URL
            return str(exc)
        if status != 200:
            return f"{self.healthz} answered {status}"
        if self.cluster is not None and not self.cluster.ready_since(since):
            return f"node {self.cluster.node} is not Ready since the restart"
        if self.metrics and expected_hash:
            try:
                status, page = _get(self.metrics, self.token, 5)
            except KubeletUnanswered as exc:
                return str(exc)
            if status != 200:
                return f"{self.metrics} answered {status} (the config hash cannot be checked)"
            hashes = reported_hashes(page)
            if hashes is not None and expected_hash not in hashes:
                shown = ", ".join(hashes) or "none"
                return f"the kubelet runs config {shown}, not the one written ({expected_hash})"
        return None

    def check(
        self,
        since: datetime.datetime,
        expected_hash: str,
        sleep: Callable[[float], None] = time.sleep,
    ) -> str | None:
        deadline = time.monotonic() + self.timeout
        problem: str | None = "no answer"
        while time.monotonic() < deadline:
            try:
                problem = self.problem(since, expected_hash)
            except ClusterError as exc:
                problem = str(exc)
            if problem is None:
                return None
            sleep(max(0.0, min(1.0, deadline - time.monotonic())))  # never past the deadline
        return f"{problem} for {self.timeout:g}s"


def node_args(args: Sequence[str], root: NodeRoot) -> list[str]:
    """``args`` with each absolute path that exists under ``root`` (the node's filesystem, as the
    pod sees it) taken from there: ``/etc/kubernetes/azure.json``, ``--config=/etc/x.json``."""
    mapped = []
    for arg in args:
        flag, equals, value = arg.rpartition("=") if arg.startswith("-") else ("", "", arg)
        if value.startswith("/") and not root.is_host:
            found = root.host(value)
            if found.exists():
                value = str(found)
        mapped.append(f"{flag}{equals}{value}")
    return mapped


def dry_run(
    loaded: LoadedConfig,
    bin_dir: str,
    launcher: Sequence[str] = (),
    root: NodeRoot = HOST,
    images: Mapping[str, str] | None = None,
) -> list[tuple[str, str]]:
    """One credential request per provider of ``loaded``, for ``images[name]`` or else a sample
    image its matchImages take, run as the kubelet runs it (the plugins' cache only read), the
    node files its args name read under ``root``: ``(provider, problem)`` for each that failed;
    an empty list when every one answered. A plugin that trades its token at the registry itself
    (ACR) is asked only for an image the operator named: a sample registry is nobody's."""
    failed: list[tuple[str, str]] = []
    for provider in loaded.providers:
        name = provider.name or ""
        if provider.tokenAttributes is not None:
            continue  # it needs a pod's service account token: pulls prove it, not the agent
        plugin = plugin_for_name(name)
        named = (images or {}).get(name, "")
        if named:
            if not select_providers(named, [(name, provider.matchImages or [])])[0].matched:
                failed.append((name, f"its dry-run image {named} is not one its matchImages take"))
                continue
            image: str | None = named
        elif plugin is None or plugin.dry_run_needs_own_registry:
            continue  # not one of ours, or only an image of the operator's registry proves it
        else:
            image = next(
                (
                    sample
                    for sample in plugin.sample_images.values()
                    if select_providers(sample, [(name, provider.matchImages or [])])[0].matched
                ),
                None,
            )
        if image is None:
            continue  # matchImages only for hosts of no sample: nothing to ask
        on_node = provider.model_copy(update={"args": node_args(provider.args or [], root)})
        if plugin is not None and not launcher:  # the bundle holds each plugin by its own name
            on_node = on_node.model_copy(update={"name": plugin.name})
        report = run_provider(on_node, bin_dir, image, "", {}, launcher=launcher)
        if report.error is not None:
            failed.append((name, report.error))
    return failed

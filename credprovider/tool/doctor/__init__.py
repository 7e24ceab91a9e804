"""``credprovider doctor``: the node's credential chain, link by link, each link a check that
passes, warns or fails with the fix in one sentence. Reads only: no cache directory is created and
no file written (the plugins run with their cache read-only).

One module per part of the chain: ``chain`` (discovery's findings, files on the node, caches),
``identity`` (the endpoints the plugins' identities come from), ``ccm`` (the kubelet's pairing
with a cloud controller manager the in-tree removal requires) and ``cloudnode`` (the Node object's
side of it: the taint and the providerID only that manager sets), ``images`` (the node's images and
the dry run), ``live`` (what only the running kubelet can say), ``cache_entries`` (what the
caches hold, never a secret); ``model`` holds the result (the command adds what the chart's agent
wrote, compared by ``agent.rewritten``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from credprovider.errors import CredproviderError
from credprovider.tool.doctor.ccm import MIGRATE_COMMAND
from credprovider.tool.doctor.model import (
    FAIL,
    INFO,
    PASS,
    WARN,
    Check,
    Diagnosis,
)
from credprovider.tool.kubeconfig.lint import lint_providers
from credprovider.tool.node.discovery import NodeView, in_tree

if TYPE_CHECKING:
    from credprovider.tool.cluster.nodes import CloudFacts
from credprovider.tool.catalog import plugin_for_name
from credprovider.tool.cluster.connect import ClusterError, connect
from credprovider.tool.cluster.nodes import read_cloud_facts
from credprovider.tool.cluster.reviews import may_request_tokens
from credprovider.tool.images.bindir import check_binaries
from credprovider.tool.kubeconfig.model import ConfigError
from credprovider.tool.kubeconfig.validate import load_config
from credprovider.tool.node.access import FileProblem, UnreadableError, read_text
from credprovider.tool.node.discovery import absolute_in, flags_file_of
from credprovider.tool.node.kubelet_facts import takes_token_attributes
from credprovider.tool.node.kubelet_flags import (
    BIN_DIR_FLAG,
    CLOUD_PROVIDER_FLAG,
    FEATURE_GATES_FLAG,
    flag_value,
)

__all__ = ["Check", "ClusterAccess", "Diagnosis", "diagnose"]


def _read(view: NodeView) -> Callable[[str], str | None]:
    """A node file's text (under ``--root``), or ``None`` when it cannot be read."""

    def read(path: str) -> str | None:
        try:
            return read_text(view.host_path(path))
        except (FileProblem, UnreadableError):
            return None

    return read


def _exists(view: NodeView) -> Callable[[str], bool]:
    """Whether the node (under ``--root``) has ``path``: a file, a directory, a link to one."""

    def exists(path: str) -> bool:
        try:
            return view.root.exists(path)
        except (CredproviderError, OSError):  # a link loop, out of the root: not there to use
            return False

    return exists


@dataclass(frozen=True)
class ClusterAccess:
    """How doctor reads the Node object: ``kubeconfig`` (default: the kubelet's own) and
    ``node_name`` (default: the kubelet's --hostname-override, else the host name)."""

    kubeconfig: str | None = None
    node_name: str | None = None


def diagnose(
    view: NodeView,
    images: Sequence[str],
    offline: bool,
    access: ClusterAccess | None = None,
) -> Diagnosis:
    """Every check that applies: live ones (identity endpoints, the kubelet's API and log, the
    Node object, the dry run) only on this node (root ``/``) and not ``offline``."""
    from credprovider.tool.doctor import chain, live
    from credprovider.tool.doctor.ccm import check_cloud_provider

    diagnosis = Diagnosis()
    migrate = _migrate_command(view)
    chain.node(view, diagnosis, migrate)
    settings = view.settings
    here = view.root.is_host
    kubelet = view.kubelet
    version = None
    if kubelet is not None and here:
        version = live.check_version(
            view,
            kubelet,
            bool(settings.provider_config) and _is_dir(view, settings.provider_config or ""),
            diagnosis,
        )
        live.check_log(kubelet, diagnosis)
    elif here:
        version = live.installed_version(diagnosis)
    check_cloud_provider(settings, version, diagnosis, migrate)
    providers = _credential_chain(view, images, offline, version, diagnosis)
    asked: set[str] = set()
    if here and not offline and (kubelet is not None or (access and access.kubeconfig)):
        asked = _node_object(view, access or ClusterAccess(), providers, diagnosis)
    chain.unasked_audiences(diagnosis, asked)
    return diagnosis


def _node_object(
    view: NodeView, access: ClusterAccess, providers: Sequence[str], diagnosis: Diagnosis
) -> set[str]:
    """The Node's cloud facts, asked of the API server with the kubelet's own kubeconfig (it
    may get its own Node) unless another is given; a standalone kubelet has no Node. Then each
    provider's token audience asked of it: the providers asked about."""
    from credprovider.tool.doctor.cloudnode import check_node_object

    kubelet = view.kubelet
    args = kubelet.argv if kubelet is not None else ()
    # the operator's --kubeconfig as given; the kubelet's own as the kubelet reads it
    kubeconfig = access.kubeconfig or absolute_in(
        flag_value(args, "kubeconfig"), kubelet.cwd if kubelet is not None else None
    )
    if not kubeconfig:
        diagnosis.add(
            "kubelet",
            INFO,
            "the kubelet runs standalone (no --kubeconfig): there is no Node object to check",
        )
        return set()
    name = access.node_name or flag_value(args, "hostname-override") or os.uname().nodename
    facts: CloudFacts | str
    client = None
    try:
        # the kubelet's own kubeconfig, in its environment: its proxy, its exec plugin's PATH
        environ = None if access.kubeconfig else view.environment
        client = connect(kubeconfig, in_cluster=False, environ=environ)
        facts = read_cloud_facts(client, name.lower())
    except ClusterError as exc:
        facts = str(exc)
    asked = _token_audiences(client, diagnosis) if client is not None else set()
    managers = []
    for provider in providers:
        plugin = plugin_for_name(provider)
        if plugin is not None and plugin.controller_manager:
            managers.append(plugin.controller_manager)
    check_node_object(facts, view.settings, managers, diagnosis)
    return asked


def _token_audiences(client: Any, diagnosis: Diagnosis) -> set[str]:
    """Each provider's token audience asked of the API server as the kubelet (KEP-4412): may this
    node request service account tokens for it? (kind #4185: without the permission the kubelet
    only logs, and pulls anonymously.) The providers asked about."""
    from credprovider.tool.doctor.chain import AUDIENCE_GRANT
    from credprovider.tool.doctor.model import Area

    for provider, audience in diagnosis.audiences.items():
        try:
            review = may_request_tokens(client, audience)
        except ClusterError as exc:
            diagnosis.add(Area.SERVICE_ACCOUNT, INFO, str(exc), "", provider)
            continue
        if review.allowed:
            diagnosis.add(
                Area.SERVICE_ACCOUNT,
                PASS,
                f"the API server lets this node request service account tokens for the audience "
                f"{audience!r} (asked as the kubelet)",
                "",
                provider,
            )
            continue
        why = f" ({review.reason})" if review.reason else ""
        diagnosis.add(
            Area.SERVICE_ACCOUNT,
            WARN,
            f"the API server does not let this node request service account tokens for the "
            f"audience {audience!r} for every service account (asked as the kubelet){why}: pods "
            "whose service account no rule names get no token, and the kubelet pulls their images "
            "anonymously",
            "grant it: " + AUDIENCE_GRANT.format(audience=audience),
            provider,
        )
    return set(diagnosis.audiences)


def _credential_chain(
    view: NodeView,
    images: Sequence[str],
    offline: bool,
    version: tuple[int, int] | None,
    diagnosis: Diagnosis,
) -> list[str]:
    """The config, the plugins, the images and the caches: the providers the config names ([]
    when there is none to read)."""
    from credprovider.tool.doctor import chain, identity, live
    from credprovider.tool.doctor.images import check_image, report_broken, static_pod_images

    settings = view.settings
    here = view.root.is_host
    environment = view.environment
    kubelet = view.kubelet
    if not settings.provider_config:
        return []
    sa_tokens = takes_token_attributes(settings.feature_gates, version)
    try:
        loaded = load_config(view.host_path(settings.provider_config), sa_tokens)
    except ConfigError as exc:
        diagnosis.add(
            "config",
            FAIL,
            f"the kubelet would not start: {exc.describe()}",
            "fix it, then credprovider validate",
        )
        return []
    except UnreadableError as exc:
        diagnosis.add("config", WARN, str(exc), "run credprovider doctor as root")
        return []
    names = ", ".join(p.name or "" for p in loaded.providers)
    diagnosis.add(
        "config", PASS, f"{settings.provider_config} decodes as the kubelet decodes it: {names}"
    )
    for warning in lint_providers(loaded, settings.bin_dir if here else None):
        diagnosis.add(
            "config",
            WARN,
            warning,
            f"fix that provider in {settings.provider_config} (validate says the same)",
        )
    chain.changed_since_start(view, loaded.sources, diagnosis)
    running: list[str] = []
    if kubelet is not None and here and not offline:
        live.check_loaded_config(view, loaded.contents, diagnosis)
        pulled, said = live.runtime_images(view)
        diagnosis.add("image", INFO, said)
        running = [*live.running_pod_images(view), *pulled]
    if here and not offline:
        identity.check_identities(loaded, environment, _read(view), _exists(view), diagnosis)
    if not settings.bin_dir:
        diagnosis.add(
            "binary",
            FAIL,
            f"no --{BIN_DIR_FLAG}: the kubelet will not start",
            f"set --{BIN_DIR_FLAG}",
        )
        return [p.name or "" for p in loaded.providers]
    bin_dir = view.host_path(settings.bin_dir)
    not_starting: set[str] = set()
    providers = [p.name or "" for p in loaded.providers]
    try:
        checked = check_binaries(loaded, bin_dir, environment, view.root, view.both_or_neither)
    except UnreadableError as exc:
        diagnosis.add("binary", WARN, str(exc), "run credprovider doctor as root")
    else:
        for found in checked.errors:
            not_starting.add(found.provider)
            diagnosis.add(
                "binary",
                FAIL,
                found.text,
                f"fix that provider's args or env in {settings.provider_config}, or the file they "
                "name that its line says (validate --bin-dir checks it again)"
                if found.refuses_args
                else "reinstall the plugins (credprovider install)",
                found.provider,
            )
        for found in checked.warnings:
            diagnosis.add("binary", WARN, found.text, "", found.provider)
        for found in checked.proven:
            diagnosis.add("binary", PASS, found.text, "", found.provider)
    not_run = (
        "--offline"
        if offline
        else "--root: an image's plugins are not run here"
        if not here
        else None
    )
    dry_runs: dict[str, str] = {}
    if "" in not_starting:  # the bin dir itself is unusable: no plugin starts
        not_starting = set(providers)
    broken: dict[str, list[str]] = {name: [] for name in not_starting}
    for image in dict.fromkeys([*images, *static_pod_images(view), *running]):
        check_image(loaded, bin_dir, image, not_run, environment, diagnosis, dry_runs, broken)
    report_broken(broken, diagnosis)
    for provider, directory in chain.cache_dirs(loaded, dict(environment or {})):
        chain.cache(view, provider, directory, diagnosis)
    chain.service_accounts(loaded, diagnosis)
    return providers


def _migrate_command(view: NodeView) -> str:
    """``credprovider migrate`` for this node: naming the flags file that gives the in-tree cloud
    (or, failing that, the feature gates), when one of the node's flag files does."""
    if not in_tree(view.settings):
        return MIGRATE_COMMAND
    found = flags_file_of(view, CLOUD_PROVIDER_FLAG) or flags_file_of(view, FEATURE_GATES_FLAG)
    return MIGRATE_COMMAND.replace("FILE", found) if found else MIGRATE_COMMAND


def _is_dir(view: NodeView, path: str) -> bool:
    return os.path.isdir(view.host_path(path))

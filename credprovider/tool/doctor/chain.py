"""The links of the chain that are files on the node: discovery's findings, a config changed after
the kubelet started, the plugins' caches, and what service-account providers need."""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Final

from credprovider.errors import CredproviderError
from credprovider.tool.change.journalformat import journal_for
from credprovider.tool.doctor.model import FAIL, INFO, PASS, WARN, Diagnosis
from credprovider.tool.kubeconfig.lint import cache_dir
from credprovider.tool.node.discovery import NOTHING, NodeView, in_tree
from credprovider.tool.node.kubelet_facts import CLOUD_LOGIN_GATE
from credprovider.tool.node.kubelet_flags import (
    BIN_DIR_FLAG,
    CLOUD_PROVIDER_FLAG,
    CONFIG_FLAG,
    KubeletSettings,
)
from credprovider.tool.node.layouts import KUBEADM_FLAGS_ENV


def node(view: NodeView, diagnosis: Diagnosis, migrate: str) -> None:
    """Discovery's findings; ``migrate``: the command that moves this node off the in-tree cloud."""
    settings = view.settings
    for note in view.notes:
        diagnosis.add("node", INFO, note)
    for line in view.unreadable:
        diagnosis.add("node", WARN, line, "run credprovider doctor as root to check it")
    for line in view.ignored:
        diagnosis.add(
            "node",
            WARN,
            line,
            "find out who started it (ps -o user,pid,args -p PID): only root's kubelet in this "
            "mount namespace, from a root-owned binary, is the node's (docs/security.md)",
        )
    if view.layout_note:
        diagnosis.add("node", INFO, view.layout_note)
    where = f"the kubelet (pid {view.kubelet.pid})" if view.kubelet else view.found_by
    if not settings.provider_config and in_tree(settings):
        diagnosis.add(
            "node",
            FAIL,
            f"{where} still has the in-tree cloud login ({_in_tree_words(settings)}) and no "
            f"--{CONFIG_FLAG}: no plugin is asked for credentials, and a kubelet 1.31 or newer "
            "does not start",
            f"{migrate} (to --cloud-provider=external and the plugins), then restart the kubelet",
        )
    elif not settings.provider_config and (
        view.kubelet or (view.unit and view.found_by == NOTHING)
    ):
        said = (
            f"the kubelet's unit {view.unit.unit} (as systemd starts it) gives no --{CONFIG_FLAG}"
            if view.unit and not view.kubelet
            else f"{where} runs without --{CONFIG_FLAG}"
        )
        diagnosis.add(
            "node", FAIL, f"{said}: no plugin is ever asked for credentials", _flags_fix(view)
        )
    elif not settings.provider_config and view.unread_sources:
        diagnosis.undecided = view.unread_sources[0]
        diagnosis.add(
            "node",
            WARN,
            "where this node's kubelet gets its credential provider config cannot be told as this "
            f"user: {view.unread_sources[0]}",
            "run credprovider doctor as root",
        )
    elif not settings.provider_config:
        found = view.found_by.startswith("layout")
        diagnosis.add(
            "node",
            FAIL,
            f"{view.found_by}: its config is not at a fixed path (bin dir {settings.bin_dir})"
            if found
            else "no running kubelet and no known layout names a credential provider config",
            "name it: credprovider doctor --config FILE" + ("" if found else " --bin-dir DIR"),
        )
    else:
        diagnosis.add(
            "node",
            PASS,
            f"{view.found_by}: config {settings.provider_config}, bin dir {settings.bin_dir}",
        )
        _change_left(view, settings.provider_config, diagnosis)


def _flags_fix(view: NodeView) -> str:
    """What gives a kubelet without credential provider flags its plugins: on kubeadm, migrate
    (it names the file kubeadm's drop-in reads, and the install to run first); elsewhere, the
    plugins installed and the two flags given where the platform keeps them."""
    try:
        kubeadm = os.path.lexists(view.host_path(KUBEADM_FLAGS_ENV))
    except (OSError, ValueError, CredproviderError):
        kubeadm = False
    if kubeadm:
        return (
            f"credprovider migrate --kubelet-flags-file {KUBEADM_FLAGS_ENV} --providers PROVIDERS "
            "shows where the two flags go (the file kubeadm's drop-in reads) and the install to "
            "run first; then the same with --write, and restart the kubelet"
        )
    return (
        "install the plugins and a config (credprovider install --bin-dir DIR --config-out FILE), "
        f"give the kubelet --{CONFIG_FLAG} and --{BIN_DIR_FLAG} where its platform keeps its flags "
        "(docs/platforms.md), and restart it"
    )


def _change_left(view: NodeView, config: str, diagnosis: Diagnosis) -> None:
    """A change by hand killed part way beside the kubelet's config (its journal is left): the
    node may hold half of it (a cloud flag gone from one file, the credential flags not yet in
    the other) until the next run finishes it (change/journal.py)."""
    journal = str(journal_for(config))
    try:
        left = os.path.lexists(view.host_path(journal))
    except (OSError, ValueError, CredproviderError):
        return
    if left:
        diagnosis.add(
            "node",
            WARN,
            f"a credprovider install, migrate --write or undo was killed part way (its journal "
            f"{journal} is left): the kubelet's files may hold half of that change",
            "run the same command again (as root): it finishes the change first and says what it "
            "finished; then restart the kubelet",
        )


def _in_tree_words(settings: KubeletSettings) -> str:
    """What of the in-tree login the kubelet's flags still give, as the operator wrote it."""
    said = []
    if settings.cloud_provider not in (None, "", "external"):
        said.append(f"--{CLOUD_PROVIDER_FLAG}={settings.cloud_provider}")
    if CLOUD_LOGIN_GATE in settings.feature_gates:
        enabled = str(settings.feature_gates[CLOUD_LOGIN_GATE]).lower()
        said.append(f"{CLOUD_LOGIN_GATE}={enabled}")
    return ", ".join(said)


def changed_since_start(view: NodeView, files: Sequence[Path], diagnosis: Diagnosis) -> None:
    started = view.kubelet.started_at if view.kubelet else None
    if started is None:
        return
    for path in files:
        try:
            modified = path.stat().st_mtime
        except OSError:
            continue
        if modified > started + 1:
            diagnosis.add(
                "config",
                FAIL,
                f"{path} changed after the kubelet started: the kubelet reads it only at start, so "
                "what runs is not what is on disk",
                "restart the kubelet to load it (after credprovider validate passes)",
            )


def cache_dirs(loaded: Any, environment: dict[str, str] | None) -> list[tuple[str, str]]:
    """Each provider's cache directory, read from its args and env as our plugins read them."""
    return [
        (provider.name or "", directory)
        for provider in loaded.providers
        if (directory := cache_dir(provider, environment))
    ]


def cache(view: NodeView, provider: str, directory: str, diagnosis: Diagnosis) -> None:
    """The cache as the kubelet's plugins (root) would judge it: root's, not writable by others,
    nor its parents (unless sticky); then its entries (``cache_entries``)."""
    path = Path(view.host_path(directory))
    if not os.path.lexists(path):
        diagnosis.add(
            "cache",
            INFO,
            f"cache {directory} does not exist yet (the plugin creates it 0700)",
            "",
            provider,
        )
        return
    for current in [path, *path.parents]:
        try:
            info = current.lstat() if current != path else current.stat()
        except OSError:
            continue
        writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        sticky_parent = current != path and info.st_mode & stat.S_ISVTX
        if info.st_uid != 0 or (writable and not sticky_parent):
            diagnosis.add(
                "cache",
                FAIL,
                f"cache {directory}: {current} is "
                + (
                    f"owned by uid {info.st_uid}"
                    if info.st_uid != 0
                    else f"mode {stat.S_IMODE(info.st_mode):o}"
                )
                + ": another user could plant or read entries, so the plugins run uncached",
                f"chown root {current} and chmod go-w it",
                provider,
            )
            return
    from credprovider.tool.doctor.cache_entries import count_entries, describe

    counted = count_entries(str(path))
    for problem in counted.unsafe:
        diagnosis.add(
            "cache",
            FAIL,
            f"cache {directory}: {problem}",
            "delete it: the plugin writes its own entries, root's and 0600",
            provider,
        )
    if counted.not_read:
        diagnosis.add(
            "cache", WARN, f"cache {directory}: {counted.not_read}", "run as root", provider
        )
        return
    diagnosis.add(
        "cache",
        PASS,
        f"cache {directory}: root's, not writable by others; {describe(counted)}",
        "",
        provider,
    )


# The grant a provider's token audience needs (KEP-4412, ServiceAccountNodeAudienceRestriction).
AUDIENCE_GRANT: Final = (
    "an RBAC rule with verb request-serviceaccounts-token-audience on resource {audience} "
    '(apiGroups [""]), bound to the group system:nodes (docs/operators.md)'
)


def service_accounts(loaded: Any, diagnosis: Diagnosis) -> None:
    """Each provider's token audience, recorded for doctor to ask the API server about
    (:func:`unasked_audiences` says those it could not ask); the annotations pods' service
    accounts need. With the feature gate off, tokenAttributes already failed the config."""
    for provider in loaded.providers:
        attributes = provider.tokenAttributes
        if attributes is None:
            continue
        diagnosis.audiences[provider.name or ""] = str(attributes.serviceAccountTokenAudience)
        required = list(attributes.requiredServiceAccountAnnotationKeys or [])
        if required:
            diagnosis.add(
                "service-account",
                INFO,
                f"pods' service accounts need the annotations {', '.join(required)} (a missing "
                "one skips the plugin with only a V(5) log line)",
                "",
                provider.name or "",
            )


def unasked_audiences(diagnosis: Diagnosis, asked: Collection[str]) -> None:
    """A line for each provider's token audience doctor did not ask the API server about
    (offline, or no kubeconfig): the node needs the permission, and doctor cannot say it has."""
    for provider, audience in diagnosis.audiences.items():
        if provider in asked:
            continue
        diagnosis.add(
            "service-account",
            INFO,
            f"not asked of the API server: the node needs permission to request service account "
            f"tokens for the audience {audience!r} (without it the kubelet only logs and pulls "
            "anonymously)",
            "grant it: " + AUDIENCE_GRANT.format(audience=audience),
            provider,
        )

"""``credprovider doctor``'s checks: the node's credential chain, link by link, each a
:class:`Check` that passes, warns or fails with the fix in one sentence. Reads only: no cache
directory is created and no file written (the plugins run with their cache read-only).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from credprovider.runtime.redact import redact
from credprovider.tool.node.discovery import NodeView
from credprovider.tool.node.kubelet_flags import BIN_DIR_FLAG, CONFIG_FLAG

PASS, WARN, FAIL, INFO = "pass", "warn", "fail", "info"
SA_TOKEN_GATE: Final = "KubeletServiceAccountTokenForCredentialProviders"
MANIFEST_SUFFIXES: Final = (".yaml", ".yml", ".json")


@dataclass
class Check:
    area: str  # node, config, binary, image, cache, service-account
    status: str
    message: str
    fix: str = ""
    provider: str = ""


@dataclass
class Diagnosis:
    checks: list[Check] = field(default_factory=list)

    def add(self, *args: Any, **kwargs: Any) -> None:
        self.checks.append(Check(*args, **kwargs))

    @property
    def failed(self) -> bool:
        return any(check.status == FAIL for check in self.checks)

    def as_json(self, view: NodeView) -> dict[str, Any]:
        settings = view.settings
        return {
            "ok": not self.failed,
            "foundBy": view.found_by,
            "root": view.root,
            "kubeletPid": view.kubelet.pid if view.kubelet else None,
            "config": settings.provider_config,
            "binDir": settings.bin_dir,
            "featureGates": dict(settings.feature_gates),
            "sources": dict(settings.sources),
            "checks": [asdict(check) for check in self.checks],
        }


def _node(view: NodeView, diagnosis: Diagnosis) -> None:
    settings = view.settings
    for note in view.notes:
        diagnosis.add("node", INFO, note)
    for line in view.unreadable:
        diagnosis.add("node", WARN, line, "run credprovider doctor as root to check it")
    if view.layout_note:
        diagnosis.add("node", INFO, view.layout_note)
    if view.kubelet is not None and not settings.provider_config:
        diagnosis.add(
            "node",
            FAIL,
            f"the kubelet (pid {view.kubelet.pid}) runs without --{CONFIG_FLAG}: no plugin is ever "
            "asked for credentials",
            "install a config and bin dir (credprovider install) and restart the kubelet",
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


def _changed_since_start(view: NodeView, files: Sequence[Path], diagnosis: Diagnosis) -> None:
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


def private_host_owner(image: str) -> str | None:
    """The cloud whose registry ``image`` names (an ECR, ACR or Google host), if any."""
    from credprovider.runtime.imageref import ImageError, parse_image
    from credprovider.tool.catalog import PLUGINS

    try:
        host = parse_image(image).host
    except ImageError:
        return None
    for plugin in PLUGINS.values():
        if plugin.explain(host, host).get("recognized"):
            return plugin.name
    return None


def _images_of(document: Any) -> Iterable[str]:
    spec = document.get("spec") if isinstance(document, dict) else None
    if not isinstance(spec, dict):
        return
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict) and isinstance(container.get("image"), str):
                yield container["image"]


def static_pod_images(view: NodeView) -> list[str]:
    """The images of the node's static pods (the kubelet's staticPodPath), in file order."""
    from credprovider.tool.nodefiles import FileProblem, UnreadableError, read_text
    from credprovider.tool.yamldoc import YamlError, load_yaml

    where = view.settings.static_pod_path
    if not where:
        return []
    base = Path(view.host_path(where))
    try:
        files = (
            sorted(
                p
                for p in base.iterdir()
                if p.suffix in MANIFEST_SUFFIXES and not p.name.startswith(".")
            )
            if base.is_dir()
            else [base]
        )
    except OSError:  # unreadable or gone: the image checks then cover --image only
        return []
    images: list[str] = []
    for path in files[:256]:
        try:
            images += _images_of(load_yaml(read_text(str(path))))
        except (FileProblem, UnreadableError, YamlError, OSError):
            continue
    return list(dict.fromkeys(images))


def _image(
    loaded: Any, bin_dir: str, image: str, not_run: str | None, diagnosis: Diagnosis
) -> None:
    from credprovider.tool.lookup import kubelet_lookup
    from credprovider.tool.selection import select_providers

    selections = select_providers(
        image, [(p.name or "", p.matchImages or []) for p in loaded.providers]
    )
    claimed = [s.name for s in selections if s.matched]
    if not claimed:
        owner = private_host_owner(image)
        if owner is None:
            diagnosis.add("image", INFO, f"{image}: no provider claims it (pulled anonymously)")
            return
        diagnosis.add(
            "image",
            FAIL,
            f"{image}: no provider claims it, although {owner} serves its host",
            f"add a matchImages pattern for its host to the {owner} provider "
            "(credprovider match shows the nearest miss)",
        )
        return
    if not_run:
        diagnosis.add(
            "image", PASS, f"{image}: claimed by {', '.join(claimed)} (not run: {not_run})"
        )
        return
    report = kubelet_lookup(loaded, bin_dir, image)
    for provider in report.providers:
        if not provider.matched:
            continue
        if provider.error or provider.skipped:
            diagnosis.add(
                "image",
                FAIL,
                f"{image}: {provider.error or provider.skipped}",
                "run credprovider get for the whole story",
                provider.name,
            )
            continue
        found = [
            f"{key} (user {entry.username}, password {redact(entry.password)})"
            for name, key, entry in report.credentials
            if name == provider.name
        ]
        diagnosis.add(
            "image",
            PASS if found else WARN,
            f"{image}: {'; '.join(found) if found else 'answered without credentials'}; cache "
            f"{provider.cache_key} for {provider.cache_seconds or 0:.0f}s",
            "" if found else "run credprovider get to see why",
            provider.name,
        )


def _cache_dirs(loaded: Any, environment: dict[str, str] | None) -> list[tuple[str, str]]:
    """Each provider's cache directory, read from its args and env as our plugins read them."""
    from credprovider.errors import CredproviderError
    from credprovider.runtime.args import split_common_args
    from credprovider.runtime.serve import CACHE_DIR_ENV

    found = []
    for provider in loaded.providers:
        env = {**(environment or {}), **{v.name or "": v.value or "" for v in provider.env or []}}
        try:
            opts, _ = split_common_args(list(provider.args or []))
        except CredproviderError:  # args the plugin refuses: the binary check reports them
            continue
        directory = opts.cache_dir or env.get(CACHE_DIR_ENV)
        if directory:
            found.append((provider.name or "", directory))
    return found


def _cache(view: NodeView, provider: str, directory: str, diagnosis: Diagnosis) -> None:
    """The cache as the kubelet's plugins (root) would judge it: root's, not writable by others,
    nor its parents (unless sticky)."""
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
    diagnosis.add("cache", PASS, f"cache {directory}: root's, not writable by others", "", provider)


def _service_accounts(loaded: Any, diagnosis: Diagnosis) -> None:
    """With the feature gate off, tokenAttributes already failed the config (load_config)."""
    for provider in loaded.providers:
        attributes = provider.tokenAttributes
        if attributes is None:
            continue
        required = list(attributes.requiredServiceAccountAnnotationKeys or [])
        diagnosis.add(
            "service-account",
            INFO,
            "not checkable from the node: the node needs permission to request service account "
            f"tokens for the audience {attributes.serviceAccountTokenAudience!r} (without it the "
            "kubelet only logs and pulls anonymously)"
            + (
                f"; pods' service accounts need the annotations {', '.join(required)} (a missing one skips the plugin with only a V(5) log line)"
                if required
                else ""
            ),
            "grant the node the request-serviceaccounts-token-audience permission for that audience",
            provider.name or "",
        )


def diagnose(view: NodeView, images: Sequence[str], offline: bool) -> Diagnosis:
    from credprovider.tool.config import ConfigError
    from credprovider.tool.config_lint import check_binaries
    from credprovider.tool.config_validate import load_config
    from credprovider.tool.nodefiles import UnreadableError

    diagnosis = Diagnosis()
    _node(view, diagnosis)
    settings = view.settings
    if not settings.provider_config:
        return diagnosis
    sa_tokens = settings.feature_gates.get(SA_TOKEN_GATE, True)
    try:
        loaded = load_config(view.host_path(settings.provider_config), sa_tokens)
    except ConfigError as exc:
        diagnosis.add(
            "config",
            FAIL,
            f"the kubelet would not start: {exc.describe()}",
            "fix it, then credprovider validate",
        )
        return diagnosis
    except UnreadableError as exc:
        diagnosis.add("config", WARN, str(exc), "run credprovider doctor as root")
        return diagnosis
    names = ", ".join(p.name or "" for p in loaded.providers)
    diagnosis.add(
        "config", PASS, f"{settings.provider_config} decodes as the kubelet decodes it: {names}"
    )
    _changed_since_start(view, loaded.sources, diagnosis)
    if not settings.bin_dir:
        diagnosis.add(
            "binary",
            FAIL,
            f"no --{BIN_DIR_FLAG}: the kubelet will not start",
            f"set --{BIN_DIR_FLAG}",
        )
        return diagnosis
    bin_dir = view.host_path(settings.bin_dir)
    try:
        checked = check_binaries(loaded, bin_dir)
    except UnreadableError as exc:
        diagnosis.add("binary", WARN, str(exc), "run credprovider doctor as root")
    else:
        for line in checked.errors:
            diagnosis.add("binary", FAIL, line, "reinstall the plugins (credprovider install)")
        for line in checked.warnings:
            diagnosis.add("binary", WARN, line)
        for line in checked.proven:
            diagnosis.add("binary", PASS, line)
    not_run = (
        "--offline"
        if offline
        else "--root: an image's plugins are not run here"
        if view.root != "/"
        else None
    )
    for image in list(dict.fromkeys([*images, *static_pod_images(view)])):
        _image(loaded, bin_dir, image, not_run, diagnosis)
    for provider, directory in _cache_dirs(loaded, dict(view.environment or {})):
        _cache(view, provider, directory, diagnosis)
    _service_accounts(loaded, diagnosis)
    return diagnosis

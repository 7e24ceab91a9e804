"""The images this node runs (static pods, the kubelet's pods, ``--image``) and the dry run of
each: which provider claims it and what its plugin answers, secrets redacted."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from credprovider.runtime.imageref import ImageError, parse_image, registry_of
from credprovider.runtime.redact import redact
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.doctor.model import FAIL, INFO, PASS, WARN, Diagnosis
from credprovider.tool.images.lookup import kubelet_lookup
from credprovider.tool.images.selection import select_providers
from credprovider.tool.node.access import FileProblem, UnreadableError, read_text
from credprovider.tool.node.discovery import NodeView
from credprovider.tool.node.yamldoc import YamlError, load_yaml

MANIFEST_SUFFIXES: Final = (".yaml", ".yml", ".json")
MAX_DRY_RUNS: Final = 64


def private_host_owner(image: str) -> str | None:
    """The cloud whose registry ``image`` names (an ECR, ACR or Google host), if any."""
    try:
        host = parse_image(image).host
    except ImageError:
        return None
    for plugin in PLUGINS.values():
        if plugin.explain(host, host).recognized:
            return plugin.name
    return None


def images_of(document: Any) -> Iterable[str]:
    spec = document.get("spec") if isinstance(document, dict) else None
    if not isinstance(spec, dict):
        return
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict) and isinstance(container.get("image"), str):
                yield container["image"]


def static_pod_images(view: NodeView) -> list[str]:
    """The images of the node's static pods (the kubelet's staticPodPath), in file order."""
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
            images += images_of(load_yaml(read_text(str(path))))
        except (FileProblem, UnreadableError, YamlError, OSError):
            continue
    return list(dict.fromkeys(images))


def check_image(
    loaded: Any,
    bin_dir: str,
    image: str,
    not_run: str | None,
    environment: Mapping[str, str] | None,
    diagnosis: Diagnosis,
    dry_runs: dict[str, str],
    broken: dict[str, list[str]] | None = None,
) -> None:
    """Which provider claims ``image`` and, once per registry (``dry_runs``: registry -> the image
    that was run; a node holds many images of few registries), what its plugins answer. An image
    whose claiming plugins all fail to start (the keys of ``broken``) is not run but added to
    their lists, for one line per plugin (:func:`report_broken`)."""
    selections = select_providers(
        image, [(p.name or "", p.matchImages or []) for p in loaded.providers]
    )
    claimed = [s.name for s in selections if s.matched]
    if not claimed:
        owner = private_host_owner(image)
        if owner is None:
            diagnosis.add("image", INFO, f"{image}: no provider claims it (pulled anonymously)")
            return
        if any(p.name == owner for p in loaded.providers):
            diagnosis.add(
                "image",
                FAIL,
                f"{image}: no provider claims it, although {owner} serves its host",
                f"add a matchImages pattern for its host to the {owner} provider "
                "(credprovider match shows the nearest miss)",
            )
            return
        diagnosis.add(  # anonymous pulls, pull secrets and the node's docker config are legal
            "image",
            WARN,
            f"{image}: its host is a {owner} registry, and no configured provider is {owner}: "
            "pulled without a plugin's credentials (a pull secret or the node's docker config "
            "may give some)",
            f"if it needs the node's identity, add the {owner} provider (credprovider install "
            "--providers ...)",
        )
        return
    if broken is not None and all(name in broken for name in claimed):
        for name in claimed:
            broken[name].append(image)
        return
    registry = registry_of(image)
    if not not_run and registry in dry_runs:
        not_run = f"its registry's answer is the one for {dry_runs[registry]}"
    elif not not_run and len(dry_runs) >= MAX_DRY_RUNS:
        not_run = f"dry runs stop after {MAX_DRY_RUNS} registries"
    if not_run:
        diagnosis.add(
            "image", PASS, f"{image}: claimed by {', '.join(claimed)} (not run: {not_run})"
        )
        return
    dry_runs[registry] = image
    report = kubelet_lookup(loaded, bin_dir, image, environment=environment)
    for provider in report.providers:
        if not provider.matched:
            continue
        if provider.skipped and _needs_a_pods_token(loaded, provider.name):
            diagnosis.add(
                "image",
                INFO,
                f"{image}: {provider.name} pulls only with a pod's service account token "
                "(tokenAttributes.requireServiceAccount), which a node-side dry run has none of: "
                "not run",
                "credprovider get IMAGE --sa-token-file FILE --sa-annotation KEY=VALUE replays a "
                "pod's pull",
                provider.name,
            )
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
            f"{provider.cache_key} for {provider.cache_seconds or 0:.0f}s (cacheKeyType "
            f"{provider.response.cache_key_type if provider.response else '?'})",
            "" if found else "run credprovider get to see why",
            provider.name,
        )


def _needs_a_pods_token(loaded: Any, name: str) -> bool:
    return any(
        p.name == name and p.tokenAttributes is not None and p.tokenAttributes.requireServiceAccount
        for p in loaded.providers
    )


def report_broken(broken: dict[str, list[str]], diagnosis: Diagnosis) -> None:
    """One line per plugin that does not start, naming the node's images it leaves without
    credentials."""
    for provider, images in broken.items():
        if not images:
            continue
        shown = ", ".join(images[:3]) + (f" and {len(images) - 3} more" if len(images) > 3 else "")
        diagnosis.add(
            "image",
            FAIL,
            f"{len(images)} image(s) it claims get no credentials while its plugin does not "
            f"start: {shown}",
            "fix its binary first (see binary)",
            provider,
        )

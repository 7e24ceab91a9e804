"""What the kubelet accepts in a CredentialProviderConfig but will not do what the operator meant:
warnings, one sentence each, naming the provider. The cloud-specific ones come from each cloud's
descriptor."""

from __future__ import annotations

import os
from pathlib import Path

from credprovider.config import CredentialProvider, LoadedConfig
from credprovider.descriptor import CloudPlugin
from credprovider.goformat import parse_go_duration

# --- lints: what the kubelet accepts but will not do what the operator meant ------------------------


def binary_problems(loaded: LoadedConfig, bin_dir: str) -> list[str]:
    """What in ``bin_dir`` stops the kubelet from starting, or every matched pull from working:
    one sentence per provider (one in all for a missing bin dir)."""
    directory = Path(bin_dir)
    if not directory.is_dir():
        return [
            f"the bin dir {bin_dir} does not exist: the kubelet would NOT start (no plugin "
            f"binary can exist there; plugin binary executable {directory / (loaded.providers[0].name or '')} "
            "did not exist)"
        ]
    problems = []
    for provider in loaded.providers:
        name = provider.name or ""
        where = f"provider {name!r}"
        binary = directory / name
        try:
            if binary.is_symlink() and not binary.exists():
                problems.append(
                    f"{where}: {binary} is a symlink to {os.readlink(binary)}, which does not "
                    "exist: the kubelet would NOT start (plugin binary executable did not exist)"
                )
            elif not binary.exists():
                problems.append(
                    f"{where}: {binary} does not exist: the kubelet would NOT start (plugin binary "
                    "executable did not exist)"
                )
            elif binary.is_dir() or not os.access(binary, os.X_OK):
                problems.append(
                    f"{where}: {binary} is not an executable file: the kubelet starts, but every "
                    "pull it matches fails (chmod +x it, or link the bundle's executable there)"
                )
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
            problems.append(f"{where}: {str(binary)!r} cannot be checked: {exc}")
    return problems


def lint_providers(loaded: LoadedConfig, bin_dir: str | None = None) -> list[str]:
    """Warnings the kubelet does not give, one sentence each, naming the provider. ``bin_dir``:
    checking a node, where the files a provider's args name must exist."""
    from credprovider.catalog import plugin_for_name

    warnings: list[str] = []
    for provider in loaded.providers:
        name = provider.name or ""
        found = _pattern_lints(provider)
        plugin = plugin_for_name(name)
        if plugin is not None:
            found += _coverage_lints(provider, plugin)
            env_names = {var.name or "" for var in provider.env or []}
            found += plugin.lints(provider.matchImages or [], provider.args or [], env_names)
            if bin_dir is not None:
                found += _node_file_lints(provider, plugin)
            found += _annotation_lints(provider, plugin)
        warnings += [f"provider {name!r}: {warning}" for warning in found]
    return warnings


def _pattern_lints(provider: CredentialProvider) -> list[str]:
    """matchImages the kubelet never matches, and a zero defaultCacheDuration."""
    found = []
    for pattern in provider.matchImages or []:
        path = pattern.split("/", 1)[1] if "/" in pattern else ""
        if "*" in path:
            found.append(
                f"matchImages {pattern!r} has '*' in its path, which the kubelet compares "
                "literally: it never matches an image"
            )
        if "?" in pattern or pattern.startswith("["):
            found.append(
                f"matchImages {pattern!r} uses '?' or a leading '[', which the kubelet parses as "
                "a URL query or IPv6 address: it never matches"
            )
    if (
        provider.defaultCacheDuration is not None
        and parse_go_duration(provider.defaultCacheDuration) == 0
    ):
        found.append(
            "defaultCacheDuration is 0, so the kubelet runs the plugin on every pull whenever "
            "the plugin leaves cacheDuration out"
        )
    return found


def _coverage_lints(provider: CredentialProvider, plugin: CloudPlugin) -> list[str]:
    """Registry forms of our plugin's cloud that matchImages leave out, with or without :443."""
    from credprovider.descriptor import DEFAULT_HTTPS_PORT
    from credprovider.matching import urls_match

    missed = [
        form
        for form, image in plugin.sample_images.items()
        if not any(urls_match(pattern, image) for pattern in provider.matchImages or [])
    ]
    port = f":{DEFAULT_HTTPS_PORT}"
    found = []
    hosts = [form for form in missed if not form.endswith(f"({port})")]
    if hosts:
        found.append(
            f"matchImages do not cover {', '.join(hosts)} registries "
            f"(e.g. {plugin.sample_images[hosts[0]]}): pulls from them get no credentials"
        )
    ported = [form for form in missed if form.endswith(f"({port})")]
    if ported:
        found.append(
            f"matchImages do not cover images that name the port {port} (e.g. "
            f"{plugin.sample_images[ported[0]]}): the kubelet matches ports exactly, so add "
            f"each host pattern with {port} too (as the shipped configs do)"
        )
    return found


def _node_file_lints(provider: CredentialProvider, plugin: CloudPlugin) -> list[str]:
    """Absolute paths in args that do not exist on this node."""
    found = []
    for arg in provider.args or []:
        file_arg = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if file_arg.startswith("/") and not os.path.exists(file_arg):
            found.append(
                f"args name {file_arg}, which does not exist on this node: "
                f"{plugin.name} fails every pull it matches until it does"
            )
    return found


def _annotation_lints(provider: CredentialProvider, plugin: CloudPlugin) -> list[str]:
    """tokenAttributes annotation keys the plugin does not read."""
    attributes = provider.tokenAttributes
    if attributes is None:
        return []
    keys = (attributes.requiredServiceAccountAnnotationKeys or []) + (
        attributes.optionalServiceAccountAnnotationKeys or []
    )
    return [
        f"tokenAttributes annotation {key!r} is not read by {plugin.name} "
        f"(it reads {', '.join(plugin.annotation_keys)})"
        for key in keys
        if key not in plugin.annotation_keys
    ]

"""What the kubelet accepts in a CredentialProviderConfig but will not do what the operator meant:
warnings, one sentence each, naming the provider. The cloud-specific ones come from each cloud's
descriptor."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping

from credprovider.cloud import DEFAULT_HTTPS_PORT, CloudPlugin
from credprovider.errors import CredproviderError
from credprovider.runtime.args import split_common_args
from credprovider.runtime.deadline import (
    DEFAULT_DEADLINE_SECONDS,
    KUBELET_TIMEOUT_SECONDS,
    configured_deadline,
)
from credprovider.runtime.excerpt import quoted
from credprovider.runtime.goformat import parse_go_duration
from credprovider.runtime.matching import parts_match, url_parts
from credprovider.runtime.nodefile import special_kind
from credprovider.runtime.serve import CACHE_DIR_ENV
from credprovider.tool.catalog import BY_NAME, plugin_for_name
from credprovider.tool.kubeconfig.envnames import near_miss_lints
from credprovider.tool.kubeconfig.model import CredentialProvider, LoadedConfig
from credprovider.tool.kubeconfig.secrets import secret_file_lints, secret_lints
from credprovider.tool.node.access import refused_as_non_root, unreadable
from credprovider.tool.slips import one_slip

# --- lints: what the kubelet accepts but will not do what the operator meant ------------------------


def lint_providers(loaded: LoadedConfig, bin_dir: str | None = None) -> list[str]:
    """Warnings the kubelet does not give, one sentence each, naming the provider. ``bin_dir``:
    checking a node, where the files a provider's args name must exist."""
    warnings: list[str] = []
    for provider in loaded.providers:
        name = provider.name or ""
        found = _pattern_lints(provider) + _placeholder_lints(provider) + _exec_lints(provider)
        plugin = plugin_for_name(name)
        if plugin is None:
            found += _near_name_lints(name)
        if plugin is not None:
            if name == plugin.name:
                # a provider under a suffixed name (another identity) is meant for some
                # registries only: it is not asked to cover every form of its cloud's
                found += _coverage_lints(provider, plugin)
            env_names = {var.name or "" for var in provider.env or []}
            found += plugin.lints(provider.matchImages or [], provider.args or [], env_names)
            if bin_dir is not None:
                found += _node_file_lints(provider, plugin) + secret_file_lints(provider, plugin)
            found += _annotation_lints(provider, plugin)
            found += _audience_lints(provider, plugin, env_names)
            found += near_miss_lints(provider, plugin)
        # each once: a config repeating an entry (60,000 times, say) says it once
        warnings += [f"provider {quoted(name)}: {warning}" for warning in dict.fromkeys(found)]
    return warnings + overlap_lints(loaded) + secret_lints(loaded)


def overlap_lints(loaded: LoadedConfig) -> list[str]:
    """Providers whose matchImages both match an image: the kubelet runs both plugins for it."""
    from credprovider.tool.kubeconfig.overlap import overlaps

    providers = [(p.name or "", list(p.matchImages or [])) for p in loaded.providers]
    return [
        f"providers {quoted(o.first)} and {quoted(o.second)} both match images such as "
        f"{quoted(o.image)} ({quoted(o.first_pattern)} and {quoted(o.second_pattern)}): the "
        "kubelet runs both plugins for such an image and hands the container runtime every "
        "credential they return, which it tries in turn; if each provider is another identity for "
        "its own registries, give each only its own"
        for o in overlaps(providers)
    ]


def _pattern_lints(provider: CredentialProvider) -> list[str]:
    """matchImages the kubelet never matches, and a zero defaultCacheDuration."""
    found = []
    for pattern in provider.matchImages or []:
        if not pattern.strip():
            found.append(
                f"matchImages has an empty pattern {quoted(pattern)}: it never matches an image"
            )
            continue
        scheme, sep, rest = pattern.partition("://")
        if sep:
            found.append(
                f"matchImages {quoted(pattern)} has a URL scheme, which the kubelet does not "
                f"strip: it never matches an image (remove {quoted(scheme + sep)}: {quoted(rest)})"
            )
            continue
        path = pattern.split("/", 1)[1] if "/" in pattern else ""
        if "*" in path:
            found.append(
                f"matchImages {quoted(pattern)} has '*' in its path, which the kubelet compares "
                "literally: it never matches an image"
            )
        if "?" in pattern or pattern.startswith("["):
            found.append(
                f"matchImages {quoted(pattern)} uses '?' or a leading '[', which the kubelet "
                "parses as a URL query or IPv6 address: it never matches"
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


def _exec_lints(provider: CredentialProvider) -> list[str]:
    found = [env_problem(name, value) for name, value in provider.env_pairs()]
    found += [arg_problem(arg) for arg in provider.args or []]
    found.append(_cache_dir_problem(provider))
    found.append(_deadline_problem(provider))
    return [problem for problem in found if problem]


def _deadline_problem(provider: CredentialProvider) -> str:
    """A deadline (``--deadline`` or ``CREDPROVIDER_DEADLINE``, read as our plugins read them) at
    or past the kubelet's kill: a slow call is killed before the plugin can say why."""
    try:
        opts, _ = split_common_args(list(provider.args or []))
        seconds = configured_deadline(opts.deadline, dict(provider.env_pairs()))
    except CredproviderError:  # a value the plugin refuses: its start check says so
        return ""
    if seconds is None or seconds < KUBELET_TIMEOUT_SECONDS:
        return ""
    return (
        f"its deadline is {seconds:g}s, and the kubelet kills a plugin after "
        f"{KUBELET_TIMEOUT_SECONDS:g}s: a slow call is killed before the plugin says why (no "
        f"line in the kubelet's log); leave it under that (default {DEFAULT_DEADLINE_SECONDS:g}s)"
    )


def _cache_dir_problem(provider: CredentialProvider) -> str:
    """A relative ``--cache-dir`` (or ``CREDPROVIDER_CACHE_DIR``): the plugin resolves it against
    the working directory the kubelet gives it, its own (``/`` under systemd), not the config's."""
    given = cache_dir(provider)
    if given and not given.startswith("/"):
        return (
            f"the cache directory {quoted(given)} is relative: the plugin makes it in the "
            "kubelet's working directory (/ under systemd), not beside the config; give an "
            "absolute path"
        )
    return ""


def cache_dir(provider: CredentialProvider, environment: Mapping[str, str] | None = None) -> str:
    """The cache directory a provider's plugin uses, read from its args and env as our plugins
    read them (``environment``: the kubelet's, under the provider's env); "" for none, or for
    args the plugin refuses (its start check says so)."""
    env = {**(environment or {}), **dict(provider.env_pairs())}
    try:
        opts, _ = split_common_args(list(provider.args or []))
    except CredproviderError:
        return ""
    return opts.cache_dir or env.get(CACHE_DIR_ENV, "")


def arg_problem(arg: str) -> str:
    """Why an ``args`` entry cannot be given to the plugin ("": it can): the kubelet passes it
    unchecked, and a NUL byte fails every exec (``fork/exec ...: invalid argument``); no shell
    runs between them, so a path written ``~/x`` (or ``--opt=~/x``) reaches the plugin as it is."""
    if "\0" in arg:
        return (
            f"args {quoted(arg)} holds a NUL byte, which no program's arguments can: the kubelet "
            "cannot run the plugin with it, and every pull it matches fails"
        )
    value = arg.partition("=")[2] if arg.startswith("-") else arg
    if value == "~" or value.startswith("~/"):
        return (
            f"args {quoted(arg)} names a path from '~', which no shell expands between the kubelet "
            "and the plugin: the plugin is given '~' as it is (a directory of that name); give "
            "the full path"
        )
    return ""


def env_problem(name: str, value: str) -> str:
    """Why an ``env`` entry cannot be what was meant ("": it can). The kubelet hands the plugin
    ``NAME=VALUE``, unchecked (kubelet pkg/credentialprovider/plugin/plugin.go, ExecPlugin;
    config.go validates no env): a NUL byte fails every exec; a name with '=' in it, or none,
    sets another variable than meant. What it quotes is an excerpt (a value may be megabytes)."""
    if "\0" in name or "\0" in value:
        return (
            f"env {quoted(name)} holds a NUL byte, which no environment can: the kubelet cannot "
            "run the plugin with it, and every pull it matches fails"
        )
    if "=" not in name and name:
        return ""
    seen, _, rest = f"{name}={value}".partition("=")
    if not seen:
        return f"env name {quoted(name)} is not a variable's name: the plugin sees nothing set"
    return (
        f"env name {quoted(name)} is not a variable's name: the kubelet passes "
        f"{quoted(name + '=' + value)}, so the plugin sees {quoted(seen)} set to {quoted(rest)}"
    )


def _coverage_lints(provider: CredentialProvider, plugin: CloudPlugin) -> list[str]:
    """Registry forms of our plugin's cloud that matchImages leave out, with or without :443."""
    # Each pattern parsed once: a config may hold 100,000 of them.
    globs = [g for g in map(url_parts, provider.matchImages or []) if g is not None]
    missed = [
        form
        for form, image in plugin.sample_images.items()
        if not (target := url_parts(image)) or not any(parts_match(g, target) for g in globs)
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
    """Absolute paths in the plugin's own args, and the files the plugin reads that its env names
    (``CloudPlugin.file_env``), that do not exist on this node or are not regular files. The
    runtime's own flags are not among them: ``--cache-dir`` is made by the plugin, klog's
    ``--log-file`` ignored."""
    args = list(provider.args or [])
    with contextlib.suppress(CredproviderError):  # refused args: validate says so elsewhere
        _, args = split_common_args(args)
    named = [
        ("args name", arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg)
        for arg in args
    ]
    named += [
        (f"env {var.name} names", var.value or "")
        for var in provider.env or []
        if var.name in plugin.file_env
    ]
    found = []
    for said, path in named:
        if not path.startswith("/"):
            continue
        try:
            kind = special_kind(os.stat(path).st_mode)
            if kind:
                found.append(
                    f"{said} {path}, which is {kind}, not a regular file: "
                    f"{plugin.name} refuses it and fails every pull it matches"
                )
        except OSError as exc:
            if refused_as_non_root(exc):
                found.append(f"{said} {path}: {unreadable(path, exc)}")
            else:
                found.append(
                    f"{said} {path}, which does not exist on this node: "
                    f"{plugin.name} fails every pull it matches until it does"
                )
        except ValueError:
            found.append(f"{said} {quoted(path)}, which cannot exist (a NUL byte)")
    return found


def _annotation_lints(provider: CredentialProvider, plugin: CloudPlugin) -> list[str]:
    """tokenAttributes annotation keys the plugin does not read."""
    attributes = provider.tokenAttributes
    if attributes is None:
        return []
    keys = (attributes.requiredServiceAccountAnnotationKeys or []) + (
        attributes.optionalServiceAccountAnnotationKeys or []
    )
    if plugin.annotation_lints is not None:
        return plugin.annotation_lints(provider.args or [], keys)
    return [
        f"tokenAttributes annotation {quoted(key)} is not read by {plugin.name} "
        f"(it reads {', '.join(plugin.annotation_keys)})"
        for key in keys
        if key not in plugin.annotation_keys
    ]


def _audience_lints(
    provider: CredentialProvider, plugin: CloudPlugin, env_names: set[str]
) -> list[str]:
    """A token the kubelet would not send: to a plugin that answers only with it, or for a mode
    the env turns on (plugin.token_audiences): no tokenAttributes (no token at all), or another
    audience (the service refuses it)."""
    attributes = provider.tokenAttributes
    found = []
    if attributes is None and plugin.needs_token:
        found.append(
            f"{plugin.name} answers only with the pod's service account token: without "
            "tokenAttributes the kubelet sends none and every pull through it fails; set "
            "serviceAccountTokenAudience (the audience its backend trusts), cacheType: Token "
            "and requireServiceAccount: true"
        )
    for env, (audience, mode) in plugin.token_audiences.items():
        if env not in env_names:
            continue
        if attributes is None:
            found.append(
                f"env {env} turns on {mode}, but without tokenAttributes the kubelet sends no "
                f"service account token and every pull uses the node's own credentials: set "
                f"tokenAttributes.serviceAccountTokenAudience: {audience}"
            )
        elif attributes.serviceAccountTokenAudience != audience:
            found.append(
                f"env {env} turns on {mode}, which refuses a token of audience "
                f"{quoted(attributes.serviceAccountTokenAudience)}: set "
                f"tokenAttributes.serviceAccountTokenAudience: {audience}"
            )
    return found


def _placeholders(value: str) -> list[str]:
    """ALL-CAPS words standing for a value to fill in (``PROJECT``, ``ACCOUNT_ID``,
    ``API-SERVER-IP`` where an underscore is no valid host name), as the examples and the clouds'
    docs write them."""
    words = value.replace("/", " ").replace("=", " ").replace(".", " ").replace(":", " ").split()
    return [
        w
        for w in words
        if len(w) >= 3 and w.isupper() and w.replace("_", "").replace("-", "").isalpha()
    ]


def _placeholder_lints(provider: CredentialProvider) -> list[str]:
    """Placeholders left from an example in args, env values or the token audience."""
    values = [*(provider.args or []), *(var.value or "" for var in provider.env or [])]
    if provider.tokenAttributes is not None:
        values.append(provider.tokenAttributes.serviceAccountTokenAudience or "")
    left = list(dict.fromkeys(word for value in values for word in _placeholders(value)))
    if not left:
        return []
    what = "looks like a placeholder" if len(left) == 1 else "look like placeholders"
    return [f"{', '.join(left)} {what} left from an example: put your own values there"]


def _near_name_lints(name: str) -> list[str]:
    """A provider name one edit away from one of our plugins: the kubelet execs it by that name."""
    near = [known for known in BY_NAME if one_slip(name, known)]
    if not near:
        return []
    return [
        f"the name is one slip from {quoted(near[0])}: the kubelet runs the file named "
        f"{quoted(name)} in the bin dir, so did you mean {quoted(near[0])}?"
    ]

"""What ``credprovider install`` writes: the kubelet config for the chosen plugins, the flags, and
where the bundle is (the plan and its application are credprovider/tool/change/install.py; ``migrate`` is
credprovider/tool/change/migrate.py)."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from credprovider.cloud import CloudPlugin
from credprovider.paths import PACKAGE_BIN_DIR, PACKAGE_LIB_DIR
from credprovider.runtime.api import API_V1
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.kubeconfig.model import CONFIG_KIND

BUNDLE_COPY_DIR: Final = ".credprovider"
# The first words of every config install and migrate write: what they may replace without --force.
WRITTEN_BY: Final = "# Written by credprovider "
CCM_REMINDER: Final = (
    "The credential plugin only replaces image-pull login. Node initialization, routes, load "
    "balancers and volumes need the cloud controller manager (and CSI drivers): run them, with "
    "--cloud-provider=external on the kubelet."
)


def kubelet_flags(config_path: str, bin_dir: str) -> list[str]:
    return [
        f"--image-credential-provider-config={config_path}",
        f"--image-credential-provider-bin-dir={bin_dir}",
    ]


def provider_entry(
    plugin: CloudPlugin, node_file: str | None = None, name: str | None = None
) -> dict[str, Any]:
    """One CredentialProviderConfig provider with complete matchImages for ``plugin``; ``node_file``
    replaces the node file its first argument names (azure.json), if it takes one; ``name``: the
    provider's name when it is not the plugin's own (a second provider of it: install --as)."""
    args = list(plugin.args)
    if plugin.node_file_arg is not None and node_file:
        args[0] = node_file
    entry: dict[str, Any] = {
        "name": name or plugin.name,
        "apiVersion": API_V1,
        "defaultCacheDuration": plugin.default_cache_duration,
        "matchImages": list(plugin.match_images),
    }
    if args:
        entry["args"] = args
    return entry


# Settings fields that shape the agent's run, never a provider entry (change/settings.py).
NOT_IN_CONFIG: Final = ("dryRunImage",)


def applied(entry: dict[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """A provider entry with ``settings`` replacing its defaults (env as the kubelet's list)."""
    changed = dict(entry)
    for field, value in settings.items():
        if field in NOT_IN_CONFIG:
            continue
        if field == "env":
            changed["env"] = [{"name": name, "value": text} for name, text in value.items()]
        else:
            changed[field] = value
    return changed


def render_config(
    keys: list[str],
    node_files: Mapping[str, str] | None = None,
    writer: str = "install",
    first: Sequence[Mapping[str, Any]] = (),
    names: Mapping[str, str] | None = None,
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    as_json: bool = False,
) -> str:
    """The CredentialProviderConfig YAML for the chosen plugins (keys of ``catalog.PLUGINS``),
    headed by the command that wrote it. ``node_files`` maps a plugin's key to the node file it is
    given instead of its default (each plugin its own: azure.json is not another cloud's file).
    ``first``: providers kept from a config the node already has, put before ours as they are.
    ``names``: a plugin's provider name where it is not the plugin's own (install --as).
    ``settings``: per key, fields replacing the defaults (the agent's --provider-settings).
    ``as_json``: JSON (no header: JSON has no comments), for a node whose config is JSON (EKS's
    nodeadm writes one): a merge keeps the file's format."""
    node_files, names, settings = node_files or {}, names or {}, settings or {}
    document = {
        "apiVersion": "kubelet.config.k8s.io/v1",
        "kind": CONFIG_KIND,
        "providers": [dict(provider) for provider in first]
        + [
            applied(
                provider_entry(PLUGINS[key], node_files.get(key), names.get(key)),
                settings.get(key, {}),
            )
            for key in keys
        ],
    }
    if as_json:
        return json.dumps(document, indent=2) + "\n"
    header = f"{WRITTEN_BY}{writer}. Validate with: credprovider validate <this file>\n"
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def written_as_json(data: bytes | str | None) -> bool:
    """Is this config file JSON (one object), rather than YAML?"""
    if data is None:
        return False
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if not text.lstrip().startswith("{"):
        return False
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):  # its callers have parsed it as the kubelet does first
        return False


def bundle_launcher(interpreter: Path) -> Path | None:
    """The bundle's top-level ``credprovider`` (the launcher every name must link to), when
    ``interpreter`` is a bundle's own (``_internal/credprovider-main``); otherwise ``None``."""
    launcher = interpreter.parent.parent / "credprovider"
    if interpreter.name == "credprovider-main" and interpreter.parent.name == "_internal":
        return launcher if launcher.is_file() else None
    return None


def bundle_executable(target: str | None) -> Path:
    """The credprovider executable the plugin names will link to: ``--target``, else this bundle's
    launcher (not checked yet: :func:`credprovider.tool.change.install.plan_install` runs it)."""
    if target:
        return stable_launcher(Path(target).resolve())
    launcher = bundle_launcher(Path(sys.executable).resolve())
    if launcher is None:
        raise NodeChangeError(
            "run install from the bundle (dist/credprovider/credprovider install ...) "
            "or pass --target /path/to/credprovider"
        )
    return stable_launcher(launcher)


def stable_launcher(
    launcher: Path, lib_dir: str = PACKAGE_LIB_DIR, bin_dir: str = PACKAGE_BIN_DIR
) -> Path:
    """A distribution package's launcher lies in a versioned directory the next upgrade removes
    (``/usr/lib/credprovider/<version>/``): links go through the package's bin dir instead, which
    every upgrade re-points. Any other launcher is linked as it is."""
    stable = Path(bin_dir) / launcher.name
    if launcher.parent.parent == Path(lib_dir) and stable.resolve() == launcher:
        return stable
    return launcher

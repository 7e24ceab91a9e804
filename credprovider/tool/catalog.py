"""The clouds the ``credprovider`` tool knows, read from each cloud's descriptor. Pure: no SDK is
imported."""

from __future__ import annotations

import importlib
from typing import Final

from credprovider.cloud import CloudPlugin
from credprovider.entry import PLUGIN_PACKAGES, plugin_of, without_exe


def _descriptor(package: str) -> CloudPlugin:
    descriptor: CloudPlugin = importlib.import_module(f"{package}.descriptor").DESCRIPTOR
    return descriptor


# key (aws, azure, gcp) -> descriptor, in the order of entry.PLUGIN_PACKAGES
PLUGINS: Final = {
    plugin.key: plugin for plugin in (_descriptor(p) for p in PLUGIN_PACKAGES.values())
}
BY_NAME: Final = {plugin.name: plugin for plugin in PLUGINS.values()}
# What install and the agent set up when --providers is not given: every plugin but an opt-in one
# (whose backend and registries only the operator can name).
# Env names whose value is a secret, whichever plugin's (each descriptor's ``secret_env``).
SECRET_ENV: Final = frozenset(name for plugin in PLUGINS.values() for name in plugin.secret_env)
DEFAULT_KEYS: Final = tuple(key for key, plugin in PLUGINS.items() if not plugin.opt_in)


def plugin_for_name(provider_name: str) -> CloudPlugin | None:
    """Our plugin behind a config's provider name (``.exe`` tolerated), if any: its own name, or
    the plugin it suffixes (``<plugin name>-<suffix>``, entry.plugin_of)."""
    return BY_NAME.get(plugin_of(without_exe(provider_name)) or "")


def not_known(keys: list[str]) -> str:
    """Why ``keys`` (``--providers``) are not a list of this catalog's providers ("": they are)."""
    unknown = [key for key in keys if key not in PLUGINS]
    if keys and not unknown:
        return ""
    named = [f"{key} is the plugin of {BY_NAME[key].key}" for key in unknown if key in BY_NAME]
    return f"--providers takes a comma list of {', '.join(PLUGINS)}" + (
        f" (not {', '.join(unknown)}{': ' + '; '.join(named) if named else ''})" if unknown else ""
    )


def provider_keys(text: str) -> list[str]:
    """``--providers`` as the catalog's keys, each once, in any case (unchecked:
    :func:`not_known`)."""
    return list(dict.fromkeys(key.strip().lower() for key in text.split(",") if key.strip()))

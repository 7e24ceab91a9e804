"""What an operator changes in the providers install and the agent write (``--provider-settings``,
the chart's ``providerSettings``): per provider key (aws, azure, gcp, registries), its ``matchImages``,
``args``, ``env`` (a name-to-value mapping), ``defaultCacheDuration`` and ``tokenAttributes``,
each replacing the shipped default; and ``dryRunImage``, the image the agent's dry run asks
credentials for (needed where the plugin trades its token at the registry itself: ACR). Parsed here (shape and types, one line naming what is wrong);
whether the kubelet accepts the result is the config validation's to say, before anything changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from credprovider.errors import CredproviderError
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.kubeconfig.envnames import near_miss
from credprovider.tool.kubeconfig.lint import arg_problem, env_problem
from credprovider.tool.node.structured import JsonTooDeep, bounded_json

Settings = Mapping[str, Mapping[str, Any]]
# The setting, and the JSON type it takes.
FIELDS: Final = {
    "matchImages": "a list of strings",
    "args": "a list of strings",
    "env": "a mapping of names to strings",
    "defaultCacheDuration": "a string",
    "tokenAttributes": "a mapping",
    # not written into the config: the image the agent's dry run asks credentials for
    "dryRunImage": "a string",
}
MAX_CHARS: Final = 64 << 10


class SettingsError(CredproviderError):
    """--provider-settings is not what install and the agent take."""


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _right_type(field: str, value: Any) -> bool:
    if field in ("matchImages", "args"):
        return _strings(value)
    if field == "env":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    if field in ("defaultCacheDuration", "dryRunImage"):
        return isinstance(value, str)
    return isinstance(value, dict)


def _unusable(key: str, field: str, value: Any) -> str:
    """Why an ``env`` or ``args`` setting could never reach the plugin as given ("": it could):
    the kubelet passes both unchecked (tool/kubeconfig/lint.py); an env name one slip from a
    name the plugin reads, which no plugin reads, would do nothing (tool/kubeconfig/envnames.py)."""
    if field == "env":
        found = [
            env_problem(name, text) or near_miss(name, PLUGINS[key]) for name, text in value.items()
        ]
    elif field == "args":
        found = [arg_problem(arg) for arg in value]
    else:
        return ""
    return next(filter(None, found), "")


# What an opt-in plugin (catalog: its registries and backend are the operator's) must be given.
OPT_IN_FIELDS: Final = ("matchImages", "args")


def parse(text: str, keys: list[str]) -> dict[str, dict[str, Any]]:
    """``text`` (JSON) as settings for the providers ``keys``; :class:`SettingsError` if not,
    or if an opt-in plugin among ``keys`` is not given what only the operator can name."""
    found = _parsed(text, keys)
    _check_opt_in(found, keys)
    return found


def _check_opt_in(found: Settings, keys: list[str]) -> None:
    for key in keys:
        plugin = PLUGINS[key]
        if not plugin.opt_in:
            continue
        wanted = [*OPT_IN_FIELDS, *(("tokenAttributes",) if plugin.needs_token else ())]
        missing = [field for field in wanted if not found.get(key, {}).get(field)]
        if missing:
            raise SettingsError(
                f"{key} ({plugin.name}) ships no {', '.join(missing)}: give them in "
                f"--provider-settings (the chart's providerSettings.{key}): its registries and "
                "backend are yours to name (docs/registries.md)"
            )


def _parsed(text: str, keys: list[str]) -> dict[str, dict[str, Any]]:
    if not text:
        return {}
    if len(text) > MAX_CHARS:
        raise SettingsError(f"--provider-settings is longer than {MAX_CHARS} characters")
    try:
        found = bounded_json(text)
    except JsonTooDeep as exc:
        raise SettingsError(f"--provider-settings {exc}") from None
    except ValueError as exc:
        raise SettingsError(f"--provider-settings is not JSON: {exc}") from None
    if not isinstance(found, dict):
        raise SettingsError("--provider-settings is a JSON object keyed by provider (aws, ...)")
    for key, settings in found.items():
        if key not in keys:
            raise SettingsError(
                f"--provider-settings names {key!r}, which is not in --providers ({', '.join(keys)})"
            )
        if not isinstance(settings, dict):
            raise SettingsError(f"--provider-settings: {key} is a JSON object")
        for field, value in settings.items():
            if field not in FIELDS:
                raise SettingsError(
                    f"--provider-settings: {key}.{field} is not one of {', '.join(FIELDS)}"
                )
            if not _right_type(field, value):
                raise SettingsError(f"--provider-settings: {key}.{field} is {FIELDS[field]}")
            problem = _unusable(key, field, value)
            if problem:
                raise SettingsError(f"--provider-settings: {key}.{problem}")
    return found


def dry_run_images(settings: Settings, names: Mapping[str, str]) -> dict[str, str]:
    """Provider name -> the image its dry run asks for, where the settings name one (``names``:
    key -> provider name)."""
    return {
        names[key]: str(fields["dryRunImage"])
        for key, fields in settings.items()
        if "dryRunImage" in fields and key in names
    }

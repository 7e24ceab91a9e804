"""CredentialProviderConfig: pydantic models, and reading and decoding a config file or directory as
the kubelet does (``readCredentialProviderConfig``), with the kubelet's own error messages.

Validation is in credprovider/tool/kubeconfig/validate.py (:func:`~credprovider.tool.kubeconfig.validate.load_config`
reads and validates, as the kubelet's start-up does), the lints in credprovider/tool/kubeconfig/lint.py. Used by
the ``credprovider`` tool only (never on a plugin's exec path: pydantic and YAML are slow to import);
the conformance suite checks the messages against the real kubelet code.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, ValidationError

from credprovider.runtime.cjson import json_type
from credprovider.runtime.goformat import DurationError, go_quote, parse_go_duration
from credprovider.runtime.nodefile import reason
from credprovider.tool.kubeconfig.document import (  # ConfigError: the config's error, here too
    ConfigError as ConfigError,
)
from credprovider.tool.kubeconfig.document import (
    parse_document,
    paths_in_document_order,
    quoted_start,
)
from credprovider.tool.node import access
from credprovider.tool.node.access import check_access, cwd_gone, list_directory
from credprovider.tool.slips import meant

CONFIG_GROUP: Final = "kubelet.config.k8s.io"
CONFIG_VERSIONS: Final = ("v1", "v1beta1", "v1alpha1")
CONFIG_KIND: Final = "CredentialProviderConfig"
CONFIG_EXTENSIONS: Final = (".json", ".yaml", ".yml")
CACHE_TYPES: Final = ("ServiceAccount", "Token")
# Other kinds the kubelet's config scheme knows: decoding one of them is a "wrong Kind".
_OTHER_REGISTERED_KINDS: Final = frozenset(
    {
        ("kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"),
        ("kubelet.config.k8s.io/v1beta1", "SerializedNodeConfigSource"),
    }
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ExecEnvVar(_Strict):
    name: str | None = None
    value: str | None = None


class ServiceAccountTokenAttributes(_Strict):
    serviceAccountTokenAudience: str | None = None
    cacheType: str | None = None
    requireServiceAccount: bool | None = None
    requiredServiceAccountAnnotationKeys: list[str] | None = None
    optionalServiceAccountAnnotationKeys: list[str] | None = None


class CredentialProvider(_Strict):
    name: str | None = None
    matchImages: list[str] | None = None
    defaultCacheDuration: str | None = None
    apiVersion: str | None = None
    args: list[str] | None = None
    env: list[ExecEnvVar] | None = None
    tokenAttributes: ServiceAccountTokenAttributes | None = None

    def env_pairs(self) -> list[tuple[str, str]]:
        """Its ``env`` as the kubelet hands it to the plugin, ``NAME=VALUE`` by ``NAME=VALUE``, in
        order (a later one of a name wins)."""
        return [(var.name or "", var.value or "") for var in self.env or []]


class CredentialProviderConfig(_Strict):
    kind: str | None = None
    apiVersion: str | None = None
    providers: list[CredentialProvider] | None = None


@dataclass
class LoadedConfig:
    """A config as the kubelet would run it: providers in order, with their source files."""

    providers: list[CredentialProvider]
    sources: list[Path]
    provider_sources: list[Path] = field(default_factory=list)
    contents: list[bytes] = field(default_factory=list)  # each source's bytes, as decoded


# The model each field's value decodes as: its class is named as the kubelet's Go struct (for its
# "json: cannot unmarshal" messages, and for the fields a slipped name was meant to be).
_FIELD_MODELS: Final[dict[str, type[_Strict]]] = {
    "providers": CredentialProvider,
    "env": ExecEnvVar,
    "tokenAttributes": ServiceAccountTokenAttributes,
}
_GO_STRUCTS: Final = {name: model.__name__ for name, model in _FIELD_MODELS.items()}
# Go type names for the kubelet's "json: cannot unmarshal" messages.
_GO_TYPES: Final = {
    ("CredentialProviderConfig", "providers"): "[]{v}.CredentialProvider",
    ("CredentialProvider", "matchImages"): "[]string",
    ("CredentialProvider", "args"): "[]string",
    ("CredentialProvider", "env"): "[]{v}.ExecEnvVar",
    ("CredentialProvider", "tokenAttributes"): "{v}.ServiceAccountTokenAttributes",
    ("ServiceAccountTokenAttributes", "requireServiceAccount"): "bool",
    ("ServiceAccountTokenAttributes", "cacheType"): "{v}.ServiceAccountTokenCacheType",
    ("ServiceAccountTokenAttributes", "requiredServiceAccountAnnotationKeys"): "[]string",
    ("ServiceAccountTokenAttributes", "optionalServiceAccountAnnotationKeys"): "[]string",
}


def _unmarshal_message(loc: tuple[int | str, ...], value: Any, version: str) -> str:
    struct, names = "CredentialProviderConfig", list[str]()
    for part in loc:
        if isinstance(part, int):
            continue
        if names and names[-1] in _GO_STRUCTS:
            struct = _GO_STRUCTS[names[-1]]
        names.append(part)
    field_name = names[-1]
    if isinstance(loc[-1], int):  # an element of a list
        go_type = "string" if field_name != "env" else f"{version}.ExecEnvVar"
        if field_name == "providers":
            go_type = f"{version}.CredentialProvider"
        if field_name == "env":
            struct = "CredentialProvider"
    else:
        go_type = _GO_TYPES.get((struct, field_name), "string").format(v=version)
    if isinstance(loc[-1], int) and field_name == "providers":
        struct = "CredentialProviderConfig"
    return (
        f"json: cannot unmarshal {json_type(value)} into Go struct field "
        f"{struct}.{'.'.join(names)} of type {go_type}"
    )


def _meant(exc: ValidationError, order: dict[str, int]) -> str | None:
    """The field names an unknown field is a slip of (``matchImage``, ``match_images``), said
    after the kubelet's message, in the document's ``order``."""
    said: list[tuple[int, str]] = []
    for error in exc.errors():
        if error["type"] != "extra_forbidden":
            continue
        loc = tuple(error["loc"])
        names = [part for part in loc[:-1] if isinstance(part, str)]
        model = _FIELD_MODELS.get(names[-1], _Strict) if names else CredentialProviderConfig
        near = meant(str(loc[-1]), model.model_fields)
        if near is not None:
            path = _loc_path(loc)
            said.append((order.get(path, 0), f"{path}: did you mean {near}?"))
    return "; ".join(line for _, line in sorted(said)) or None


def _loc_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


# A file often given in the config's place by mistake, by its kind: what it is.
_MISTAKEN_KINDS: Final = {
    "KubeletConfiguration": "the kubelet's own --config",
    "Config": "a kubeconfig",
    "ExecCredential": "an exec credential plugin's answer",
    "CredentialProviderRequest": "a plugin's request",
    "CredentialProviderResponse": "a plugin's answer",
}


def _other_kind(kind: object) -> str | None:
    """For a file of another kind than the config's, what it is and what to give instead."""
    what = _MISTAKEN_KINDS.get(kind) if isinstance(kind, str) else None
    if what is None:
        return None
    return (
        f"this file is {what}, not a {CONFIG_KIND}: give the file the kubelet's "
        "--image-credential-provider-config names (with no PATH, validate finds it)"
    )


def _slipped_kind(kind: str, group: str, version: str) -> str | None:
    """The kind and apiVersion meant, where either is a slip of the config's; or, both right, the
    versions there are."""
    if kind == CONFIG_KIND and group == CONFIG_GROUP:
        return f"{CONFIG_GROUP}'s versions are {', '.join(CONFIG_VERSIONS)}"
    right_kind = kind == CONFIG_KIND or meant(kind, [CONFIG_KIND]) is not None
    right_group = group == CONFIG_GROUP or meant(group, [CONFIG_GROUP]) is not None
    if not (right_kind and right_group):
        return None
    return f"did you mean kind: {CONFIG_KIND}, apiVersion: {CONFIG_GROUP}/{version or 'v1'}?"


def decode_config(text: str) -> CredentialProviderConfig:
    """Decode one file strictly, as the kubelet's codec does; errors carry its messages."""
    document = parse_document(text)
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(
            f"couldn't get version/kind; json parse error: cannot unmarshal "
            f"{json_type(document)} into Go value of type struct"
        )
    kind, api_version = document.get("kind"), document.get("apiVersion")
    for field_name, value in (("apiVersion", api_version), ("kind", kind)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(
                "couldn't get version/kind; json parse error: json: cannot unmarshal "
                f"{json_type(value)} into Go struct field .{field_name} of type string"
            )
    if not kind:
        raise ConfigError(f"Object 'Kind' is missing in '{quoted_start(text)}'")
    if not api_version:
        raise ConfigError(f"Object 'apiVersion' is missing in '{quoted_start(text)}'")
    group, _, version = str(api_version).rpartition("/")
    if (api_version, kind) in _OTHER_REGISTERED_KINDS:
        raise ConfigError(f'failed to decode "{kind}" (wrong Kind)', _other_kind(kind))
    if kind != CONFIG_KIND or group != CONFIG_GROUP or version not in CONFIG_VERSIONS:
        raise ConfigError(
            f'no kind "{kind}" is registered for version "{api_version}" in scheme '
            '"pkg/runtime/scheme.go:111"',
            _other_kind(kind) or _slipped_kind(str(kind), group, version),
        )
    try:
        config = CredentialProviderConfig.model_validate(document)
    except ValidationError as exc:
        unknown, first_type_error = [], None
        for error in exc.errors():
            loc = tuple(error["loc"])
            if error["type"] == "extra_forbidden":
                unknown.append(f"unknown field {go_quote(_loc_path(loc))}")
            elif first_type_error is None:
                first_type_error = _unmarshal_message(loc, error["input"], version)
        if first_type_error is not None:
            raise ConfigError(first_type_error) from None
        order = {path: i for i, (path, _) in enumerate(paths_in_document_order(document))}
        unknown.sort(key=lambda message: order.get(message.split('"')[1], 0))
        raise ConfigError(
            "strict decoding error: " + ", ".join(unknown), _meant(exc, order)
        ) from None
    for provider in config.providers or []:
        if version != "v1" and provider.tokenAttributes is not None:
            index = (config.providers or []).index(provider)
            raise ConfigError(
                f'strict decoding error: unknown field "providers[{index}].tokenAttributes"',
                hint="tokenAttributes exists only in apiVersion kubelet.config.k8s.io/v1: use it",
            )
        if provider.defaultCacheDuration is not None:
            try:
                parse_go_duration(provider.defaultCacheDuration)
            except DurationError as exc:
                raise ConfigError(str(exc)) from None
    return config


def config_files(path: str) -> list[Path]:
    """The files the kubelet reads for ``--image-credential-provider-config`` (file or directory).

    A refusal only this (non-root) user gets raises :class:`~credprovider.tool.node.access.UnreadableError`,
    never a :class:`ConfigError`: the kubelet runs as root."""
    if not path:
        raise ConfigError("credential provider config path is empty")
    try:
        info = os.stat(path)
    except OSError as exc:
        check_access(path, exc)
        raise ConfigError(
            f"unable to access path {go_quote(path)}: stat {path}: {reason(exc)}{_gone(path)}"
        ) from None
    except ValueError:
        raise ConfigError(f"unable to access path {go_quote(path)}: invalid argument") from None
    if not stat.S_ISDIR(info.st_mode):
        return [Path(path)]
    files = _in_directory(path)
    if not files:
        raise ConfigError(f"no configuration files found in directory {go_quote(path)}")
    return files


def _in_directory(path: str) -> list[Path]:
    """The config files the kubelet reads in the directory ``path``, in its order."""
    names = sorted(
        entry.name
        for entry in list_directory(path)
        if not _is_dir(entry) and entry.name.endswith(CONFIG_EXTENSIONS)
    )
    return [Path(path) / name for name in names]


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def read_config(path: str, text: str | None = None, at: str | None = None) -> LoadedConfig:
    """``readCredentialProviderConfig``: decode every file, concatenate providers in file order.
    ``text``: the one file ``path`` as it is to be written (validated as text, never read); with
    ``at``, the file ``at`` in the directory ``path`` as it is to be written, beside the others."""
    written = Path(at if at is not None else path) if text is not None else None
    if at is not None and text is not None:
        files = sorted({*_in_directory(path), Path(at)}, key=lambda file: file.name)
    else:
        files = config_files(path) if text is None else [Path(path)]
    providers: list[CredentialProvider] = []
    provider_sources: list[Path] = []
    seen: set[str] = set()
    contents: list[bytes] = []
    for file in files:
        try:
            contents.append(
                text.encode()
                if text is not None and file == written
                else access.read_bytes(str(file))
            )
            decoded = contents[-1].decode("utf-8")
        except access.FileProblem as exc:
            raise ConfigError(
                f"unable to read config file {go_quote(str(file))}: {exc.reason}"
            ) from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"error decoding config {go_quote(str(file))}: not UTF-8 text (byte {exc.start})"
            ) from None
        try:
            config = decode_config(decoded)
        except ConfigError as exc:
            raise ConfigError(
                f"error decoding config {go_quote(str(file))}: {exc}", exc.hint
            ) from None
        for provider in config.providers or []:
            name = provider.name or ""
            if name in seen:
                first = provider_sources[[p.name for p in providers].index(provider.name)]
                raise ConfigError(
                    f"duplicate provider name {go_quote(name)} found in configuration file(s)",
                    hint=f"in {first} and in {file}",
                )
            seen.add(name)
            providers.append(provider)
            provider_sources.append(file)
    return LoadedConfig(providers, files, provider_sources, contents)


def _gone(path: str) -> str:
    """Said after the kubelet's message for a relative ``path`` read from a directory that no
    longer exists (removed since the shell entered it)."""
    if os.path.isabs(path) or not cwd_gone():
        return ""
    return " (the current directory no longer exists: cd to one that exists)"

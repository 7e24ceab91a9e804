"""CredentialProviderConfig: pydantic models, kubelet-identical reading and validation, and lints.

Used by the ``credprovider`` tool only (never on a plugin's exec path: pydantic and YAML are slow to
import). :func:`load_config` reproduces the kubelet's start-up (``readCredentialProviderConfig`` and
``validateCredentialProviderConfig`` in ``pkg/credentialprovider/plugin``) with the kubelet's own
error messages; the conformance suite checks them against the real kubelet code.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, ValidationError

from credprovider.api import API_V1, API_VERSIONS, DurationError, go_quote, parse_go_duration
from credprovider.errors import CredproviderError
from credprovider.matching import GoURLError, parse_go_url
from credprovider.yamldoc import MAX_NESTING, YamlError, load_yaml

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


class ConfigError(CredproviderError, ValueError):
    """The kubelet would refuse this config at start-up; the message is the kubelet's."""


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


# Go struct and type names for the kubelet's "json: cannot unmarshal" messages.
_GO_STRUCTS: Final = {
    "providers": "CredentialProvider",
    "env": "ExecEnvVar",
    "tokenAttributes": "ServiceAccountTokenAttributes",
}
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


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


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
        f"json: cannot unmarshal {_json_type(value)} into Go struct field "
        f"{struct}.{'.'.join(names)} of type {go_type}"
    )


def _loc_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


class _JSONObject(dict[str, Any]):
    """A decoded JSON object that remembers keys it saw twice."""

    duplicates: list[str]


def _json_object(pairs: list[tuple[str, Any]]) -> _JSONObject:
    obj = _JSONObject()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _paths_in_document_order(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every (path, node) of a decoded document, in document order, kubelet-style paths."""
    found: list[tuple[str, Any]] = [(path, value)]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_paths_in_document_order(child, f"{path}.{key}" if path else key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_paths_in_document_order(child, f"{path}[{index}]"))
    return found


def _parse_document(text: str) -> Any:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            document = json.loads(text, object_pairs_hook=_json_object)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
        except RecursionError:
            raise ConfigError(f"exceeded max depth of {MAX_NESTING}") from None
        except ValueError as exc:  # an integer of more than 4300 digits
            raise ConfigError(str(exc).split(";")[0]) from None
        for path, node in _paths_in_document_order(document):
            if isinstance(node, _JSONObject) and node.duplicates:
                key = node.duplicates[0]
                raise ConfigError(
                    f"strict decoding error: duplicate field {go_quote(f'{path}.{key}' if path else key)}"
                )
        return document
    try:
        return load_yaml(text)
    except YamlError as exc:
        raise ConfigError(str(exc)) from None


def decode_config(text: str) -> CredentialProviderConfig:
    """Decode one file strictly, as the kubelet's codec does; errors carry its messages."""
    document = _parse_document(text)
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(
            f"couldn't get version/kind; json parse error: cannot unmarshal "
            f"{_json_type(document)} into Go value of type struct"
        )
    kind, api_version = document.get("kind"), document.get("apiVersion")
    for field_name, value in (("apiVersion", api_version), ("kind", kind)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(
                "couldn't get version/kind; json parse error: json: cannot unmarshal "
                f"{_json_type(value)} into Go struct field .{field_name} of type string"
            )
    if not kind:
        raise ConfigError(f"Object 'Kind' is missing in '{text}'")
    if not api_version:
        raise ConfigError(f"Object 'apiVersion' is missing in '{text}'")
    group, _, version = str(api_version).rpartition("/")
    if (api_version, kind) in _OTHER_REGISTERED_KINDS:
        raise ConfigError(f'failed to decode "{kind}" (wrong Kind)')
    if kind != CONFIG_KIND or group != CONFIG_GROUP or version not in CONFIG_VERSIONS:
        raise ConfigError(
            f'no kind "{kind}" is registered for version "{api_version}" in scheme '
            '"pkg/runtime/scheme.go:111"'
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
        order = {path: i for i, (path, _) in enumerate(_paths_in_document_order(document))}
        unknown.sort(key=lambda message: order.get(message.split('"')[1], 0))
        raise ConfigError("strict decoding error: " + ", ".join(unknown)) from None
    for provider in config.providers or []:
        if version != "v1" and provider.tokenAttributes is not None:
            index = (config.providers or []).index(provider)
            raise ConfigError(
                f'strict decoding error: unknown field "providers[{index}].tokenAttributes"'
            )
        if provider.defaultCacheDuration is not None:
            try:
                parse_go_duration(provider.defaultCacheDuration)
            except DurationError as exc:
                raise ConfigError(str(exc)) from None
    return config


def config_files(path: str) -> list[Path]:
    """The files the kubelet reads for ``--image-credential-provider-config`` (file or directory)."""
    if not path:
        raise ConfigError("credential provider config path is empty")
    try:
        info = os.stat(path)
    except OSError as exc:
        raise ConfigError(
            f"unable to access path {go_quote(path)}: stat {path}: {_go_errno(exc)}"
        ) from None
    if not os.path.isdir(path) or not info:
        return [Path(path)]
    files = sorted(
        entry.name
        for entry in os.scandir(path)
        if not entry.is_dir() and entry.name.endswith(CONFIG_EXTENSIONS)
    )
    if not files:
        raise ConfigError(f"no configuration files found in directory {go_quote(path)}")
    return [Path(path) / name for name in files]


def _go_errno(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()


def read_config(path: str) -> LoadedConfig:
    """``readCredentialProviderConfig``: decode every file, concatenate providers in file order."""
    files = config_files(path)
    providers: list[CredentialProvider] = []
    provider_sources: list[Path] = []
    seen: set[str] = set()
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"unable to read config file {go_quote(str(file))}: {_go_errno(exc)}"
            ) from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"error decoding config {go_quote(str(file))}: not UTF-8 text (byte {exc.start})"
            ) from None
        try:
            config = decode_config(text)
        except ConfigError as exc:
            raise ConfigError(f"error decoding config {go_quote(str(file))}: {exc}") from None
        for provider in config.providers or []:
            name = provider.name or ""
            if name in seen:
                raise ConfigError(
                    f"duplicate provider name {go_quote(name)} found in configuration file(s)"
                )
            seen.add(name)
            providers.append(provider)
            provider_sources.append(file)
    return LoadedConfig(providers, files, provider_sources)


# --- validation (validateCredentialProviderConfig) ---------------------------------------------------

_QUALIFIED_NAME_RE: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_QUALIFIED_NAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_MSG: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_DNS1123_RE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_FMT: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_MSG: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character"
)


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    text = message + " (e.g. "
    for i, example in enumerate(examples):
        if i > 0:
            text += " or "
        text += f"'{example}', "
    return text + f"regex used for validation is '{fmt}')"


def qualified_name_errors(value: str) -> list[str]:
    """Kubernetes' ``validation.IsQualifiedName`` messages."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253:
            errors.append("prefix part must be no more than 253 bytes")
        elif not _DNS1123_RE.fullmatch(prefix):
            errors.append("prefix part " + _regex_error(_DNS1123_MSG, _DNS1123_FMT, "example.com"))
    else:
        return [
            "a valid label key "
            + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        errors.append("name part must be no more than 63 bytes")
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errors.append(
            "name part "
            + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def _supported(values: tuple[str, ...]) -> str:
    return ", ".join(go_quote(v) for v in sorted(values))


def validate_providers(
    providers: list[CredentialProvider], sa_tokens_enabled: bool = True
) -> list[str]:
    """``validateCredentialProviderConfig``: the field errors, in the kubelet's order and words."""
    errors: list[str] = []
    if not providers:
        return ["providers: Required value: at least 1 item in plugins is required"]
    seen: set[str] = set()
    for provider in providers:
        name = provider.name or ""
        if "/" in name:
            errors.append(
                f"providers.name: Invalid value: {go_quote(name)}: provider name cannot contain '/'"
            )
        if " " in name:
            errors.append(
                f"providers.name: Invalid value: {go_quote(name)}: provider name cannot contain spaces"
            )
        if name == ".":
            errors.append(
                f"providers.name: Invalid value: {go_quote(name)}: provider name cannot be '.'"
            )
        if name == "..":
            errors.append(
                f"providers.name: Invalid value: {go_quote(name)}: provider name cannot be '..'"
            )
        if name in seen:
            errors.append(f"providers.name: Duplicate value: {go_quote(name)}")
        seen.add(name)
        api_version = provider.apiVersion or ""
        if not api_version:
            errors.append("providers.apiVersion: Required value")
        elif api_version not in API_VERSIONS:
            errors.append(
                f"providers.apiVersion: Unsupported value: {go_quote(api_version)}: "
                f"supported values: {_supported(API_VERSIONS)}"
            )
        match_images = provider.matchImages or []
        if not match_images:
            errors.append(
                "providers.matchImages: Required value: at least 1 item in matchImages is required"
            )
        for pattern in match_images:
            try:
                parse_go_url("https://" + pattern)
            except GoURLError as exc:
                errors.append(
                    f"providers.matchImages: Invalid value: {go_quote(pattern)}: "
                    f"match image is invalid: {exc}"
                )
        if provider.defaultCacheDuration is None:
            errors.append("providers.defaultCacheDuration: Required value")
        else:
            duration = parse_go_duration(provider.defaultCacheDuration)
            if duration < 0:
                from credprovider.api import format_go_duration

                errors.append(
                    f"providers.defaultCacheDuration: Invalid value: "
                    f"{go_quote(format_go_duration(duration))}: must be greater than or equal to 0"
                )
        if provider.tokenAttributes is not None:
            errors.extend(_validate_token_attributes(provider, sa_tokens_enabled))
    return errors


def _validate_token_attributes(provider: CredentialProvider, sa_tokens_enabled: bool) -> list[str]:
    attributes = provider.tokenAttributes
    assert attributes is not None
    path = "providers.tokenAttributes"
    if not sa_tokens_enabled:
        return [
            f"{path}: Forbidden: tokenAttributes is not supported when "
            "KubeletServiceAccountTokenForCredentialProviders feature gate is disabled"
        ]
    errors: list[str] = []
    if not attributes.serviceAccountTokenAudience:
        errors.append(f"{path}.serviceAccountTokenAudience: Required value")
    if attributes.requireServiceAccount is None:
        errors.append(f"{path}.requireServiceAccount: Required value")
    if provider.apiVersion != API_V1:
        errors.append(
            f"{path}: Forbidden: tokenAttributes is only supported for {API_V1} API version"
        )
    required = attributes.requiredServiceAccountAnnotationKeys or []
    optional = attributes.optionalServiceAccountAnnotationKeys or []
    if attributes.requireServiceAccount is False and required:
        errors.append(
            f"{path}.requiredServiceAccountAnnotationKeys: Forbidden: requireServiceAccount "
            "cannot be false when requiredServiceAccountAnnotationKeys is set"
        )
    for list_name, keys in (
        ("requiredServiceAccountAnnotationKeys", required),
        ("optionalServiceAccountAnnotationKeys", optional),
    ):
        seen: set[str] = set()
        for key in keys:
            if key in seen:
                errors.append(f"{path}.{list_name}: Duplicate value: {go_quote(key)}")
            seen.add(key)
            for message in qualified_name_errors(key.lower()):
                errors.append(f"{path}.{list_name}: Invalid value: {go_quote(key)}: {message}")
    both = sorted(set(required) & set(optional))
    if both:
        errors.append(
            f"{path}: Invalid value: {json.dumps(both, separators=(',', ':'))}: "
            "annotation keys cannot be both required and optional"
        )
    if not attributes.cacheType:
        errors.append(
            f"{path}.cacheType: Required value: cacheType is required to be set when "
            f"tokenAttributes is specified. Supported values are: {', '.join(CACHE_TYPES)}"
        )
    elif attributes.cacheType not in CACHE_TYPES:
        errors.append(
            f"{path}.cacheType: Unsupported value: {go_quote(attributes.cacheType)}: "
            f"supported values: {_supported(CACHE_TYPES)}"
        )
    return errors


def load_config(path: str, sa_tokens_enabled: bool = True) -> LoadedConfig:
    """Read and validate like the kubelet at start-up; raise :class:`ConfigError` with its text."""
    loaded = read_config(path)
    errors = validate_providers(loaded.providers, sa_tokens_enabled)
    if errors:
        detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise ConfigError(f"failed to validate credential provider config: {detail}")
    return loaded


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
    """Warnings the kubelet does not give, one sentence each, naming the provider."""
    from credprovider.catalog import plugin_for_name
    from credprovider.descriptor import DEFAULT_HTTPS_PORT
    from credprovider.matching import urls_match

    warnings: list[str] = []
    for provider in loaded.providers:
        name = provider.name or ""
        where = f"provider {name!r}"
        for pattern in provider.matchImages or []:
            path = pattern.split("/", 1)[1] if "/" in pattern else ""
            if "*" in path:
                warnings.append(
                    f"{where}: matchImages {pattern!r} has '*' in its path, which the "
                    "kubelet compares literally: it never matches an image"
                )
            if "?" in pattern or pattern.startswith("["):
                warnings.append(
                    f"{where}: matchImages {pattern!r} uses '?' or a leading '[', which "
                    "the kubelet parses as a URL query or IPv6 address: it never matches"
                )
        if (
            provider.defaultCacheDuration is not None
            and parse_go_duration(provider.defaultCacheDuration) == 0
        ):
            warnings.append(
                f"{where}: defaultCacheDuration is 0, so the kubelet runs the plugin on "
                "every pull whenever the plugin leaves cacheDuration out"
            )
        plugin = plugin_for_name(name)
        if plugin is None:
            continue
        missed = [
            form
            for form, image in plugin.sample_images.items()
            if not any(urls_match(pattern, image) for pattern in provider.matchImages or [])
        ]
        port = f":{DEFAULT_HTTPS_PORT}"
        hosts = [form for form in missed if not form.endswith(f"({port})")]
        if hosts:
            warnings.append(
                f"{where}: matchImages do not cover {', '.join(hosts)} registries "
                f"(e.g. {plugin.sample_images[hosts[0]]}): pulls from them get no credentials"
            )
        ported = [form for form in missed if form.endswith(f"({port})")]
        if ported:
            warnings.append(
                f"{where}: matchImages do not cover images that name the port {port} (e.g. "
                f"{plugin.sample_images[ported[0]]}): the kubelet matches ports exactly, so add "
                f"each host pattern with {port} too (as the shipped configs do)"
            )
        env_names = {var.name or "" for var in provider.env or []}
        for warning in plugin.lints(provider.matchImages or [], provider.args or [], env_names):
            warnings.append(f"{where}: {warning}")
        if bin_dir is not None:  # checking a node: files the args name must be on it
            for arg in provider.args or []:
                file_arg = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
                if file_arg.startswith("/") and not os.path.exists(file_arg):
                    warnings.append(
                        f"{where}: args name {file_arg}, which does not exist on this node: "
                        f"{plugin.name} fails every pull it matches until it does"
                    )
        attributes = provider.tokenAttributes
        if attributes is not None:
            keys = (attributes.requiredServiceAccountAnnotationKeys or []) + (
                attributes.optionalServiceAccountAnnotationKeys or []
            )
            for key in keys:
                if key not in plugin.annotation_keys:
                    warnings.append(
                        f"{where}: tokenAttributes annotation {key!r} is not read by "
                        f"{plugin.name} (it reads {', '.join(plugin.annotation_keys)})"
                    )
    return warnings

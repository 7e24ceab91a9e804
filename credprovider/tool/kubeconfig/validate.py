"""The kubelet's validation of a CredentialProviderConfig (``validateCredentialProviderConfig``), with
its messages, and :func:`load_config`: read and validate, as the kubelet's start-up does."""

from __future__ import annotations

import json
import re
from typing import Final

from credprovider.runtime.api import API_V1, API_VERSIONS
from credprovider.runtime.goformat import format_go_duration, go_quote, parse_go_duration
from credprovider.runtime.matching import GoURLError, parse_go_url
from credprovider.tool.kubeconfig.model import (
    CACHE_TYPES,
    ConfigError,
    CredentialProvider,
    LoadedConfig,
    read_config,
)

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
    if not providers:
        return ["providers: Required value: at least 1 item in plugins is required"]
    errors: list[str] = []
    seen: set[str] = set()
    for provider in providers:
        name = provider.name or ""
        errors += _name_errors(name, seen)
        seen.add(name)
        errors += _field_errors(provider)
        if provider.tokenAttributes is not None:
            errors.extend(_validate_token_attributes(provider, sa_tokens_enabled))
    return errors


def _name_errors(name: str, seen: set[str]) -> list[str]:
    quoted = go_quote(name)
    errors = [
        f"providers.name: Invalid value: {quoted}: {reason}"
        for reason, wrong in (
            ("provider name cannot contain '/'", "/" in name),
            ("provider name cannot contain spaces", " " in name),
            ("provider name cannot be '.'", name == "."),
            ("provider name cannot be '..'", name == ".."),
        )
        if wrong
    ]
    if name in seen:
        errors.append(f"providers.name: Duplicate value: {quoted}")
    return errors


def _field_errors(provider: CredentialProvider) -> list[str]:
    """apiVersion, matchImages and defaultCacheDuration."""
    errors = []
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
            errors.append(
                f"providers.defaultCacheDuration: Invalid value: "
                f"{go_quote(format_go_duration(duration))}: must be greater than or equal to 0"
            )
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


def load_config(
    path: str, sa_tokens_enabled: bool = True, text: str | None = None, at: str | None = None
) -> LoadedConfig:
    """Read and validate like the kubelet at start-up; raise :class:`ConfigError` with its text.
    ``text``: the file ``path`` as it is to be written (nothing is read); with ``at``, the file
    ``at`` in the config directory ``path``, as it is to be written, beside the others."""
    loaded = read_config(path, text, at)
    errors = validate_providers(loaded.providers, sa_tokens_enabled)
    if errors:
        detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise ConfigError(f"failed to validate credential provider config: {detail}")
    return loaded

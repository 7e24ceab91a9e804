"""The cloud config file (``azure.json``) the plugin's first argument names: pure parsing.

Keys match case-insensitively, as Go's encoding/json does for upstream. The file is JSON (parsed
with the stdlib); a YAML file is accepted too, and only then is PyYAML imported.
"""

from __future__ import annotations

import json

from credprovider.azure.registry import AzureConfigError, tenant_id_problem
from credprovider.runtime._typing import Any, Final, NamedTuple
from credprovider.runtime.excerpt import quoted

RESOURCE_ID_MARKER: Final = "/subscriptions/"


class AzureConfig(NamedTuple):
    cloud: str = ""
    tenantId: str = ""
    aadClientId: str = ""
    aadClientSecret: str = ""
    aadClientCertPath: str = ""
    aadClientCertPassword: str = ""
    useManagedIdentityExtension: bool = False
    userAssignedIdentityID: str = ""
    aadFederatedTokenFile: str = ""
    useFederatedWorkloadIdentityExtension: bool = False
    resourceManagerEndpoint: str = ""

    @property
    def user_assigned_is_resource_id(self) -> bool:
        """``userAssignedIdentityID`` is an ARM resource id (else a client id)."""
        return RESOURCE_ID_MARKER in self.userAssignedIdentityID.lower()


# lower-case key -> (field name, whether it is a boolean setting)
_FIELDS: Final = {
    name.lower(): (name, isinstance(default, bool))
    for name, default in AzureConfig._field_defaults.items()
}


def _load_document(text: str, source: str) -> Any:
    if not text.strip():
        return {}
    from credprovider.runtime.answer import BadAnswer, decode_json

    try:
        return decode_json(text)
    except BadAnswer as exc:
        raise AzureConfigError(f"{source} {exc.predicate}") from None
    except json.JSONDecodeError as json_error:
        import yaml  # only for YAML files: PyYAML stays off the usual exec path

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            raise AzureConfigError(
                f"{source} is neither JSON ({json_error.msg} at line {json_error.lineno}) nor YAML"
            ) from None


def near_misses(keys: list[str]) -> list[tuple[str, str]]:
    """(key, the setting it is probably a misspelling of) for each key the plugin does not read
    that is one or two edits (three for long names) from one it does. Other unknown keys are the
    settings of other components (azure.json is shared with cloud-provider-azure) and stay quiet."""
    found = []
    for key in keys:
        lowered = key.lower()
        if lowered in _FIELDS:
            continue
        for known, (name, _is_bool) in _FIELDS.items():
            allowed = 3 if len(known) >= 20 else 2
            if (
                abs(len(known) - len(lowered)) <= allowed
                and _edits(lowered, known, allowed) <= allowed
            ):
                found.append((key, name))
                break
    return found


def _edits(a: str, b: str, limit: int) -> int:
    """Levenshtein distance, stopping early once every path exceeds ``limit``."""
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other))
            )
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def parse_cloud_config(text: str, source: str) -> AzureConfig:
    """Parse azure.json text; raise :class:`AzureConfigError` naming ``source`` and the problem."""
    return parse_cloud_config_with_notes(text, source)[0]


def parse_cloud_config_with_notes(text: str, source: str) -> tuple[AzureConfig, list[str]]:
    """:func:`parse_cloud_config`, and one warning naming every probably misspelt key (or none)."""
    document = _load_document(text, source)
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise AzureConfigError(f"{source} must hold a JSON object of settings")
    values: dict[str, Any] = {}
    for key, value in document.items():
        spec = _FIELDS.get(str(key).lower())
        if spec is None:
            continue  # azure.json holds many settings for other components
        name, is_bool = spec
        if is_bool:
            if not isinstance(value, bool):
                raise AzureConfigError(
                    f"{source}: {name} must be true or false, got {quoted(value)}"
                )
        elif value is None:
            value = ""
        elif not isinstance(value, str):
            raise AzureConfigError(f"{source}: {name} must be a string, got {quoted(value)}")
        values[name] = value.strip() if isinstance(value, str) else value
    config = AzureConfig(**values)
    problem = config.tenantId and tenant_id_problem(config.tenantId)
    if problem:
        raise AzureConfigError(f"{source}: tenantId {problem}")
    misses = near_misses([str(key) for key in document])
    notes = (
        [
            f"{source}: ignoring "
            + "; ".join(
                f"unknown key {quoted(key)}: did you mean {name!r}?" for key, name in misses
            )
        ]
        if misses
        else []
    )
    return config, notes

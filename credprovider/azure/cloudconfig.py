"""The cloud config file (``azure.json``) the plugin's first argument names: pure parsing.

Keys match case-insensitively, as Go's encoding/json does for upstream. The file is JSON (parsed
with the stdlib); a YAML file is accepted too, and only then is PyYAML imported.
"""

from __future__ import annotations

import json

from credprovider._typing import Any, Final, NamedTuple
from credprovider.azure.registry import AzureConfigError, tenant_id_problem

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
    try:
        return json.loads(text)
    except json.JSONDecodeError as json_error:
        import yaml  # only for YAML files: PyYAML stays off the usual exec path

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            raise AzureConfigError(
                f"{source} is neither JSON ({json_error.msg} at line {json_error.lineno}) nor YAML"
            ) from None


def parse_cloud_config(text: str, source: str) -> AzureConfig:
    """Parse azure.json text; raise :class:`AzureConfigError` naming ``source`` and the problem."""
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
                raise AzureConfigError(f"{source}: {name} must be true or false, got {value!r}")
        elif value is None:
            value = ""
        elif not isinstance(value, str):
            raise AzureConfigError(f"{source}: {name} must be a string, got {value!r}")
        values[name] = value.strip() if isinstance(value, str) else value
    config = AzureConfig(**values)
    problem = config.tenantId and tenant_id_problem(config.tenantId)
    if problem:
        raise AzureConfigError(f"{source}: tenantId {problem}")
    return config

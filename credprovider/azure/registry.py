"""ACR recognition, clouds, mirrors, the registry challenge and token claims: pure, no I/O."""

from __future__ import annotations

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Mapping

ACR_SCOPE: Final = "https://containerregistry.azure.net/.default"
ACR_REFRESH_USERNAME: Final = "00000000-0000-0000-0000-000000000000"
ENVIRONMENT_FILE_ENV: Final = "AZURE_ENVIRONMENT_FILEPATH"
BUILTIN_REGISTRY_SUFFIXES: Final = ("azurecr.io", "azurecr.cn", "azurecr.de", "azurecr.us")

MATCH_IMAGES: Final = (
    *(f"*.{suffix}" for suffix in BUILTIN_REGISTRY_SUFFIXES),
    *(f"*.*.geo.{suffix}" for suffix in BUILTIN_REGISTRY_SUFFIXES),
)
SAMPLE_IMAGES: Final = {
    "public cloud": "myregistry.azurecr.io/app",
    "China": "myregistry.azurecr.cn/app",
    "US Government": "myregistry.azurecr.us/app",
    "geo-replica": "myregistry.eastus.geo.azurecr.io/app",
    "DNL name": "myregistry-abc123.azurecr.io/app",
}
CLIENT_ID_ANNOTATION: Final = "kubernetes.azure.com/acr-client-id"
TENANT_ID_ANNOTATION: Final = "kubernetes.azure.com/acr-tenant-id"
ANNOTATION_KEYS: Final = (CLIENT_ID_ANNOTATION, TENANT_ID_ANNOTATION)

# A login server is <name>[-<dnl hash>][.<region>.geo].<suffix>; names are alphanumeric.
_LOGIN_NAME_RE: Final = r"[a-z0-9]+(?:-[a-z0-9]+)?(?:\.[a-z0-9]+\.geo)?"
_PARAM_PATTERN: Final = r'\s*([A-Za-z0-9_-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^",\s]*)\s*(?:,|$)'


class AzureConfigError(CredproviderError, ValueError):
    """The cloud config (azure.json) or an environment file cannot be used."""


class ChallengeError(CredproviderError, ValueError):
    """The registry's ``/v2/`` answer is not the single Bearer challenge ACR sends."""


class Cloud(NamedTuple):
    name: str
    authority_host: str  # https://login.microsoftonline.com
    registry_suffix: str  # azurecr.io


CLOUDS: Final = {
    "azurepubliccloud": Cloud(
        "AzurePublicCloud", "https://login.microsoftonline.com", "azurecr.io"
    ),
    "azurecloud": Cloud("AzurePublicCloud", "https://login.microsoftonline.com", "azurecr.io"),
    "azurechinacloud": Cloud("AzureChinaCloud", "https://login.chinacloudapi.cn", "azurecr.cn"),
    "azureusgovernment": Cloud(
        "AzureUSGovernmentCloud", "https://login.microsoftonline.us", "azurecr.us"
    ),
    "azureusgovernmentcloud": Cloud(
        "AzureUSGovernmentCloud", "https://login.microsoftonline.us", "azurecr.us"
    ),
    "azuregermancloud": Cloud("AzureGermanCloud", "https://login.microsoftonline.de", "azurecr.de"),
}
WELL_KNOWN_AUTHORITY_HOSTS: Final = frozenset(cloud.authority_host for cloud in CLOUDS.values())


def cloud_from_name(name: str, environment_file_text: str | None = None) -> Cloud:
    """The cloud for azure.json's ``cloud`` (case-insensitive; empty = public).

    ``AzureStackCloud`` reads ``activeDirectoryEndpoint`` and ``containerRegistryDNSSuffix`` from the
    JSON in ``AZURE_ENVIRONMENT_FILEPATH`` (passed as text).
    """
    import json

    key = name.strip().lower()
    if not key:
        return CLOUDS["azurepubliccloud"]
    if key in CLOUDS:
        return CLOUDS[key]
    if key == "azurestackcloud":
        if environment_file_text is None:
            raise AzureConfigError(
                f"cloud AzureStackCloud needs {ENVIRONMENT_FILE_ENV} to point at the environment file"
            )
        from credprovider.runtime.answer import BadAnswer, decode_json

        try:
            env = decode_json(environment_file_text)
        except BadAnswer as exc:
            raise AzureConfigError(f"{ENVIRONMENT_FILE_ENV}: the file {exc.predicate}") from None
        except json.JSONDecodeError as exc:
            raise AzureConfigError(f"{ENVIRONMENT_FILE_ENV}: not valid JSON ({exc.msg})") from None
        lowered = {str(k).lower(): v for k, v in env.items()} if isinstance(env, dict) else {}
        authority = str(lowered.get("activedirectoryendpoint") or "").rstrip("/")
        suffix = str(lowered.get("containerregistrydnssuffix") or "").strip(".")
        if not authority.startswith("https://") or not suffix:
            raise AzureConfigError(
                f"{ENVIRONMENT_FILE_ENV}: activeDirectoryEndpoint (https://...) and "
                "containerRegistryDNSSuffix are required for AzureStackCloud"
            )
        return Cloud(str(env.get("name") or "AzureStackCloud"), authority, suffix)
    raise AzureConfigError(
        f"unknown cloud {name!r}: use AzurePublicCloud, AzureChinaCloud, AzureUSGovernmentCloud, "
        "AzureGermanCloud or AzureStackCloud"
    )


def cloud_from_metadata(text: str, cloud_name: str) -> Cloud:
    """The cloud from ARM's ``/metadata/endpoints?api-version=2019-05-01`` answer.

    Picks the environment whose ``name`` equals azure.json's ``cloud`` (case-insensitive), else the
    first; uses ``authentication.loginEndpoint`` and ``suffixes.acrLoginServer``.
    """
    import json

    from credprovider.runtime.answer import BadAnswer, decode_json

    try:
        data = decode_json(text)
    except BadAnswer as exc:
        raise AzureConfigError(exc.detail) from None
    except json.JSONDecodeError as exc:
        raise AzureConfigError(f"not valid JSON ({exc.msg})") from None
    environments = data if isinstance(data, list) else [data]
    environments = [env for env in environments if isinstance(env, dict)]
    if not environments:
        raise AzureConfigError("no environment in the answer")
    wanted = cloud_name.strip().lower()
    chosen = next(
        (env for env in environments if str(env.get("name", "")).lower() == wanted), environments[0]
    )
    authentication = chosen.get("authentication") or {}
    suffixes = chosen.get("suffixes") or {}
    authority = str(authentication.get("loginEndpoint") or "").rstrip("/")
    suffix = str(suffixes.get("acrLoginServer") or "").strip(".")
    if not authority.startswith("https://") or not suffix:
        raise AzureConfigError(
            "authentication.loginEndpoint and suffixes.acrLoginServer are required"
        )
    return Cloud(str(chosen.get("name") or "custom"), authority, suffix)


def login_server_suffix(host: str, cloud: Cloud) -> str | None:
    """The registry suffix if ``host`` (no port) is an ACR login server, else ``None``.

    Only the whole host is examined: ``foo.azurecr.io.example`` or a path containing an ACR host
    are not login servers. Accepted: ``<name>.<suffix>``, DNL names ``<name>-<hash>.<suffix>`` and
    geo-replicas ``<name>.<region>.geo.<suffix>``, for the four public suffixes and the cloud's own.
    """
    import re

    host = host.lower()
    for suffix in dict.fromkeys((*BUILTIN_REGISTRY_SUFFIXES, cloud.registry_suffix.lower())):
        if re.fullmatch(rf"{_LOGIN_NAME_RE}\.{re.escape(suffix)}", host, re.ASCII):
            return suffix
    return None


def parse_registry_mirrors(value: str) -> dict[str, str]:
    """Parse ``--registry-mirror src:dst[,src:dst...]`` into {source host: login server}."""
    mirrors: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in value.replace(" ", "").split(","))):
        source, sep, target = item.partition(":")
        if not sep or not source or not target or ":" in target:
            raise ValueError(f"--registry-mirror: {item!r} is not source:target")
        mirrors[source.lower()] = target.lower()
    return mirrors


class Challenge(NamedTuple):
    realm: str
    service: str


def parse_challenge(status: int, headers: list[str]) -> Challenge:
    """Validate the answer to ``GET /v2/``: 401 with exactly one ``Bearer realm=...,service=...``."""
    import re

    if status != 401:
        raise ChallengeError(f"registry did not issue a valid AAD challenge, status: {status}")
    if not headers:
        raise ChallengeError("challenge response does not contain header 'Www-Authenticate'")
    if len(headers) != 1:
        raise ChallengeError(
            f"registry did not issue a valid AAD challenge, authenticate header {headers}"
        )
    scheme, _, params = headers[0].strip().partition(" ")
    if scheme.lower() != "bearer":
        raise ChallengeError(f"Www-Authenticate: expected realm: Bearer, actual: {scheme.lower()}")
    values: dict[str, str] = {}
    position = 0
    params = params.strip()
    while position < len(params):
        match = re.compile(_PARAM_PATTERN).match(params, position)
        if match is None or match.end() == position:
            raise ChallengeError(
                f"unable to understand the contents of Www-Authenticate header {params}"
            )
        raw = match.group(2)
        values[match.group(1).lower()] = (
            re.sub(r"\\(.)", r"\1", raw[1:-1]) if raw.startswith('"') else raw
        )
        position = match.end()
    if not values.get("service"):
        raise ChallengeError('Www-Authenticate: missing header "service"')
    if not values.get("realm"):
        raise ChallengeError('Www-Authenticate: missing header "realm"')
    return Challenge(values["realm"], values["service"])


def _without_default_port(authority: str) -> str:
    return authority[:-4] if authority.endswith(":443") else authority


def exchange_url(realm: str, login_server: str) -> str:
    """The ``/oauth2/exchange`` URL for a realm that must be on the login server itself.

    The AAD token is sent there, so a realm on any other host, scheme or port is refused.
    """
    scheme, sep, rest = realm.partition("://")
    authority = rest.split("/", 1)[0].split("?", 1)[0].lower() if sep else ""
    if scheme.lower() != "https" or "@" in authority:
        raise ChallengeError(
            f"Www-Authenticate: invalid realm {realm}: it must be https on the registry"
        )
    if _without_default_port(authority) != _without_default_port(login_server.lower()):
        raise ChallengeError(
            f"Www-Authenticate: realm {realm} is not on the registry {login_server}: refusing to send "
            "an AAD token to another host"
        )
    return f"https://{login_server}/oauth2/exchange"


class ServiceAccountIdentity(NamedTuple):
    client_id: str
    tenant_id: str


def service_account_identity(annotations: Mapping[str, str]) -> ServiceAccountIdentity | None:
    """The Entra identity a pod's service account names, ``None`` when it names none.

    Both annotations are required together; one without the other is an error (``ValueError``).
    """
    client_id = annotations.get(CLIENT_ID_ANNOTATION, "").strip()
    tenant_id = annotations.get(TENANT_ID_ANNOTATION, "").strip()
    if not client_id and not tenant_id:
        return None
    if not client_id:
        raise ValueError(
            f"client id annotation {CLIENT_ID_ANNOTATION} is not found or the value is empty"
        )
    if not tenant_id:
        raise ValueError(
            f"tenant id annotation {TENANT_ID_ANNOTATION} is not found or the value is empty"
        )
    problem = tenant_id_problem(tenant_id)
    if problem:
        raise ValueError(f"tenant id annotation {TENANT_ID_ANNOTATION}: {problem}")
    return ServiceAccountIdentity(client_id, tenant_id)


def tenant_id_problem(tenant_id: str) -> str:
    """What is wrong with a tenant ID ('' if nothing): Entra takes letters, digits, '-' and '.'
    only (azure-identity refuses anything else, with a ValueError)."""
    import re

    if re.fullmatch(r"[0-9A-Za-z.-]+", tenant_id):
        return ""
    from credprovider.runtime.excerpt import clip
    from credprovider.runtime.goformat import go_quote

    return (
        f"{go_quote(clip(tenant_id, 64))} is not a tenant ID (a GUID or a domain name: letters, "
        "digits, '-' and '.' only)"
    )

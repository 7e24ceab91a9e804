"""Google registry keys, legacy .dockercfg parsing and upstream env overrides: pure, no I/O."""

from __future__ import annotations

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple
from credprovider.runtime.api import CACHE_KEY_GLOBAL, CACHE_KEY_IMAGE, CACHE_KEY_REGISTRY
from credprovider.runtime.goformat import DurationError, parse_go_duration

if TYPE_CHECKING:
    from collections.abc import Mapping

TOKEN_USERNAME: Final = "_token"
CREDENTIALS_FILE_ENV: Final = "GOOGLE_APPLICATION_CREDENTIALS"
# Every Google registry host form; kubelet globs match one label per '*', hence gcr.io and *.gcr.io.
GOOGLE_REGISTRY_KEYS: Final = ("container.cloud.google.com", "gcr.io", "*.gcr.io", "*.pkg.dev")
# The same keys with the HTTPS port, so an image written as gcr.io:443/... is served by the one
# cached (Global) answer too: a key without a port never matches an image with one.
GOOGLE_REGISTRY_KEYS_443: Final = tuple(f"{key}:443" for key in GOOGLE_REGISTRY_KEYS)

MATCH_IMAGES: Final = GOOGLE_REGISTRY_KEYS
SAMPLE_IMAGES: Final = {
    "gcr.io": "gcr.io/project/app",
    "regional gcr.io": "us.gcr.io/project/app",
    "Artifact Registry": "us-central1-docker.pkg.dev/project/repo/app",
    "container.cloud.google.com": "container.cloud.google.com/project/app",
}

AUTH_FLOWS: Final = ("gcr", "dockercfg", "dockercfg-url")
DOCKERCFG_ATTRIBUTE: Final = "google-dockercfg"
DOCKERCFG_URL_ATTRIBUTE: Final = "google-dockercfg-url"

WI_ANNOTATION: Final = "iam.gke.io/enable-wi-image-pull"
STS_ENDPOINT: Final = "https://sts.googleapis.com/v1/token"
STS_GRANT_TYPE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
STS_SUBJECT_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:jwt"
STS_REQUESTED_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"
CLOUD_PLATFORM_SCOPE: Final = "https://www.googleapis.com/auth/cloud-platform"

CACHE_DURATION_ENV: Final = "KUBE_SIDECAR_CACHE_DURATION"
CACHE_TYPE_ENV: Final = "KUBE_SIDECAR_CACHE_TYPE"
METADATA_HOST_ENV: Final = "GCE_METADATA_HOST"
METADATA_ROOT_ENV: Final = "GCE_METADATA_ROOT"  # the old name google-auth still reads
DEFAULT_METADATA_HOST: Final = "metadata.google.internal"
_CACHE_TYPES: Final = {
    "image": CACHE_KEY_IMAGE,
    "registry": CACHE_KEY_REGISTRY,
    "global": CACHE_KEY_GLOBAL,
}
_BASE64_PATTERN: Final = r"[A-Za-z0-9+/]*"


class DockerCfgError(CredproviderError, ValueError):
    """A .dockercfg document or auth field that cannot be used."""


def is_google_registry_host(host: str) -> bool:
    """True for gcr.io, *.gcr.io, *.pkg.dev and container.cloud.google.com (host without port)."""
    host = host.lower()
    return (
        host in ("gcr.io", "container.cloud.google.com")
        or (host.endswith(".gcr.io") and len(host) > len(".gcr.io"))
        or (host.endswith(".pkg.dev") and len(host) > len(".pkg.dev"))
    )


def registry_keys(image_registry: str, image_host: str) -> list[str]:
    """The auth keys for a Google token: the fixed keys (with and without :443) and the image's own
    registry when it is a Google registry.

    With the Global cache key the kubelet serves later images from this answer without asking again,
    so only registries the fixed keys cover (every Google host on the default port or 443) are
    served reliably; see :func:`covered_by_fixed_keys`.
    """
    keys = [*GOOGLE_REGISTRY_KEYS, *GOOGLE_REGISTRY_KEYS_443]
    if is_google_registry_host(image_host) and image_registry not in keys:
        keys.append(image_registry)
    return keys


def covered_by_fixed_keys(registry: str) -> bool:
    """Does a cached Global answer serve ``registry`` (host[:port])? (For the tool's lints.)"""
    from credprovider.runtime.matching import urls_match

    return any(
        urls_match(key, registry) for key in (*GOOGLE_REGISTRY_KEYS, *GOOGLE_REGISTRY_KEYS_443)
    )


def workload_identity_audience(project_id: str, identity_provider: str) -> str:
    """The STS audience for GKE Workload Identity image pulls."""
    return f"identitynamespace:{project_id}.svc.id.goog:{identity_provider}"


# A workload identity pool provider's full name, the STS audience of Workload Identity Federation
# (a self-managed cluster's service-account issuer registered as the pool's provider).
WIF_AUDIENCE_FORM: Final = (
    "//iam.googleapis.com/projects/<project number>/locations/global/workloadIdentityPools/"
    "<pool>/providers/<provider>"
)
_ID = r"[a-z0-9][a-z0-9-]{2,30}[a-z0-9]"


def check_sts_audience(audience: str) -> str:
    """``--sts-audience``, if it names a pool provider as STS expects it; ValueError saying the
    form otherwise (a project ID for its number, or an https:// prefix, are common slips)."""
    import re

    pattern = (
        r"//iam\.googleapis\.com/projects/[0-9]{1,20}/locations/[a-z0-9-]{1,63}/"
        rf"workloadIdentityPools/{_ID}/providers/{_ID}"
    )
    if re.fullmatch(pattern, audience, re.ASCII):
        return audience
    raise ValueError(
        f"--sts-audience {audience[:200]!r} is not a workload identity pool provider: give "
        f"{WIF_AUDIENCE_FORM} (the project's number, not its ID; no https:)"
    )


def wants_workload_identity(annotations: Mapping[str, str]) -> bool:
    """The service account opted in with ``iam.gke.io/enable-wi-image-pull: "true"`` (exact)."""
    return annotations.get(WI_ANNOTATION) == "true"


WORKLOAD_IDENTITY: Final = "workload identity"
CREDENTIALS_FILE: Final = "credentials file"
METADATA_SERVER: Final = "metadata server"


class TokenSourceError(CredproviderError, ValueError):
    """No token source may be used for this request."""


class TokenSource(NamedTuple):
    kind: str  # WORKLOAD_IDENTITY, CREDENTIALS_FILE or METADATA_SERVER
    warning: str = ""  # said on stderr when the choice is not what the pod asked for


def choose_token_source(
    annotations: Mapping[str, str],
    has_service_account_token: bool,
    federation: str,
    credentials_file: str,
) -> TokenSource:
    """Where the gcr flow's token comes from: the pod's Workload Identity when its service account
    opted in and the plugin knows where to exchange it (``federation``: the identity provider or
    the STS audience; never the node's identity instead), else GOOGLE_APPLICATION_CREDENTIALS,
    else the metadata server."""
    opted_in = wants_workload_identity(annotations)
    if opted_in and federation:
        if not has_service_account_token:
            raise TokenSourceError(
                "the service account opted in to Workload Identity image pulls but the kubelet "
                "sent no service account token: configure tokenAttributes for this provider "
                "(no fallback to the node identity)"
            )
        return TokenSource(WORKLOAD_IDENTITY)
    warning = (
        "the service account opted in to Workload Identity image pulls, but the plugin has "
        "no --identity-provider/--project-id nor --sts-audience: using the node identity"
        if opted_in
        else ""
    )
    return TokenSource(CREDENTIALS_FILE if credentials_file else METADATA_SERVER, warning)


def decode_docker_auth(field: str) -> tuple[str, str]:
    """Decode a dockercfg ``auth`` field like Go: padded or unpadded base64 of ``user:password``.

    Line breaks are ignored (Go's decoder skips ``\\r`` and ``\\n``); anything else that is not
    base64, spaces included, is rejected.
    """
    import binascii
    import re

    padded = field.strip().endswith("=")
    data = field.replace("\r", "").replace("\n", "")
    body = data.rstrip("=") if padded else data
    if not re.fullmatch(_BASE64_PATTERN, body, re.ASCII) or len(body) % 4 == 1:
        raise DockerCfgError("auth field is not valid base64")
    if padded and len(data) % 4 != 0:
        raise DockerCfgError("auth field is not valid base64 (bad padding)")
    if not padded and "=" in data:
        raise DockerCfgError("auth field is not valid base64")
    try:
        decoded = binascii.a2b_base64(body + "=" * (-len(body) % 4)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise DockerCfgError("auth field is not valid base64") from None
    username, colon, password = decoded.partition(":")
    if not colon:
        raise DockerCfgError(
            "unable to parse auth field, must be formatted as base64(username:password)"
        )
    return username, password


def parse_dockercfg(text: str) -> dict[str, tuple[str, str]]:
    """Parse a legacy ``.dockercfg`` map ``{registry: {username, password, email, auth}}``.

    A non-empty ``auth`` field overrides ``username``/``password``, as in the kubelet.
    """
    import json

    from credprovider.runtime.answer import BadAnswer, decode_json

    try:
        document = decode_json(text)
    except BadAnswer as exc:
        raise DockerCfgError(f"it {exc.predicate}") from None
    except json.JSONDecodeError as exc:
        raise DockerCfgError(f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(document, dict):
        raise DockerCfgError("expected a JSON object of registry -> credentials")
    entries: dict[str, tuple[str, str]] = {}
    for registry, entry in document.items():
        if not isinstance(entry, dict):
            raise DockerCfgError(f"entry {registry!r} is not an object")
        fields = {key: entry.get(key, "") for key in ("username", "password", "auth")}
        if not all(isinstance(value, str) for value in fields.values()):
            raise DockerCfgError(f"entry {registry!r} has a non-string username/password/auth")
        if fields["auth"]:
            try:
                entries[registry] = decode_docker_auth(fields["auth"])
            except DockerCfgError as exc:
                raise DockerCfgError(f"entry {registry!r}: {exc}") from None
        else:
            entries[registry] = (fields["username"], fields["password"])
    return entries


class CacheOverrides(NamedTuple):
    """Upstream's ``KUBE_SIDECAR_CACHE_DURATION`` / ``KUBE_SIDECAR_CACHE_TYPE``, when set."""

    duration: int | None = None
    key_type: str | None = None


def parse_cache_overrides(environ: Mapping[str, str]) -> CacheOverrides:
    """Read the overrides as upstream does (lowercase type names only). Raises ``ValueError``."""
    duration = None
    raw_duration = environ.get(CACHE_DURATION_ENV)
    if raw_duration:
        try:
            duration = parse_go_duration(raw_duration)
        except DurationError as exc:
            raise ValueError(f"{CACHE_DURATION_ENV}: {exc}") from None
    key_type = None
    raw_type = environ.get(CACHE_TYPE_ENV)
    if raw_type:
        key_type = _CACHE_TYPES.get(raw_type)
        if key_type is None:
            raise ValueError(
                f'{CACHE_TYPE_ENV}: Unknown cache key "{raw_type}" (use image, registry or global)'
            )
    return CacheOverrides(duration, key_type)


def metadata_host(environ: Mapping[str, str]) -> str:
    """``host[:port]`` of the metadata server, as google-auth picks it."""
    return environ.get(METADATA_HOST_ENV) or environ.get(METADATA_ROOT_ENV) or DEFAULT_METADATA_HOST


def shown_metadata_host(environ: Mapping[str, str]) -> str:
    """:func:`metadata_host` as a line may say it: a user and password in it shown as ``…@``."""
    host = metadata_host(environ)
    return f"…@{host.rpartition('@')[2]}" if "@" in host else host

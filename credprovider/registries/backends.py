"""The backends ``registry-credential-provider`` speaks, their settings from a provider entry's
args, and the registry hosts each one's credential may go to. Pure: nothing here sends or reads.

Wire formats and their sources: ``docs/registries.md`` and the reference it cites
(Quay ``endpoints/oauth/robot_identity_federation.py`` and PROJQUAY-11090's ``/sts/token``;
JFrog's "OIDC Token Exchange"; Cloudsmith's ``/openid/<org>/``; Vault's ``auth/<mount>/login`` and
KV v2 ``data/``; the API server's ``secrets/<name>``).
"""

from __future__ import annotations

import re
from enum import Enum

from credprovider.errors import UsageError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple
from credprovider.runtime.args import parse_arguments
from credprovider.runtime.excerpt import quoted

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


class Backend(Enum):
    """Where the pod's token is traded for a registry credential (``--backend``)."""

    QUAY = "quay"  # Quay robot federation: GET /oauth2/federation/robot/token (Quay 3.13+)
    QUAY_STS = "quay-sts"  # Quay's RFC 8693 exchange: POST <url>/sts/token
    ARTIFACTORY = "artifactory"  # JFrog OIDC token exchange: POST /access/api/v1/oidc/token
    CLOUDSMITH = "cloudsmith"  # Cloudsmith OIDC: POST /openid/<org>/
    VAULT = "vault"  # Vault kubernetes/jwt login, then a KV v2 read of username and password
    SECRET = "secret"  # a kubernetes.io/dockerconfigjson Secret of the pod's own namespace

    @property
    def title(self) -> str:
        return _TITLES[self]


_TITLES: Final = {
    Backend.QUAY: "Quay robot federation",
    Backend.QUAY_STS: "Quay token exchange",
    Backend.ARTIFACTORY: "Artifactory OIDC token exchange",
    Backend.CLOUDSMITH: "Cloudsmith OIDC",
    Backend.VAULT: "Vault",
    Backend.SECRET: "the namespace's pull Secret",
}

# The service-account annotation naming the pull Secret (the secret backend's default).
SECRET_ANNOTATION: Final = "registry.credprovider.io/pull-secret"
CLOUDSMITH_API: Final = "https://api.cloudsmith.io"
CLOUDSMITH_REGISTRY: Final = "docker.cloudsmith.io"
ARTIFACTORY_PROVIDER_TYPE: Final = "Generic OpenID Connect"


class Settings(NamedTuple):
    """One provider entry's backend and its settings (from ``--flag value`` args)."""

    backend: Backend
    url: str  # the backend's base URL, no trailing slash
    registries: tuple[str, ...]  # hosts (host[:port]) the credential may be sent for
    robot: str = ""
    provider_name: str = ""
    provider_type: str = ARTIFACTORY_PROVIDER_TYPE
    audience: str = ""
    project_key: str = ""
    identity_mapping: str = ""
    org: str = ""
    service_slug: str = ""
    role: str = ""
    auth_mount: str = "kubernetes"
    kv_mount: str = "secret"
    secret_path: str = ""
    username_field: str = "username"
    password_field: str = "password"
    vault_namespace: str = ""
    annotation: str = SECRET_ANNOTATION
    ca_file: str = ""


# flag -> Settings field; every flag takes a value
FLAGS: Final = {
    "--backend": "backend",
    "--url": "url",
    "--registry": "registries",
    "--robot": "robot",
    "--provider-name": "provider_name",
    "--provider-type": "provider_type",
    "--audience": "audience",
    "--project-key": "project_key",
    "--identity-mapping": "identity_mapping",
    "--org": "org",
    "--service-slug": "service_slug",
    "--role": "role",
    "--auth-mount": "auth_mount",
    "--kv-mount": "kv_mount",
    "--secret-path": "secret_path",
    "--username-field": "username_field",
    "--password-field": "password_field",
    "--vault-namespace": "vault_namespace",
    "--annotation": "annotation",
    "--ca-file": "ca_file",
}
_COMMON: Final = frozenset({"backend", "url", "registries", "ca_file"})
# What each backend needs, and what else it takes.
REQUIRED: Final = {
    Backend.QUAY: ("url", "robot"),
    Backend.QUAY_STS: ("url", "robot"),
    Backend.ARTIFACTORY: ("url", "provider_name"),
    Backend.CLOUDSMITH: ("org", "service_slug"),
    Backend.VAULT: ("url", "role", "secret_path", "registries"),
    Backend.SECRET: ("url",),
}
OPTIONAL: Final = {
    Backend.QUAY: (),
    Backend.QUAY_STS: (),
    Backend.ARTIFACTORY: ("provider_type", "audience", "project_key", "identity_mapping"),
    Backend.CLOUDSMITH: (),
    Backend.VAULT: (
        "auth_mount",
        "kv_mount",
        "username_field",
        "password_field",
        "vault_namespace",
    ),
    Backend.SECRET: ("annotation",),
}
_FLAG_OF: Final = {field: flag for flag, field in FLAGS.items()}
_ROBOT: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,254}\+[a-z0-9_]{1,255}")
_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_PATH: Final = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")
_ANNOTATION: Final = re.compile(
    r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_HOST: Final = re.compile(r"[A-Za-z0-9.-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


def flag_of(field: str) -> str:
    return _FLAG_OF[field]


def settings_from_args(args: Sequence[str]) -> Settings:
    """A provider entry's args as the plugin reads them (every flag takes a value); one
    :class:`UsageError` naming the flag for anything it refuses. The one reading of the args: the
    plugin's ``build``, and the tool's validate, explain and doctor (descriptor.py)."""
    values, positionals = parse_arguments(list(args), FLAGS)
    if positionals:
        raise UsageError(f"unrecognized arguments: {' '.join(positionals)} (see --help)")
    try:
        return parse_settings(values)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def parse_settings(values: Mapping[str, str]) -> Settings:
    """The settings ``values`` (field -> value, as :data:`FLAGS` names them) give; ``ValueError``
    with one sentence naming the flag for anything missing, misplaced or malformed."""
    if "backend" not in values:
        raise ValueError(f"--backend is required: one of {', '.join(b.value for b in Backend)}")
    try:
        backend = Backend(values["backend"])
    except ValueError:
        raise ValueError(
            f"--backend {quoted(values['backend'])} is not one of {', '.join(b.value for b in Backend)}"
        ) from None
    allowed = _COMMON | set(REQUIRED[backend]) | set(OPTIONAL[backend])
    stray = [flag_of(field) for field in values if field not in allowed]
    if stray:
        raise ValueError(f"{', '.join(stray)} does not apply to --backend {backend.value}")
    missing = [flag_of(field) for field in REQUIRED[backend] if not values.get(field)]
    if missing:
        raise ValueError(f"--backend {backend.value} needs {', '.join(missing)}")
    given = {
        field: value for field, value in values.items() if field not in ("backend", "registries")
    }
    if backend is Backend.CLOUDSMITH:
        given.setdefault("url", CLOUDSMITH_API)
    given["url"] = _base_url(given["url"])
    _check_values(given)
    registries = _registries(values.get("registries", ""), backend, given["url"])
    return Settings(backend=backend, registries=registries, **given)


def _base_url(url: str) -> str:
    """``url`` read by the runtime's HTTP client's own parser, without a trailing slash; the pod's
    token goes to it, so only https://, or http:// to a loopback address."""
    from credprovider.runtime.http import HttpError, NotHttps, credential_endpoint

    try:
        scheme, authority, target = credential_endpoint(url)
    except HttpError as exc:
        why = ": the pod's token is sent to it" if isinstance(exc, NotHttps) else ""
        raise ValueError(f"--url {quoted(url)} {exc}{why}") from None
    return f"{scheme}://{authority}{target.rstrip('/')}"


def _check_values(given: Mapping[str, str]) -> None:
    checks = {
        "robot": (_ROBOT, "a robot account as namespace+name"),
        "role": (_NAME, "a role name"),
        "org": (_NAME, "an organization slug"),
        "service_slug": (_NAME, "a service account slug"),
        "auth_mount": (_PATH, "a mount path"),
        "kv_mount": (_PATH, "a mount path"),
        "secret_path": (_PATH, "a secret path (letters, digits, '.', '_', '-' and '/')"),
        "annotation": (_ANNOTATION, "an annotation key"),
    }
    for field, (pattern, what) in checks.items():
        value = given.get(field)
        if value is not None and (not pattern.fullmatch(value) or ".." in value.split("/")):
            raise ValueError(f"{flag_of(field)} {quoted(value)} is not {what}")
    for field in ("provider_name", "username_field", "password_field", "vault_namespace"):
        value = given.get(field, "x")
        if not value.isprintable() or not value.strip() or len(value) > 256:
            raise ValueError(f"{flag_of(field)} {quoted(value)} is not a name")


def _registries(given: str, backend: Backend, url: str) -> tuple[str, ...]:
    """The hosts the credential is for: ``--registry`` (a comma list), else the backend's own
    (Quay's and Artifactory's host is their registry; Cloudsmith's is docker.cloudsmith.io). The
    secret backend's Secret names its own hosts."""
    hosts = [host.strip().lower() for host in given.split(",") if host.strip()]
    for host in hosts:
        if not _HOST.fullmatch(host):
            raise ValueError(
                f"--registry {quoted(host)} is not a registry host (host or host:port)"
            )
    if hosts:
        return tuple(hosts)
    if backend in (Backend.QUAY, Backend.QUAY_STS, Backend.ARTIFACTORY):
        authority = url.partition("://")[2].split("/", 1)[0].lower()
        return (authority, *((authority.rsplit(":", 1)[0],) if authority.endswith(":443") else ()))
    if backend is Backend.CLOUDSMITH:
        return (CLOUDSMITH_REGISTRY,)
    return ()


def serves(settings: Settings, registry: str) -> bool:
    """Whether the credential may be sent for an image on ``registry`` (host[:port]): one of the
    provider's registries (``host`` also stands for ``host:443``), or any for the secret backend,
    whose Secret says which hosts it is for."""
    if settings.backend is Backend.SECRET:
        return True
    wanted = registry.lower()
    return wanted in settings.registries or (
        wanted.endswith(":443") and wanted[: -len(":443")] in settings.registries
    )

"""Each backend's calls and how to read what it answers. Pure: a :class:`Call` is built from the
settings and the pod's token, and an answer's body read into an :class:`Issued` credential (or a
``ValueError`` saying what is missing); :mod:`credprovider.registries.provider` sends them.
"""

from __future__ import annotations

import json

from credprovider.registries.backends import Backend, Settings
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final, NamedTuple
from credprovider.runtime.answer import decode_json, jwt_claims, jwt_expiry
from credprovider.runtime.excerpt import quoted

if TYPE_CHECKING:
    from collections.abc import Mapping

TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:jwt"
ID_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:id_token"
CLOUDSMITH_USERNAME: Final = "token"
DOCKERCONFIGJSON: Final = "kubernetes.io/dockerconfigjson"


class Call(NamedTuple):
    method: str
    url: str
    headers: Mapping[str, str]
    body: bytes | None = None
    ok: tuple[int, ...] = (200,)


class Issued(NamedTuple):
    """A registry credential and, when it says, when it expires (Unix seconds)."""

    username: str
    password: str
    expires_at: float | None = None


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


_JSON: Final = {"Content-Type": "application/json", "Accept": "application/json"}


def token_call(settings: Settings, token: str, annotations: Mapping[str, str]) -> Call:
    """The call that presents the pod's token to the backend (for Vault: its login; for the
    secret backend: the Secret the service account's annotation names, in the token's namespace).
    ``ValueError`` when the request lacks what the call needs."""
    from base64 import b64encode
    from urllib.parse import urlencode

    url = settings.url
    backend = settings.backend
    if backend is Backend.QUAY:
        basic = b64encode(f"{settings.robot}:{token}".encode()).decode()
        return Call(
            "GET",
            f"{url}/oauth2/federation/robot/token",
            {"Authorization": f"Basic {basic}", "Accept": "application/json"},
        )
    if backend is Backend.QUAY_STS:
        form = {"grant_type": TOKEN_EXCHANGE, "subject_token": token,
                "subject_token_type": JWT_TOKEN_TYPE, "resource": f"urn:quay:robot:{settings.robot}"}  # fmt: skip
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        return Call("POST", f"{url}/sts/token", headers, urlencode(form).encode())
    if backend is Backend.ARTIFACTORY:
        body = {"grant_type": TOKEN_EXCHANGE, "subject_token_type": ID_TOKEN_TYPE,
                "subject_token": token, "provider_name": settings.provider_name,
                "provider_type": settings.provider_type}  # fmt: skip
        for field, name in (("audience", "audience"), ("project_key", "project_key"),
                            ("identity_mapping", "identity_mapping_name")):  # fmt: skip
            if getattr(settings, field):
                body[name] = getattr(settings, field)
        return Call("POST", f"{url}/access/api/v1/oidc/token", _JSON, _json(body))
    if backend is Backend.CLOUDSMITH:
        body = {"oidc_token": token, "service_slug": settings.service_slug}
        return Call("POST", f"{url}/openid/{settings.org}/", _JSON, _json(body), ok=(200, 201))
    if backend is Backend.VAULT:
        return Call("POST", f"{url}/v1/auth/{settings.auth_mount}/login", _vault_headers(settings),
                    _json({"role": settings.role, "jwt": token}))  # fmt: skip
    return secret_call(settings, token, secret_name(settings, annotations), token_namespace(token))


def _vault_headers(settings: Settings, client_token: str = "") -> dict[str, str]:
    headers = {**_JSON}
    if settings.vault_namespace:
        headers["X-Vault-Namespace"] = settings.vault_namespace
    if client_token:
        headers["X-Vault-Token"] = client_token
    return headers


def vault_read_call(settings: Settings, client_token: str) -> Call:
    """Vault's second call: the KV v2 secret, read with the login's client token."""
    headers = _vault_headers(settings, client_token)
    return Call(
        "GET", f"{settings.url}/v1/{settings.kv_mount}/data/{settings.secret_path}", headers
    )


def token_namespace(token: str) -> str:
    """The namespace a bound service-account token is for (claim ``kubernetes.io.namespace``), read
    unverified: the API server checks the token when it is used. ``ValueError`` if it names none."""
    claims = jwt_claims(token) or {}
    kubernetes = claims.get("kubernetes.io")
    namespace = kubernetes.get("namespace") if isinstance(kubernetes, dict) else None
    if not isinstance(namespace, str) or not _is_dns_label(namespace):
        raise ValueError("the service account token names no namespace (kubernetes.io.namespace)")
    return namespace


def _is_dns_label(value: str) -> bool:
    return (
        0 < len(value) <= 63
        and value.isascii()  # isalnum and islower take "ß" and "٣" too
        and value.replace("-", "a").isalnum()
        and value.islower()
        and value[0].isalnum()
        and value[-1].isalnum()
    )


def secret_name(settings: Settings, annotations: Mapping[str, str]) -> str:
    """The pull Secret's name, from the service account's annotation; ``ValueError`` if absent or
    not a Secret name."""
    name = annotations.get(settings.annotation, "")
    if not name:
        raise ValueError(
            f"the service account has no annotation {settings.annotation} naming its pull "
            "Secret: annotate it, and list the key in tokenAttributes."
            "requiredServiceAccountAnnotationKeys"
        )
    labels = name.split(".")
    if len(name) > 253 or not all(_is_dns_label(label) for label in labels):
        raise ValueError(f"annotation {settings.annotation} names no Secret: {quoted(name)}")
    return name


def secret_call(settings: Settings, token: str, name: str, namespace: str) -> Call:
    """The API server's ``GET .../namespaces/NS/secrets/NAME`` as the pod's service account."""
    path = f"/api/v1/namespaces/{namespace}/secrets/{name}"
    return Call(
        "GET",
        f"{settings.url}{path}",
        {"Authorization": f"Bearer {token}", "Accept": "application/json"},
    )


def read_issued(settings: Settings, answer: Any, now: float) -> Issued:
    """The credential in a token backend's decoded answer (Quay, Artifactory, Cloudsmith)."""
    backend = settings.backend
    if not isinstance(answer, dict):
        raise ValueError("the answer is not a JSON object")
    if backend is Backend.QUAY or backend is Backend.CLOUDSMITH:
        token = _text(answer, "token")
        username = settings.robot if backend is Backend.QUAY else CLOUDSMITH_USERNAME
        return Issued(username, token, jwt_expiry(token))
    if backend is Backend.QUAY_STS:
        return Issued(settings.robot, _text(answer, "access_token"), _expiry(answer, now))
    return Issued(_text(answer, "username"), _text(answer, "access_token"), _expiry(answer, now))


def vault_client_token(answer: Any) -> str:
    auth = answer.get("auth") if isinstance(answer, dict) else None
    if not isinstance(auth, dict):
        raise ValueError("the login's answer has no auth")
    return _text(auth, "client_token")


def read_vault_secret(settings: Settings, answer: Any) -> Issued:
    outer = answer.get("data") if isinstance(answer, dict) else None
    data = outer.get("data") if isinstance(outer, dict) else None
    if not isinstance(data, dict):
        raise ValueError(
            f"{settings.kv_mount}/{settings.secret_path} is not a KV version 2 secret (no data.data)"
        )
    return Issued(_text(data, settings.username_field), _text(data, settings.password_field))


def read_pull_secret(answer: Any, registry: str) -> Issued:
    """The credential a ``kubernetes.io/dockerconfigjson`` Secret holds for ``registry``
    (host[:port]): its ``auths`` entry for that host (``https://`` and a path tolerated;
    ``index.docker.io`` stands for ``docker.io``)."""
    from base64 import b64decode

    if not isinstance(answer, dict) or answer.get("type") != DOCKERCONFIGJSON:
        raise ValueError(f"the Secret is not of type {DOCKERCONFIGJSON}")
    data = answer.get("data")
    encoded = data.get(".dockerconfigjson") if isinstance(data, dict) else None
    try:
        config = decode_json(b64decode(encoded or "", validate=True))
    except ValueError:
        raise ValueError("the Secret's .dockerconfigjson is not base64 JSON") from None
    auths = config.get("auths") if isinstance(config, dict) else None
    if not isinstance(auths, dict):
        raise ValueError("the Secret's .dockerconfigjson has no auths")
    wanted = _host_of(registry)
    entry = next((auths[key] for key in auths if _host_of(key) == wanted), None)
    if not isinstance(entry, dict):
        raise ValueError(f"the Secret has no auths entry for {registry}")
    if "username" in entry or "password" in entry:
        return Issued(_text(entry, "username"), _text(entry, "password"))
    try:
        username, sep, password = (
            b64decode(_text(entry, "auth"), validate=True).decode().partition(":")
        )
    except (ValueError, UnicodeError):
        sep = ""
    if not sep or not username or not password:
        raise ValueError(f"the Secret's auths entry for {registry} has no username and password")
    return Issued(username, password)


def _host_of(key: str) -> str:
    host = key.lower().removeprefix("https://").removeprefix("http://").split("/", 1)[0]
    host = host.removesuffix(":443")
    return "docker.io" if host in ("index.docker.io", "registry-1.docker.io") else host


def _text(answer: Mapping[str, Any], name: str) -> str:
    value = answer.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(f"the answer has no {name}")
    return value


def _expiry(answer: Mapping[str, Any], now: float) -> float | None:
    """When the credential ends, from ``expires_in`` (seconds: a number, or digits as some
    services send it); ``None`` when the answer does not say. One that says no positive number
    of seconds (0, negative, words) ends it now: the answer is not cached on a lifetime the
    service did not give (the pod token's would keep a dead credential for half an hour)."""
    seconds = answer.get("expires_in")
    if seconds is None:
        return None
    if isinstance(seconds, str) and seconds.isascii() and seconds.isdigit() and len(seconds) < 16:
        seconds = int(seconds)
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0:
        return now + float(seconds)
    return now


def error_text(answer: Any) -> str:
    """What a backend's error body says: OAuth's ``error``/``error_description``, Vault's
    ``errors``, Cloudsmith's ``detail``, the API server's Status ``message``; ``""`` if none."""
    if not isinstance(answer, dict):
        return ""
    said = [answer.get(name) for name in ("error", "error_description", "detail", "message")]
    errors = answer.get("errors")
    if isinstance(errors, list):
        said += [e.get("message") if isinstance(e, dict) else e for e in errors[:3]]
    return "; ".join(s for s in said if isinstance(s, str) and s)

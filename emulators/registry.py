"""A registry front that asks for credentials as each cloud's registry does, in front of a real
registry server (distribution) that holds the images.

Each host it answers as has a :class:`Scheme`: ECR's private registries take basic auth (``AWS`` and
the token) on every request; ECR Public, ACR, Container Registry and Artifact Registry send a bearer
challenge whose token endpoint takes basic auth (GET) and answers a registry token the ``/v2/``
requests then carry. Who may pass is the cloud's emulator's to say: a ``verify(host, username,
password)`` that returns the identity the credential was issued to, or raises :class:`Refused`. A
host with no verifier is a private registry no plugin serves: everything is refused. ``admit``
narrows a host to some identities (as a registry's access policy does).

Allowed requests are passed to the cloud's registry server, each host's repositories under a prefix
of its own. Every request is logged with the identity it carried (:class:`Entry`): the tests read
which credential pulled what, and which was refused.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from emulators.http import FakeRequest, FakeResponse

REGISTRY_TOKEN_SECONDS = 300
PASSED_HEADERS = ("content-type", "content-length", "docker-content-digest", "etag")


class Refused(Exception):
    """A registry refuses a credential; the message says why (it goes to the access log)."""


Verifier = Callable[[str, str, str], str]


@dataclass(frozen=True)
class Scheme:
    """How a registry asks for credentials: ``basic`` on every request, or ``bearer`` with a token
    endpoint at ``token_path`` on the same host. ``post_status``: what that endpoint answers to
    containerd's OAuth POST (404 as Container Registry does, 400 as ACR does; containerd then asks
    with GET and basic auth)."""

    kind: str
    service: str
    token_path: str = ""
    post_status: int = 404


@dataclass(frozen=True)
class Host:
    """One host name a registry answers as, the server and prefix its repositories live under."""

    name: str
    scheme: Scheme
    verify: Verifier | None
    backend: str
    prefix: str
    admit: frozenset[str] | None = None


@dataclass(frozen=True)
class Entry:
    """One request as the registry saw it: ``identity`` is whom its credential was issued to
    ("" for none), ``credential`` a fingerprint of the secret it carried (:func:`fingerprint`;
    "" for none), ``note`` why it was refused."""

    host: str
    method: str
    path: str
    status: int
    identity: str
    credential: str
    note: str = ""
    at: float = field(default_factory=time.time)


def fingerprint(secret: str) -> str:
    """How the log names a secret without holding it."""
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()[:16]


def presented(request: FakeRequest) -> str:
    """The secret a request carries: basic auth's password or a bearer token ("" for none)."""
    kind, _, value = request.header("authorization").partition(" ")
    if kind.lower() == "bearer":
        return value
    if kind.lower() == "basic":
        try:
            return base64.b64decode(value).decode().partition(":")[2]
        except ValueError:
            return value
    return ""


@dataclass
class RegistryFront:
    hosts: dict[str, Host]
    log: list[Entry] = field(default_factory=list)
    # registry token -> (the prefix it is valid for, the identity, its expiry)
    tokens: dict[str, tuple[str, str, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: FakeRequest) -> FakeResponse:
        host = self.hosts.get(request.host.split(":")[0].lower())
        if host is None:
            return FakeResponse.text("no such registry", status=404)
        try:
            identity, response = self._answer(host, request)
            note = ""
        except Refused as refused:
            identity, note = "", str(refused)
            response = self._challenge(host, request, note)
        secret = presented(request)
        entry = Entry(
            request.host,
            request.method,
            request.path,
            response.status,
            identity,
            fingerprint(secret) if secret else "",
            note,
        )
        with self._lock:
            self.log.append(entry)
        return response

    def _answer(self, host: Host, request: FakeRequest) -> tuple[str, FakeResponse]:
        scheme = host.scheme
        if scheme.kind == "bearer" and request.path == scheme.token_path:
            return self._token(host, request)
        if not request.path.startswith("/v2/"):
            return "", FakeResponse.text("not found", status=404)
        if scheme.kind == "basic":
            identity = self._verified(host, request)
        else:
            identity = self._bearer(host, request)
        if request.path == "/v2/":
            return identity, FakeResponse.json({})
        return identity, self._proxy(host, request)

    def _verified(self, host: Host, request: FakeRequest) -> str:
        """The identity behind the request's basic auth, as ``host``'s cloud says."""
        kind, _, value = request.header("authorization").partition(" ")
        if kind.lower() != "basic" or not value:
            raise Refused("no credentials")
        if host.verify is None:
            raise Refused("this registry admits nobody")
        try:
            username, _, password = base64.b64decode(value).decode().partition(":")
        except ValueError as exc:
            raise Refused("malformed basic auth") from exc
        identity = host.verify(host.name, username, password)
        if host.admit is not None and identity not in host.admit:
            raise Refused(f"{identity} may not pull from {host.name}")
        return identity

    def _token(self, host: Host, request: FakeRequest) -> tuple[str, FakeResponse]:
        """The token endpoint: GET with basic auth answers a registry token."""
        if request.method == "POST":
            status = host.scheme.post_status
            return "", FakeResponse.json({"errors": [{"code": "UNSUPPORTED"}]}, status=status)
        identity = self._verified(host, request)
        token = f"registry-token-{len(self.tokens)}-{host.prefix}"
        with self._lock:
            self.tokens[token] = (host.prefix, identity, time.time() + REGISTRY_TOKEN_SECONDS)
        return identity, FakeResponse.json(
            {"token": token, "access_token": token, "expires_in": REGISTRY_TOKEN_SECONDS}
        )

    def _bearer(self, host: Host, request: FakeRequest) -> str:
        kind, _, token = request.header("authorization").partition(" ")
        if kind.lower() != "bearer" or not token:
            raise Refused("no credentials")
        prefix, identity, expires = self.tokens.get(token, ("", "", 0.0))
        if prefix != host.prefix or expires <= time.time():
            raise Refused("not a registry token of this registry")
        return identity

    def _challenge(self, host: Host, request: FakeRequest, note: str) -> FakeResponse:
        scheme = host.scheme
        if scheme.kind == "bearer" and request.path == scheme.token_path:
            return FakeResponse.json({"errors": [{"code": "UNAUTHORIZED", "message": note}]}, 401)
        if scheme.kind == "basic":
            challenge = f'Basic realm="https://{request.host}/",service="{scheme.service}"'
        else:
            challenge = (
                f'Bearer realm="https://{request.host}{scheme.token_path}",'
                f'service="{scheme.service}"'
            )
            repository = _repository(request.path)
            if repository:
                challenge += f',scope="repository:{repository}:pull"'
        return FakeResponse.json(
            {"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]},
            status=401,
            headers={"Www-Authenticate": challenge},
        )

    def _proxy(self, host: Host, request: FakeRequest) -> FakeResponse:
        if request.method not in ("GET", "HEAD"):
            return FakeResponse.json({"errors": [{"code": "DENIED"}]}, status=403)
        url = f"{host.backend}/v2/{host.prefix}/{request.path.removeprefix('/v2/')}"
        headers = {"Accept": request.header("accept")} if request.header("accept") else {}
        outgoing = urllib.request.Request(url, method=request.method, headers=headers)
        try:
            with urllib.request.urlopen(outgoing, timeout=30) as answer:
                status, body, answer_headers = answer.status, answer.read(), answer.headers
        except urllib.error.HTTPError as refused:
            status, body, answer_headers = refused.code, refused.read(), refused.headers
        passed = {k: v for k, v in answer_headers.items() if k.lower() in PASSED_HEADERS}
        return FakeResponse(status, body, passed)


def _repository(path: str) -> str:
    """``team/app`` of ``/v2/team/app/manifests/v1`` ("" for ``/v2/``)."""
    for marker in ("/manifests/", "/blobs/", "/tags/"):
        if marker in path:
            return path.removeprefix("/v2/").split(marker)[0]
    return ""

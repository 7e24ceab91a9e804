"""Fakes of Azure IMDS, the Entra ID (AAD) token endpoint and an ACR registry's token exchange.

The AAD and ACR fakes serve TLS with certificates from the session's test CA; the plugin reaches
them under their real host names (``login.microsoftonline.com``, ``myreg.azurecr.io``, ...) through
the loopback-only ``CREDPROVIDER_TEST_RESOLVE``. ACR refresh tokens are JWTs with an ``exp`` claim.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulators import beside
from emulators.http import FakeRequest, FakeResponse
from emulators.ratelimit import TokenBucket, too_many_requests
from emulators.registry import Refused

# The username of every ACR refresh token (the plugins' answers, the token endpoint's basic auth).
ACR_USERNAME = "00000000-0000-0000-0000-000000000000"
AAD_HOSTS = ("login.microsoftonline.com", "login.chinacloudapi.cn", "login.microsoftonline.us")
ACR_SCOPE = "https://containerregistry.azure.net/.default"


def make_jwt(claims: dict[str, object]) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def claims(token: str) -> dict[str, object]:
    """The claims of a JWT (unverified; ``{}`` for anything else)."""
    try:
        part = token.split(".")[1]
        found = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (IndexError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def refused_as_imds_refuses(
    request: FakeRequest, queries: list[dict[str, str]]
) -> FakeResponse | None:
    """IMDS's (and the Arc agent's) answer to a request it refuses: another path, or no
    ``Metadata: true``; else None, the query recorded in ``queries``."""
    if request.path != "/metadata/identity/oauth2/token":
        return FakeResponse.json({"error": "not_found"}, status=404)
    if request.header("metadata") != "true":
        return FakeResponse.json({"error": "bad_request", "error_description": "Metadata"}, 400)
    queries.append({k: v[0] for k, v in request.query.items()})
    return None


@dataclass
class FakeImds:
    """``GET /metadata/identity/oauth2/token`` (needs ``Metadata: true``), as on an Azure VM."""

    access_token: str = field(default_factory=lambda: make_jwt({"aud": "acr", "src": "imds"}))
    fault: FakeResponse | None = None
    queries: list[dict[str, str]] = field(default_factory=list)
    # client_id -> the token of that user-assigned identity (see :meth:`identity`)
    identities: dict[str, str] = field(default_factory=dict)

    def identity(self, client_id: str) -> str:
        """Give the user-assigned identity ``client_id`` a token of its own; returns it."""
        token = make_jwt({"aud": "acr", "src": "imds", "appid": client_id})
        self.identities[client_id] = token
        return token

    def __call__(self, request: FakeRequest) -> FakeResponse:
        refused = refused_as_imds_refuses(request, self.queries)
        if refused is not None:
            return refused
        if self.fault is not None:
            return self.fault
        return FakeResponse.json(
            {
                "access_token": self.identities.get(
                    request.query.get("client_id", [""])[0], self.access_token
                ),
                "expires_in": "3599",
                "expires_on": str(int(time.time()) + 3599),
                "resource": request.query.get("resource", [""])[0],
                "token_type": "Bearer",
            }
        )


# Where the Connected Machine agent keeps the keys it challenges a caller to read (MSAL's
# managed_identity.py, ``_supported_arc_platforms_and_their_prefixes``, for linux).
ARC_KEY_DIR = "/var/opt/azcmagent/tokens"


@dataclass
class FakeArc:
    """The Azure Arc Connected Machine agent's identity endpoint (HIMDS, ``IDENTITY_ENDPOINT``):
    a request without a key is answered 401 with ``WWW-Authenticate: Basic realm=<key file>``;
    one with ``Authorization: Basic <that file's content>`` gets a token (Microsoft's "Managed
    identity authentication" page for Arc-enabled servers)."""

    key: str = "arc-secret-key-0123456789abcdef"
    key_file: str = f"{ARC_KEY_DIR}/0f1e2d3c.key"
    access_token: str = field(default_factory=lambda: make_jwt({"aud": "acr", "src": "arc"}))
    challenge: FakeResponse | None = None  # instead of the 401
    fault: FakeResponse | None = None  # instead of the token
    queries: list[dict[str, str]] = field(default_factory=list)
    keys_given: list[str] = field(default_factory=list)

    def __call__(self, request: FakeRequest) -> FakeResponse:
        refused = refused_as_imds_refuses(request, self.queries)
        if refused is not None:
            return refused
        given = request.header("authorization")
        if not given:
            if self.challenge is not None:
                return self.challenge
            return FakeResponse(401, b"", {"WWW-Authenticate": f"Basic realm={self.key_file}"})
        self.keys_given.append(given.removeprefix("Basic "))
        if given != f"Basic {self.key}":
            return FakeResponse.json({"error": "unauthorized"}, status=401)
        if self.fault is not None:
            return self.fault
        query = self.queries[-1]
        return FakeResponse.json(
            {
                "access_token": self.access_token,
                "expires_in": "3599",
                "expires_on": str(int(time.time()) + 3599),
                "resource": query.get("resource", ""),
                "token_type": "Bearer",
                **({"client_id": query["client_id"]} if "client_id" in query else {}),
            }
        )


# The agent at its fixed address, run by ArcAtItsAddress beside a command (emulators/beside.py):
# a FakeArc that records what it was asked in the log when stopped.
_AGENT_AT_ITS_ADDRESS = """
import json, os, signal, sys
from emulators.azure import FakeArc
from emulators.http import serve
fake, log = FakeArc(), os.environ["BESIDE_LOG"]
def stop(*_):
    with open(log, "w") as out:
        json.dump({"queries": fake.queries, "keys": fake.keys_given}, out)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
with serve(fake, port=int(os.environ["AGENT_PORT"])):
    open(log + ".ready", "w").close()
    signal.pause()
"""


@dataclass(frozen=True)
class ArcAtItsAddress:
    """A :class:`FakeArc` at the agent's fixed address (127.0.0.1:40342) beside a command, both in
    a network namespace the caller has made (the host's port is never bound): ``wrapper()`` is the
    command's prefix, run with ``env()``; ``asked()`` what the agent was asked, once it is done."""

    log: Path

    def env(self) -> dict[str, str]:
        from credprovider.azure.imds import ARC_DEFAULT_ENDPOINT

        port = ARC_DEFAULT_ENDPOINT.split(":")[2].split("/")[0]
        return beside.environment(_AGENT_AT_ITS_ADDRESS, self.log, AGENT_PORT=port)

    def wrapper(self) -> list[str]:
        return beside.wrapper()

    def asked(self) -> dict[str, Any]:
        answer: dict[str, Any] = json.loads(self.log.read_text())
        return answer


@dataclass
class FakeAad:
    """Entra ID: OpenID discovery and the v2.0 token endpoint (client credentials grants)."""

    access_token: str = field(default_factory=lambda: make_jwt({"aud": "acr", "src": "aad"}))
    fault: FakeResponse | None = None
    token_requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    # Entra ID's throttling: a token request the bucket refuses is answered 429 (AADSTS50196's
    # family), with Retry-After (seconds) when set.
    bucket: TokenBucket | None = None
    retry_after: int | None = None

    def __call__(self, request: FakeRequest) -> FakeResponse:
        host = request.host.split(":")[0]
        parts = request.path.strip("/").split("/")
        tenant = parts[0] if parts else ""
        if request.path.endswith("/v2.0/.well-known/openid-configuration"):
            base = f"https://{host}/{tenant}"
            return FakeResponse.json(
                {
                    "token_endpoint": f"{base}/oauth2/v2.0/token",
                    "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                    "issuer": f"https://{host}/{tenant}/v2.0",
                    "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode",
                }
            )
        if request.path == "/common/discovery/instance":
            return FakeResponse.json(
                {
                    "tenant_discovery_endpoint": f"https://{host}/common/v2.0/.well-known/openid-configuration",
                    "api-version": "1.1",
                    "metadata": [
                        {"preferred_network": host, "preferred_cache": host, "aliases": [host]}
                    ],
                }
            )
        if request.path.endswith("/oauth2/v2.0/token") and request.method == "POST":
            self.token_requests.append((host, tenant, request.form))
            if self.fault is not None:
                return self.fault
            if self.bucket is not None and not self.bucket.take():
                return too_many_requests(
                    {"error": "temporarily_unavailable", "error_description": "throttled"},
                    self.retry_after,
                )
            return FakeResponse.json(
                {
                    "access_token": self.access_token,
                    "expires_in": 3599,
                    "ext_expires_in": 3599,
                    "token_type": "Bearer",
                }
            )
        return FakeResponse.json({"error": "not_found", "path": request.path}, status=404)


@dataclass
class FakeAcr:
    """An ACR registry: ``GET /v2/`` challenge and ``POST /oauth2/exchange``.

    ``challenge`` overrides the Www-Authenticate values (a list: several headers); ``exchange_fault``
    replaces the exchange answer; ``valid_seconds`` sets the refresh token's ``exp``.
    """

    valid_seconds: float = 10800.0
    challenge: list[str] | None = None
    challenge_status: int = 401
    exchange_fault: FakeResponse | None = None
    exchange_faults: list[FakeResponse] = field(default_factory=list)  # consumed one per call
    exchanges: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    refresh_tokens: list[str] = field(default_factory=list)
    exchanged_for: dict[str, str] = field(default_factory=dict)  # refresh token -> its AAD token
    services: dict[str, str] = field(default_factory=dict)  # refresh token -> the registry asked
    # A rate limit on the exchange: a call the bucket refuses is answered 429 TOOMANYREQUESTS, with
    # Retry-After (seconds) when set.
    bucket: TokenBucket | None = None
    retry_after: int | None = None

    def registry_identity(self, host: str, username: str, password: str) -> str:
        """Who pulls from the ACR registry ``host`` (a login server or one of its geo-replicas)
        with this refresh token: the client ID of the identity whose AAD token was exchanged for
        it (``default`` for the node's system identity). Raises :class:`Refused` as ACR's token
        endpoint refuses it: another username, a token ACR did not issue, one issued for another
        registry, or one past its ``exp``."""
        if username != ACR_USERNAME or password not in self.services:
            raise Refused("not an ACR refresh token")
        registry = self.services[password].split(".")[0]
        if registry != host.split(".")[0]:
            raise Refused(f"a refresh token for {self.services[password]} is not valid at {host}")
        if int(claims(password).get("exp", 0)) <= time.time():
            raise Refused("the refresh token has expired")
        return str(claims(self.exchanged_for[password]).get("appid", "default"))

    def __call__(self, request: FakeRequest) -> FakeResponse:
        host = request.host
        if request.path == "/v2/" and request.method == "GET":
            values = (
                self.challenge
                if self.challenge is not None
                else [f'Bearer realm="https://{host}/oauth2/token",service="{host.split(":")[0]}"']
            )
            response = FakeResponse.json(
                {"errors": [{"code": "UNAUTHORIZED"}]}, status=self.challenge_status
            )
            response.headers.pop("Www-Authenticate", None)
            return _with_repeated_header(response, "Www-Authenticate", values)
        if request.path == "/oauth2/exchange" and request.method == "POST":
            self.exchanges.append((host, request.form))
            if self.exchange_faults:
                return self.exchange_faults.pop(0)
            if self.exchange_fault is not None:
                return self.exchange_fault
            if self.bucket is not None and not self.bucket.take():
                return too_many_requests(
                    {"errors": [{"code": "TOOMANYREQUESTS", "message": "too many requests"}]},
                    self.retry_after,
                )
            if not _valid_exchange(request.form):
                return FakeResponse.json({"errors": [{"code": "INVALID_GRANT"}]}, status=400)
            token = make_jwt(
                {
                    "aud": request.form.get("service", ""),
                    "exp": int(time.time() + self.valid_seconds),
                    "grant_type": "refresh_token",
                    "iss": "Azure Container Registry",
                    "jti": f"refresh-{len(self.refresh_tokens)}",
                }
            )
            self.refresh_tokens.append(token)
            self.exchanged_for[token] = request.form.get("access_token", "")
            self.services[token] = request.form.get("service", "")
            return FakeResponse.json(
                {"refresh_token": token}, headers={"X-Ms-Correlation-Request-Id": "corr-1"}
            )
        return FakeResponse.json({"errors": [{"code": "NOT_FOUND"}]}, status=404)


# The grants ACR's /oauth2/exchange takes for an AAD access token, with the fields each needs:
# ``access_token`` (current), and ``access_token_refresh_token`` (deprecated, but still accepted and
# what the upstream plugin sends, with the AAD token in both fields).
EXCHANGE_GRANTS = {
    "access_token": ("service", "access_token"),
    "access_token_refresh_token": ("service", "access_token", "refresh_token"),
}


def _valid_exchange(form: dict[str, str]) -> bool:
    needed = EXCHANGE_GRANTS.get(form.get("grant_type", ""))
    return needed is not None and all(form.get(name) for name in needed)


class _MultiHeaders(dict[str, str]):
    """Header mapping that can carry one name several times (``items`` yields each)."""

    def __init__(self, base: dict[str, str], name: str, values: list[str]) -> None:
        super().__init__(base)
        self.repeated = (name, values)

    def items(self):  # type: ignore[override]
        yield from super().items()
        name, values = self.repeated
        for value in values:
            yield name, value


def _with_repeated_header(response: FakeResponse, name: str, values: list[str]) -> FakeResponse:
    response.headers = _MultiHeaders(response.headers, name, values)
    return response


IB_SCOPE = "https://containerregistry.azure.net/.default"
IB_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


@dataclass
class FakeIdentityBindings:
    """AKS's identity-bindings endpoint (``POST /`` over TLS): a client-credentials request whose
    assertion is a service account token it was told of (``tokens``: token -> the client IDs it
    may act as) answers an Entra access token of that client. ``server_names``: the TLS server
    name each connection asked for (record it with :meth:`watch`)."""

    tokens: dict[str, set[str]] = field(default_factory=dict)
    requests: list[dict[str, str]] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)
    fault: FakeResponse | None = None

    def watch(self, context: Any) -> Any:
        """``context`` (the server's), recording the server name of each TLS handshake."""

        def seen(_socket: object, name: str | None, _context: object) -> None:
            self.server_names.append(name)

        context.sni_callback = seen
        return context

    def __call__(self, request: FakeRequest) -> FakeResponse:
        if request.method != "POST" or request.path != "/":
            return FakeResponse.json({"error": "not_found"}, status=404)
        form = request.form
        self.requests.append(form)
        if self.fault is not None:
            return self.fault
        if (
            form.get("grant_type") != "client_credentials"
            or form.get("client_assertion_type") != IB_ASSERTION_TYPE
            or form.get("scope") != IB_SCOPE
        ):
            return FakeResponse.json({"error": "invalid_request"}, status=400)
        client = form.get("client_id", "")
        if client not in self.tokens.get(form.get("client_assertion", ""), set()):
            return FakeResponse.json(
                {"error": "invalid_client", "error_description": "assertion not bound"},
                status=401,
            )
        return FakeResponse.json(
            {
                "access_token": make_jwt({"aud": "acr", "appid": client, "src": "ib"}),
                "expires_in": 3599,
                "token_type": "Bearer",
            }
        )

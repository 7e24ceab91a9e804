"""Stand-ins for the backends ``registry-credential-provider`` trades the pod's token at, each
checking the token as the real service does: its RS256 signature against the keys the issuer
publishes (OIDC discovery: ``/.well-known/openid-configuration``, then its ``jwks_uri``, fetched
over loopback by :class:`Verifier`), its ``iss``, audience, expiry and subject. Wire formats:
``docs/registries.md`` and the reference it cites.

* :class:`Issuer`: a cluster's service-account issuer (signs tokens, serves discovery and JWKS);
* :class:`FakeQuay`: robot federation (``GET /oauth2/federation/robot/token``, Basic
  ``robot:JWT``) and the RFC 8693 ``POST /sts/token``;
* :class:`FakeArtifactory`: ``POST /access/api/v1/oidc/token``;
* :class:`FakeCloudsmith`: ``POST /openid/<org>/`` (201);
* :class:`FakeVault`: ``POST /v1/auth/<mount>/login`` then ``GET /v1/<kv>/data/<path>``;
* :class:`FakeSecrets`: the API server's ``GET /api/v1/namespaces/<ns>/secrets/<name>`` as the
  token's service account, allowed where a Role would.

Each records its calls, keeps every credential it issued (``issued``: what the registry in front
of them accepts, and nothing else), and answers ``fault`` instead when one is set.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from emulators.http import FakeRequest, FakeResponse

DOCKERCONFIGJSON = "kubernetes.io/dockerconfigjson"
# What each service answers unauthenticated for its health (doctor's reachability check).
HEALTH_PATHS = ("/health/instance", "/access/api/v1/system/ping", "/v1/status/check/basic/",
                "/v1/sys/health", "/readyz")  # fmt: skip


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _part(value: object) -> str:
    return b64url(json.dumps(value, separators=(",", ":")).encode())


@dataclass
class Issuer:
    """A service-account issuer at ``url`` (set once its server runs): RS256 tokens, and the
    discovery document and JWKS a relying party reads (the handler)."""

    url: str = ""
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    kid: str = field(default_factory=lambda: secrets.token_hex(8))

    def token(
        self,
        namespace: str = "team",
        name: str = "puller",
        audience: str = "registry.example.test",
        expires_in: int = 3600,
        key: rsa.RSAPrivateKey | None = None,
    ) -> str:
        now = int(time.time())
        claims = {"iss": self.url, "sub": f"system:serviceaccount:{namespace}:{name}",
                  "aud": [audience], "exp": now + expires_in, "iat": now, "nbf": now,
                  "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name}}}  # fmt: skip
        signed = f"{_part({'alg': 'RS256', 'kid': self.kid})}.{_part(claims)}"
        signature = (key or self.key).sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signed}.{b64url(signature)}"

    def jwks(self) -> dict[str, Any]:
        numbers = self.key.public_key().public_numbers()

        def integer(value: int) -> str:
            return b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))

        return {"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": self.kid,
                          "n": integer(numbers.n), "e": integer(numbers.e)}]}  # fmt: skip

    def __call__(self, request: FakeRequest) -> FakeResponse:
        if request.path == "/.well-known/openid-configuration":
            return FakeResponse.json({"issuer": self.url, "jwks_uri": f"{self.url}/openid/v1/jwks",
                                      "id_token_signing_alg_values_supported": ["RS256"]})  # fmt: skip
        if request.path == "/openid/v1/jwks":
            return FakeResponse.json(self.jwks())
        return FakeResponse.text("not found", status=404)


@dataclass
class Verifier:
    """A relying party's check of a token: discovery at the token's issuer (only ``trusted``
    ones), its JWKS, the key named by ``kid``, RS256, then ``exp`` and the audience. With
    ``public_key`` (PEM) the issuer's key is configured instead of discovered (Vault's
    ``jwt_validation_pubkeys``, Harbor Next's offline keys): an issuer no backend can reach."""

    trusted: str  # the issuer URL this service is configured to trust
    public_key: str = ""

    def claims(self, token: str, audience: str | None = None) -> dict[str, Any] | None:
        try:
            header, payload, signature = token.split(".")
            head, claims = json.loads(_unb64url(header)), json.loads(_unb64url(payload))
        except ValueError:
            return None
        if head.get("alg") != "RS256" or claims.get("iss") != self.trusted:
            return None
        if self.public_key:
            from cryptography.hazmat.primitives.serialization import load_pem_public_key

            configured = load_pem_public_key(self.public_key.encode())
            assert isinstance(configured, rsa.RSAPublicKey)
            return self._checked(configured, header, payload, signature, claims, audience)
        with urllib.request.urlopen(f"{self.trusted}/.well-known/openid-configuration") as got:
            discovery = json.load(got)
        with urllib.request.urlopen(discovery["jwks_uri"]) as got:
            keys = json.load(got)["keys"]
        jwk = next((k for k in keys if k.get("kid") == head.get("kid")), None)
        if jwk is None:
            return None
        public = rsa.RSAPublicNumbers(
            int.from_bytes(_unb64url(jwk["e"]), "big"), int.from_bytes(_unb64url(jwk["n"]), "big")
        ).public_key()
        return self._checked(public, header, payload, signature, claims, audience)

    @staticmethod
    def _checked(
        public: rsa.RSAPublicKey,
        header: str,
        payload: str,
        signature: str,
        claims: dict[str, Any],
        audience: str | None,
    ) -> dict[str, Any] | None:
        try:
            public.verify(_unb64url(signature), f"{header}.{payload}".encode(),
                          padding.PKCS1v15(), hashes.SHA256())  # fmt: skip
        except Exception:
            return None
        if not isinstance(claims.get("exp"), int) or claims["exp"] < time.time():
            return None
        if audience is not None and audience not in claims.get("aud", []):
            return None
        return dict(claims)


def _oauth_error(error: str, status: int) -> FakeResponse:
    return FakeResponse.json({"error": error}, status)


def _jwt(subject: str, audience: str, lifetime: int) -> str:
    """A registry token as the services issue theirs (HS256 here: only its exp is read)."""
    now = int(time.time())
    claims = {"sub": subject, "aud": audience, "exp": now + lifetime, "iat": now,
              "jti": secrets.token_hex(8)}  # fmt: skip
    return f"{_part({'alg': 'HS256'})}.{_part(claims)}.{b64url(secrets.token_bytes(32))}"


@dataclass
class Backend:
    """What every stand-in shares: its calls, what it issued, a fault to answer instead."""

    verifier: Verifier
    calls: list[str] = field(default_factory=list)
    issued: set[str] = field(default_factory=set)
    fault: FakeResponse | None = None

    def __call__(self, request: FakeRequest) -> FakeResponse:
        if request.method == "GET" and request.path in HEALTH_PATHS:
            return FakeResponse.json({"status": "ok"})  # not a credential call
        self.calls.append(f"{request.method} {request.path}")
        if self.fault is not None:
            return self.fault
        return self.answer(request)

    def answer(self, request: FakeRequest) -> FakeResponse:
        raise NotImplementedError

    def issue(self, credential: str) -> str:
        self.issued.add(credential)
        return credential


@dataclass
class FakeQuay(Backend):
    """Robots' federation entries: robot -> (issuer, subject); tokens for ``hostname``."""

    robots: dict[str, tuple[str, str]] = field(default_factory=dict)
    hostname: str = "quay.example.test"
    audience: str = "quay.example.test"  # what the STS exchange's federation entries require

    def _robot_token(self, robot: str, token: str, audience: str | None) -> str | None:
        entry = self.robots.get(robot)
        claims = self.verifier.claims(token, audience)
        if entry is None or claims is None or entry != (claims["iss"], claims["sub"]):
            return None
        return self.issue(_jwt(robot, self.hostname, 3600))

    def answer(self, request: FakeRequest) -> FakeResponse:
        if request.method == "GET" and request.path == "/oauth2/federation/robot/token":
            scheme, _, value = request.header("authorization").partition(" ")
            if scheme != "Basic":
                return _oauth_error("No auth header", 401)
            robot, _, token = base64.b64decode(value).decode().partition(":")
            issued = self._robot_token(robot, token, None)
            return (FakeResponse.json({"token": issued}) if issued
                    else _oauth_error("Invalid robot", 401))  # fmt: skip
        if request.method == "POST" and request.path == "/sts/token":
            form = request.form
            if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
                return _oauth_error("unsupported_grant_type", 400)
            robot = form.get("resource", "").removeprefix("urn:quay:robot:")
            issued = self._robot_token(robot, form.get("subject_token", ""), self.audience)
            if issued is None:
                return _oauth_error("invalid_grant", 400)
            return FakeResponse.json({"access_token": issued, "token_type": "Bearer",
                                      "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                                      "expires_in": 3600, "scope": "repo:read"})  # fmt: skip
        return FakeResponse.text("not found", status=404)


@dataclass
class FakeArtifactory(Backend):
    """OIDC integrations: provider name -> (audience, {subject: username})."""

    providers: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    expires_in: int = 3600

    def answer(self, request: FakeRequest) -> FakeResponse:
        if (request.method, request.path) != ("POST", "/access/api/v1/oidc/token"):
            return FakeResponse.text("not found", status=404)
        body = request.json()
        provider = self.providers.get(body.get("provider_name", ""))
        if provider is None or body.get("subject_token_type") != (
            "urn:ietf:params:oauth:token-type:id_token"
        ):
            return FakeResponse.json({"errors": [{"status": 400, "message": "bad request"}]}, 400)
        audience, mappings = provider
        claims = self.verifier.claims(body.get("subject_token", ""), audience)
        username = mappings.get(claims["sub"]) if claims else None
        if username is None:
            message = "Failed to validate the token against the identity mappings"
            return FakeResponse.json({"errors": [{"status": 401, "message": message}]}, 401)
        token = self.issue(secrets.token_urlsafe(48))
        return FakeResponse.json({"access_token": token, "token_type": "Bearer",
                                  "expires_in": self.expires_in, "username": username,
                                  "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})  # fmt: skip


@dataclass
class FakeCloudsmith(Backend):
    """An organization's OIDC provider: service slug -> (audience, subject)."""

    org: str = "acme"
    services: dict[str, tuple[str, str]] = field(default_factory=dict)

    def answer(self, request: FakeRequest) -> FakeResponse:
        if (request.method, request.path) != ("POST", f"/openid/{self.org}/"):
            return FakeResponse.json({"detail": "Not found."}, 404)
        body = request.json()
        service = self.services.get(body.get("service_slug", ""))
        claims = self.verifier.claims(body.get("oidc_token", ""), service[0] if service else "")
        if service is None or claims is None or claims["sub"] != service[1]:
            return FakeResponse.json({"detail": "OIDC token cannot be authenticated"}, 401)
        return FakeResponse.json(
            {"token": self.issue(_jwt(body["service_slug"], "cloudsmith", 5400))}, 201
        )


@dataclass
class FakeVault(Backend):
    """Roles: (mount, role) -> (audience, namespace, service account name); KV v2 secrets:
    (kv mount, path) -> data, readable by any client token it issued."""

    roles: dict[tuple[str, str], tuple[str, str, str]] = field(default_factory=dict)
    kv: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    namespace: str = ""  # an Enterprise namespace every call must name, if set
    client_tokens: set[str] = field(default_factory=set)

    def answer(self, request: FakeRequest) -> FakeResponse:
        if self.namespace and request.header("x-vault-namespace") != self.namespace:
            return FakeResponse.json({"errors": ["permission denied"]}, 403)
        parts = request.path.split("/")
        if request.method == "POST" and parts[:3] == ["", "v1", "auth"] and parts[-1] == "login":
            body = request.json()
            role = self.roles.get(("/".join(parts[3:-1]), body.get("role", "")))
            claims = self.verifier.claims(body.get("jwt", ""), role[0] if role else "")
            if (
                role is None
                or claims is None
                or claims["sub"] != (f"system:serviceaccount:{role[1]}:{role[2]}")
            ):
                return FakeResponse.json({"errors": ["permission denied"]}, 403)
            client = "hvs." + secrets.token_urlsafe(24)
            self.client_tokens.add(client)
            return FakeResponse.json({"auth": {"client_token": client, "accessor": "a",
                                               "policies": ["pull"], "lease_duration": 3600,
                                               "renewable": True}})  # fmt: skip
        if request.method == "GET" and len(parts) > 4 and "data" in parts[3:]:
            if request.header("x-vault-token") not in self.client_tokens:
                return FakeResponse.json({"errors": ["permission denied"]}, 403)
            at = parts.index("data", 3)
            data = self.kv.get(("/".join(parts[2:at]), "/".join(parts[at + 1 :])))
            if data is None:
                return FakeResponse.json({"errors": []}, 404)
            self.issued.update(v for k, v in data.items() if "user" not in k)  # secrets only
            return FakeResponse.json({"data": {"data": data, "metadata": {"version": 1}},
                                      "lease_duration": 0})  # fmt: skip
        return FakeResponse.json({"errors": ["unsupported path"]}, 404)


def dockerconfigjson(auths: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """A ``kubernetes.io/dockerconfigjson`` Secret object: host -> (username, password)."""
    config = {"auths": {host: {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}
                        for host, (user, password) in auths.items()}}  # fmt: skip
    encoded = base64.b64encode(json.dumps(config).encode()).decode()
    return {"kind": "Secret", "apiVersion": "v1", "type": DOCKERCONFIGJSON,
            "data": {".dockerconfigjson": encoded}}  # fmt: skip


@dataclass
class FakeSecrets(Backend):
    """The API server's Secret reads: (namespace, name) -> Secret; ``readers``: the service
    accounts (namespace, name) a Role lets get Secrets in their namespace; ``audiences`` the API
    server accepts."""

    secrets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    readers: set[tuple[str, str]] = field(default_factory=set)
    audiences: tuple[str, ...] = ("https://kubernetes.default.svc",)

    def answer(self, request: FakeRequest) -> FakeResponse:
        parts = request.path.split("/")
        if len(parts) != 7 or parts[:4] != ["", "api", "v1", "namespaces"] or parts[5] != "secrets":
            return FakeResponse.json({"kind": "Status", "message": "not found"}, 404)
        namespace, name = parts[4], parts[6]
        scheme, _, token = request.header("authorization").partition(" ")
        claims = next(
            (c for a in self.audiences if (c := self.verifier.claims(token, a)) is not None), None
        ) if scheme == "Bearer" else None  # fmt: skip
        if claims is None:
            return FakeResponse.json({"kind": "Status", "message": "Unauthorized"}, 401)
        account = (
            claims["kubernetes.io"]["namespace"],
            claims["kubernetes.io"]["serviceaccount"]["name"],
        )
        if account[0] != namespace or account not in self.readers:
            message = (f'secrets "{name}" is forbidden: User "{claims["sub"]}" cannot get '
                       f'resource "secrets" in API group "" in the namespace "{namespace}"')  # fmt: skip
            return FakeResponse.json({"kind": "Status", "message": message}, 403)
        secret = self.secrets.get((namespace, name))
        if secret is None:
            return FakeResponse.json(
                {"kind": "Status", "message": f'secrets "{name}" not found'}, 404
            )
        config = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))
        for entry in config["auths"].values():
            self.issued.add(base64.b64decode(entry["auth"]).decode().partition(":")[2])
        return FakeResponse.json(secret)

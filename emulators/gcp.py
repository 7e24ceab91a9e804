"""Fakes of the GCE metadata server, Google STS, the OAuth token endpoint (service-account keys) and
the IAM Credentials API (impersonation), and a service-account key file for the OAuth one."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from emulators.http import FakeRequest, FakeResponse
from emulators.registry import Refused

METADATA_PREFIX = "/computeMetadata/v1/"


@dataclass
class FakeMetadata:
    """The GCE metadata server: the default service account (token, email, scopes, the recursive
    listing google-auth reads) and instance attributes.

    Like the real one it answers 403 without ``Metadata-Flavor: Google`` and 404 for unknown paths.
    """

    access_token: str = "ya29.node-access-token-0123456789"
    expires_in: int | None = 3599
    email: str = "123456789012-compute@developer.gserviceaccount.com"
    scopes: tuple[str, ...] = ("https://www.googleapis.com/auth/cloud-platform",)
    attributes: dict[str, str] = field(default_factory=dict)
    token_fault: FakeResponse | None = None
    paths: list[str] = field(default_factory=list)

    def __call__(self, request: FakeRequest) -> FakeResponse:
        self.paths.append(request.path)
        if request.header("metadata-flavor") != "Google":
            return FakeResponse.text("Missing Metadata-Flavor:Google header", status=403)
        headers = {"Metadata-Flavor": "Google"}
        path = request.path.removeprefix(METADATA_PREFIX)
        if path == "instance/service-accounts/default/token":
            if self.token_fault is not None:
                return self.token_fault
            body: dict[str, object] = {"access_token": self.access_token, "token_type": "Bearer"}
            if self.expires_in is not None:
                body["expires_in"] = self.expires_in
            return FakeResponse.json(body, headers=headers)
        account = {"aliases": ["default"], "email": self.email, "scopes": list(self.scopes)}
        if path == "instance/service-accounts/":
            return FakeResponse.text(f"default/\n{self.email}/\n", headers=headers)
        if path in (
            "instance/service-accounts/default/",
            f"instance/service-accounts/{self.email}/",
        ):
            if request.query.get("recursive") == ["true"]:
                return FakeResponse.json(account, headers=headers)
            return FakeResponse.text("aliases\nemail\nscopes\ntoken\n", headers=headers)
        if path == "instance/service-accounts/default/email":
            return FakeResponse.text(self.email, headers=headers)
        if path == "instance/service-accounts/default/scopes":
            return FakeResponse.text(
                "".join(f"{scope}\n" for scope in self.scopes), headers=headers
            )
        if path.startswith("instance/attributes/") and path.split("/")[-1] in self.attributes:
            return FakeResponse.text(self.attributes[path.split("/")[-1]], headers=headers)
        return FakeResponse.text("not found", status=404, headers=headers)


@dataclass
class FakeSts:
    """Google STS ``/v1/token`` (RFC 8693 token exchange, form-encoded as google-auth sends it)."""

    access_token: str = "ya29.federated-access-token-abcdef"
    expires_in: int = 3600
    fault: FakeResponse | None = None
    faults: list[FakeResponse] = field(default_factory=list)  # consumed one per call
    forms: list[dict[str, str]] = field(default_factory=list)

    def __call__(self, request: FakeRequest) -> FakeResponse:
        if request.method != "POST" or request.path != "/v1/token":
            return FakeResponse.json({"error": "not_found"}, status=404)
        self.forms.append(request.form)
        if self.faults:
            return self.faults.pop(0)
        if self.fault is not None:
            return self.fault
        return FakeResponse.json(
            {
                "access_token": self.access_token,
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                "token_type": "Bearer",
                "expires_in": self.expires_in,
            }
        )


@dataclass
class FakeOAuth:
    """``oauth2.googleapis.com/token`` for service-account keys (JWT bearer grant)."""

    access_token: str = "ya29.key-file-access-token-987654"
    forms: list[dict[str, str]] = field(default_factory=list)

    def __call__(self, request: FakeRequest) -> FakeResponse:
        self.forms.append(request.form)
        if request.form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return FakeResponse.json({"error": "unsupported_grant_type"}, status=400)
        return FakeResponse.json(
            {"access_token": self.access_token, "expires_in": 3599, "token_type": "Bearer"}
        )


NODE_ACCOUNT = FakeMetadata.email
IAM_PERMISSION = "iam.serviceAccounts.getAccessToken"
IAM_PREFIX = "/v1/projects/-/serviceAccounts/"
IAM_METHOD = ":generateAccessToken"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"


def google_error(code: int, status: str, message: str, **info: object) -> FakeResponse:
    """A Google API error body as the real APIs send it (with an ErrorInfo when ``info``)."""
    error: dict[str, object] = {"code": code, "message": message, "status": status}
    if info:
        error["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", **info}]
    return FakeResponse.json({"error": error}, status=code)


@dataclass
class FakeIamCredentials:
    """``iamcredentials.googleapis.com``'s ``generateAccessToken``, with the API's own checks.

    ``callers`` maps a bearer token to the principal it is of (the node's metadata token, a key
    file's, a federated one); ``grants`` holds (principal, account) pairs where the principal has
    roles/iam.serviceAccountTokenCreator on the account; ``accounts`` the service accounts that
    exist. The chain source → delegates… → target is walked link by link, as the API does: an
    account that does not exist is 404, a link not granted 403. ``disabled_project`` answers every
    call with the API's SERVICE_DISABLED 403. Each issued token is ``ya29.as-<account>-<n>``.
    """

    callers: dict[str, str] = field(default_factory=dict)
    grants: set[tuple[str, str]] = field(default_factory=set)
    accounts: set[str] = field(default_factory=set)
    disabled_project: str = ""
    lifetime_limit: int = 3600
    fault: FakeResponse | None = None
    faults: list[FakeResponse] = field(default_factory=list)  # consumed one per call
    calls: list[dict[str, object]] = field(default_factory=list)
    issued: dict[str, str] = field(default_factory=dict)  # token -> account

    def allow(self, principal: str, *chain: str) -> None:
        """Make ``chain`` exist and grant each link from ``principal`` along it."""
        for account in chain:
            self.accounts.add(account)
            self.grants.add((principal, account))
            principal = account

    def __call__(self, request: FakeRequest) -> FakeResponse:
        if not (request.path.startswith(IAM_PREFIX) and request.path.endswith(IAM_METHOD)):
            return google_error(404, "NOT_FOUND", "Method not found.")
        target = request.path.removeprefix(IAM_PREFIX).removesuffix(IAM_METHOD)
        bearer = request.header("authorization").removeprefix("Bearer ")
        try:
            body = json.loads(request.body or b"{}")
        except ValueError:
            return google_error(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        call = {"target": target, "bearer": bearer, **body}
        self.calls.append(call)
        if request.method != "POST":
            return google_error(405, "METHOD_NOT_ALLOWED", "Method not allowed.")
        if self.faults:
            return self.faults.pop(0)
        if self.fault is not None:
            return self.fault
        principal = self.callers.get(bearer)
        if principal is None:
            return google_error(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials. Expected OAuth 2 access token, "
                "login cookie or other valid authentication credential.",
                reason="ACCESS_TOKEN_TYPE_UNSUPPORTED",
                domain="googleapis.com",
            )
        if self.disabled_project:
            project = self.disabled_project
            return google_error(
                403,
                "PERMISSION_DENIED",
                f"IAM Service Account Credentials API has not been used in project {project} "
                "before or it is disabled. Enable it by visiting https://console.developers.google"
                f".com/apis/api/iamcredentials.googleapis.com/overview?project={project} then "
                "retry.",
                reason="SERVICE_DISABLED",
                domain="googleapis.com",
                metadata={
                    "service": "iamcredentials.googleapis.com",
                    "consumer": f"projects/{project}",
                },
            )
        scope = body.get("scope")
        if not isinstance(scope, list) or not scope:
            return google_error(400, "INVALID_ARGUMENT", "Scope required.")
        lifetime = str(body.get("lifetime", "3600s"))
        if not lifetime.endswith("s") or int(float(lifetime[:-1])) > self.lifetime_limit:
            return google_error(
                400,
                "INVALID_ARGUMENT",
                f"The lifetime must be at most {self.lifetime_limit}s.",
            )
        delegates = body.get("delegates") or []
        chain = []
        for delegate in delegates:
            if not str(delegate).startswith("projects/-/serviceAccounts/"):
                return google_error(
                    400, "INVALID_ARGUMENT", f"Invalid form of delegate: {delegate}"
                )
            chain.append(str(delegate).removeprefix("projects/-/serviceAccounts/"))
        for account in (*chain, target):
            if account not in self.accounts:
                return google_error(
                    404, "NOT_FOUND", f"Not found; Gaia id not found for email {account}"
                )
            if (principal, account) not in self.grants:
                return google_error(
                    403,
                    "PERMISSION_DENIED",
                    f"Permission '{IAM_PERMISSION}' denied on resource (or it may not exist).",
                    reason="IAM_PERMISSION_DENIED",
                    domain="iam.googleapis.com",
                    metadata={"permission": IAM_PERMISSION},
                )
            principal = account
        token = f"ya29.as-{target.split('@')[0]}-{len(self.issued)}"
        self.issued[token] = target
        expire = time.gmtime(time.time() + int(float(lifetime[:-1])))
        return FakeResponse.json(
            {"accessToken": token, "expireTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", expire)}
        )


def write_service_account_key(path: Path, token_uri: str) -> str:
    """A service-account key file at ``path`` with a fresh RSA key, whose tokens come from
    ``token_uri``; returns the key's PEM (a secret the plugin must never print)."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    from emulators.tls import key_pem

    pem = key_pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)).decode()
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "my-project",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": "puller@my-project.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": token_uri,
            }
        )
    )
    return pem


# What Container Registry and Artifact Registry take as the username of an access token, and the
# scopes that let a token read images.
REGISTRY_USERNAMES = ("oauth2accesstoken", "_token")
READ_SCOPES = (
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/cloud-platform.read-only",
    "https://www.googleapis.com/auth/devstorage.read_only",
    "https://www.googleapis.com/auth/devstorage.read_write",
    "https://www.googleapis.com/auth/devstorage.full_control",
)


@dataclass
class GoogleRegistries:
    """Which access tokens Google's registries take: the node's (metadata server) if its scopes
    let it read images, and each token the IAM Credentials API issued (scope cloud-platform)."""

    metadata: FakeMetadata
    iam: FakeIamCredentials

    def registry_identity(self, host: str, username: str, password: str) -> str:
        """The service account pulling from ``host`` with this basic auth; raises
        :class:`Refused` for another username, a token Google did not issue (another cloud's, an
        ID token for some audience) or one whose scopes cannot read images."""
        if username not in REGISTRY_USERNAMES:
            raise Refused(f"the username must be one of {', '.join(REGISTRY_USERNAMES)}")
        if password in self.iam.issued:
            return self.iam.issued[password]
        if password != self.metadata.access_token:
            raise Refused("not a Google OAuth 2.0 access token")
        if not set(self.metadata.scopes) & set(READ_SCOPES):
            raise Refused("the access token's scopes do not allow reading images")
        return self.metadata.email

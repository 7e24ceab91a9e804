"""Fakes of the GCE metadata server, Google STS and the OAuth token endpoint (service-account keys),
and a service-account key file for the last."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from emulators.http import FakeRequest, FakeResponse

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
    forms: list[dict[str, str]] = field(default_factory=list)

    def __call__(self, request: FakeRequest) -> FakeResponse:
        if request.method != "POST" or request.path != "/v1/token":
            return FakeResponse.json({"error": "not_found"}, status=404)
        self.forms.append(request.form)
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

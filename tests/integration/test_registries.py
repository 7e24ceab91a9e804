"""The registries of the real-runtime sandbox (emulators/registry.py with tests/e2e/registries.py)
take only credentials their cloud's emulator issued for them and that are still valid: each
refusal the e2e run relies on, request by request, as the registry answers it.

Credentials are issued by the emulators as the plugins get them (an ECR GetAuthorizationToken call,
an ACR exchange, the metadata server's token); the registry server behind the front is not needed
to tell a credential in from one out, so ``/v2/`` is asked.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from emulators.aws import NODE_KEY, PRIVATE_TARGET, PUBLIC_TARGET, FakeEcr
from emulators.azure import ACR_USERNAME, FakeAcr, FakeImds
from emulators.gcp import FakeIamCredentials, FakeMetadata, GoogleRegistries
from emulators.http import FakeRequest
from emulators.registry import RegistryFront, fingerprint
from tests.e2e.registries import hosts

ECR_WEST = "111122223333.dkr.ecr.us-west-2.amazonaws.com"
ECR_EAST = "111122223333.dkr.ecr.us-east-1.amazonaws.com"
IMAGES = [
    f"{ECR_WEST}/team/app:v1",
    f"{ECR_EAST}:443/team/app:v1",
    "public.ecr.aws/nginx/nginx:1.27",
    "contoso.azurecr.io/team/app:v1",
    "contoso.eastus.geo.azurecr.io/team/app:v1",
    "fabrikam.azurecr.io/team/app:v1",
    "gcr.io/team-project/app:v1",
    "us-central1-docker.pkg.dev/team-project/repo/app:v1",
    "quay.io/team/tool:v3",
]


def request(
    host: str, path: str = "/v2/", authorization: str = "", method: str = "GET"
) -> FakeRequest:
    headers = {"authorization": authorization} if authorization else {}
    return FakeRequest(method, path, {}, headers, b"", host)


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def ecr_token(ecr: FakeEcr, region: str, target: str = PRIVATE_TARGET) -> str:
    """A token as the plugin gets it: GetAuthorizationToken signed for ``region``."""
    scope = f"AWS4-HMAC-SHA256 Credential={NODE_KEY}/20261125/{region}/ecr/aws4_request"
    answer = ecr(
        FakeRequest("POST", "/", {}, {"x-amz-target": target, "authorization": scope}, b"{}", "ecr")
    )
    data: Any = json.loads(answer.body)["authorizationData"]
    token = (data[0] if isinstance(data, list) else data)["authorizationToken"]
    return base64.b64decode(token).decode().partition(":")[2]


def acr_refresh(acr: FakeAcr, registry: str, aad_token: str) -> str:
    form = f"grant_type=access_token&service={registry}&tenant=t&access_token={aad_token}"
    answer = acr(FakeRequest("POST", "/oauth2/exchange", {}, {}, form.encode(), registry))
    token: str = json.loads(answer.body)["refresh_token"]
    return token


@pytest.fixture
def clouds() -> dict[str, Any]:
    ecr, acr, imds = FakeEcr(rotate=True), FakeAcr(), FakeImds()
    metadata, iam = FakeMetadata(), FakeIamCredentials()
    google = GoogleRegistries(metadata, iam)
    checks = {
        "aws": ecr.registry_identity,
        "azure": acr.registry_identity,
        "gcp": google.registry_identity,
    }
    front = RegistryFront(hosts(IMAGES, checks, mirrors={"mirror.internal": ECR_EAST}))
    return {"front": front, "ecr": ecr, "acr": acr, "imds": imds, "metadata": metadata, "iam": iam}


def bearer(front: RegistryFront, host: str, token_path: str, username: str, password: str) -> int:
    """The bearer flow: the token endpoint with basic auth, then /v2/ with its token; the status
    of the first refusal, or of /v2/."""
    answer = front(request(host, token_path, basic(username, password)))
    if answer.status != 200:
        return answer.status
    token = json.loads(answer.body)["token"]
    return front(request(host, "/v2/", f"Bearer {token}")).status


def test_ecr_takes_its_tokens_for_their_region_until_they_expire(clouds: dict[str, Any]) -> None:
    front, ecr = clouds["front"], clouds["ecr"]
    west = ecr_token(ecr, "us-west-2")
    assert front(request(ECR_WEST, authorization=basic("AWS", west))).status == 200
    assert front(request(f"{ECR_EAST}:443", authorization=basic("AWS", west))).status == 401
    assert front(request(ECR_WEST, authorization=basic("AWS", "forged"))).status == 401
    assert front(request(ECR_WEST, authorization=basic("BWS", west))).status == 401
    unauthenticated = front(request(ECR_WEST))
    assert unauthenticated.status == 401
    assert unauthenticated.headers["Www-Authenticate"] == (
        f'Basic realm="https://{ECR_WEST}/",service="ecr.amazonaws.com"'
    )
    ecr.valid_seconds = 0.5
    short = ecr_token(ecr, "us-west-2")
    assert short != west
    assert front(request(ECR_WEST, authorization=basic("AWS", short))).status == 200
    time.sleep(0.6)
    assert front(request(ECR_WEST, authorization=basic("AWS", short))).status == 401
    notes = [(e.status, e.identity, e.credential, e.note) for e in front.log]
    assert notes[0] == (200, NODE_KEY, fingerprint(west), "")
    assert notes[1][3] == f"a token for us-west-2 is not valid at {ECR_EAST}"
    assert notes[-1][3] == "the authorization token has expired"


def test_ecr_public_takes_only_tokens_of_its_own_api(clouds: dict[str, Any]) -> None:
    front, ecr = clouds["front"], clouds["ecr"]
    public = ecr_token(ecr, "us-east-1", PUBLIC_TARGET)
    private = ecr_token(ecr, "us-east-1")
    assert bearer(front, "public.ecr.aws", "/token/", "AWS", public) == 200
    assert bearer(front, "public.ecr.aws", "/token/", "AWS", private) == 401
    assert front(request("public.ecr.aws", "/token/", method="POST")).status == 404


def test_acr_takes_a_refresh_token_only_at_its_own_registry(clouds: dict[str, Any]) -> None:
    front, acr, imds = clouds["front"], clouds["acr"], clouds["imds"]
    contoso = acr_refresh(acr, "contoso.azurecr.io", imds.identity("team-a-client"))
    fabrikam = acr_refresh(acr, "fabrikam.azurecr.io", imds.access_token)
    path = "/oauth2/token"
    assert bearer(front, "contoso.azurecr.io", path, ACR_USERNAME, contoso) == 200
    # the geo-replica is the same registry
    assert bearer(front, "contoso.eastus.geo.azurecr.io", path, ACR_USERNAME, contoso) == 200
    assert bearer(front, "contoso.azurecr.io", path, ACR_USERNAME, fabrikam) == 401
    assert bearer(front, "contoso.azurecr.io", path, "admin", contoso) == 401
    assert bearer(front, "fabrikam.azurecr.io", path, ACR_USERNAME, fabrikam) == 200
    # a registry token of one registry is not one of another
    token = json.loads(
        front(request("contoso.azurecr.io", path, basic(ACR_USERNAME, contoso))).body
    )["token"]
    assert front(request("fabrikam.azurecr.io", "/v2/", f"Bearer {token}")).status == 401
    assert {e.identity for e in front.log if e.status == 200} == {"team-a-client", "default"}
    # containerd's OAuth POST gets what ACR answers it (containerd then asks with GET)
    assert front(request("contoso.azurecr.io", path, method="POST")).status == 400
    acr.valid_seconds = -1
    expired = acr_refresh(acr, "contoso.azurecr.io", imds.access_token)
    assert bearer(front, "contoso.azurecr.io", path, ACR_USERNAME, expired) == 401
    assert front.log[-1].note == "the refresh token has expired"


def test_google_registries_take_access_tokens_that_may_read_images(clouds: dict[str, Any]) -> None:
    front, metadata, iam, acr = clouds["front"], clouds["metadata"], clouds["iam"], clouds["acr"]
    for host in ("gcr.io", "us-central1-docker.pkg.dev"):
        for username in ("oauth2accesstoken", "_token"):
            assert bearer(front, host, "/v2/token", username, metadata.access_token) == 200
    iam.issued["ya29.as-puller-0"] = "puller@p.iam.gserviceaccount.com"
    assert bearer(front, "gcr.io", "/v2/token", "_token", "ya29.as-puller-0") == 200
    # another cloud's token, an unknown one, a token whose scopes cannot read images
    refresh = acr_refresh(acr, "contoso.azurecr.io", clouds["imds"].access_token)
    assert bearer(front, "gcr.io", "/v2/token", "oauth2accesstoken", refresh) == 401
    assert bearer(front, "gcr.io", "/v2/token", "_json_key", metadata.access_token) == 401
    metadata.scopes = ("https://www.googleapis.com/auth/userinfo.email",)
    assert bearer(front, "gcr.io", "/v2/token", "_token", metadata.access_token) == 401
    assert front.log[-1].note == "the access token's scopes do not allow reading images"
    assert front(request("gcr.io", "/v2/token", method="POST")).status == 404


def test_a_registry_no_plugin_serves_refuses_everyone(clouds: dict[str, Any]) -> None:
    front, ecr = clouds["front"], clouds["ecr"]
    anonymous = front(request("quay.io"))
    assert anonymous.status == 401
    assert anonymous.headers["Www-Authenticate"].startswith('Bearer realm="https://quay.io/token"')
    token = ecr_token(ecr, "us-east-1")
    assert bearer(front, "quay.io", "/token", "AWS", token) == 401
    assert front(request("nowhere.example")).status == 404
    # a mirror asks as its registry does
    assert front(request("mirror.internal", authorization=basic("AWS", token))).status == 401

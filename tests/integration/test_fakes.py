"""The fakes behave like the services they stand for, checked with the real clients of those services
(botocore, google-auth, azure-identity) where one exists, and with the exact requests the upstream
plugins send where none does. A fake that is kinder than the real service would hide bugs."""

from __future__ import annotations

import base64
import datetime
import http.client
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from emulators.aws import FakeEcr
from emulators.azure import ACR_SCOPE, FakeAcr, FakeImds
from emulators.gcp import FakeMetadata
from emulators.http import FakeResponse, FakeServer, serve

# --- the shared server -----------------------------------------------------------------------------


def test_accepted_connections_send_without_delay() -> None:
    """TCP_NODELAY on every accepted connection, as real services set it: otherwise the second
    request on a kept-alive connection waits ~40 ms for the client's delayed ACK (Nagle)."""
    with serve(lambda request: FakeResponse.text("ok")) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        for _ in range(3):
            connection.request("GET", "/")
            assert connection.getresponse().read() == b"ok"
        connection.close()
    assert len(server.requests) == 3
    assert server.nodelay == [True, True, True]


def test_a_client_gone_before_its_request_is_no_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A connection reset before its request line (an exec killed at the end of a storm) is what
    clients do: the server says nothing, and the next client is served."""
    import socket
    import struct
    import time

    with serve(lambda request: FakeResponse.text("ok")) as server:
        gone = socket.create_connection(("127.0.0.1", server.port))
        gone.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        gone.close()  # a reset, not a FIN
        time.sleep(0.3)
        with urllib.request.urlopen(server.url, timeout=5) as answer:
            assert answer.read() == b"ok"
    assert "Traceback" not in capsys.readouterr().err


# --- ECR, with botocore ----------------------------------------------------------------------------


@pytest.fixture
def ecr_fake() -> Iterator[tuple[FakeEcr, FakeServer]]:
    fake = FakeEcr(secret_keys={"AKIDFIDELITY": "fidelity-secret"})
    with serve(fake) as server:
        yield fake, server


def _botocore_client(service: str, server: FakeServer, region: str) -> Any:
    import botocore.session

    session = botocore.session.Session()
    session.set_credentials("AKIDFIDELITY", "fidelity-secret")
    return session.create_client(service, region_name=region, endpoint_url=server.url)


@pytest.mark.parametrize(
    ("service", "region"),
    [
        ("ecr", "us-west-2"),
        ("ecr", "cn-north-1"),
        ("ecr", "us-gov-west-1"),
        ("ecr-public", "us-east-1"),
    ],
)
def test_botocore_reads_the_fake_ecr_answer(
    ecr_fake: tuple[FakeEcr, FakeServer], service: str, region: str
) -> None:
    fake, server = ecr_fake
    answer = _botocore_client(service, server, region).get_authorization_token()
    data = answer["authorizationData"]
    entry = data[0] if service == "ecr" else data
    token = base64.b64decode(entry["authorizationToken"]).decode()
    assert token == f"{fake.username}:{fake.password}"
    left = entry["expiresAt"] - datetime.datetime.now(datetime.UTC)
    assert datetime.timedelta(hours=11, minutes=59) < left <= datetime.timedelta(hours=12)
    (call,) = fake.calls
    assert (call.region, call.signature_valid) == (region, True)
    assert call.service == ("ecr-public" if service == "ecr-public" else "ecr")


def test_a_request_signed_for_no_region_is_refused_as_aws_does(
    ecr_fake: tuple[FakeEcr, FakeServer],
) -> None:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    fake, server = ecr_fake
    request = AWSRequest(
        method="POST",
        url=server.url + "/",
        data=b"{}",
        headers={
            "X-Amz-Target": "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken",
            "Content-Type": "application/x-amz-json-1.1",
        },
    )
    SigV4Auth(Credentials("AKIDFIDELITY", "fidelity-secret"), "ecr", "").add_auth(request)
    prepared = request.prepare()
    sent = urllib.request.Request(
        prepared.url, data=prepared.body, headers=dict(prepared.headers), method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(sent, timeout=5)
    assert refused.value.code == 400
    assert json.loads(refused.value.read()) == {
        "__type": "InvalidSignatureException",
        "message": "Credential should be scoped to a valid region, not ''. ",
    }
    assert [call.region for call in fake.calls] == [""]


# --- GCE metadata, with google-auth ----------------------------------------------------------------


@pytest.fixture
def metadata_fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeMetadata, FakeServer]]:
    from google.auth.compute_engine import _metadata

    fake = FakeMetadata()
    with serve(fake) as server:
        monkeypatch.setattr(_metadata, "_GCE_METADATA_HOST", server.address)
        yield fake, server


def test_google_auth_compute_engine_credentials_refresh_against_the_fake(
    metadata_fake: tuple[FakeMetadata, FakeServer],
) -> None:
    from google.auth.compute_engine import Credentials
    from google.auth.transport.requests import Request

    fake, _ = metadata_fake
    credentials = Credentials()
    credentials.refresh(Request())
    assert credentials.token == fake.access_token
    assert credentials.service_account_email == fake.email
    assert credentials.expiry is not None
    left = credentials.expiry - datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    assert datetime.timedelta(minutes=58) < left <= datetime.timedelta(seconds=3599)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("instance/service-accounts/default/email", FakeMetadata.email),
        ("instance/service-accounts/", f"default/\n{FakeMetadata.email}/\n"),
        (
            "instance/service-accounts/default/scopes",
            "https://www.googleapis.com/auth/cloud-platform\n",
        ),
    ],
)
def test_google_auth_reads_the_service_account_entries(
    metadata_fake: tuple[FakeMetadata, FakeServer], path: str, expected: str
) -> None:
    from google.auth.compute_engine import _metadata
    from google.auth.transport.requests import Request

    assert _metadata.get(Request(), path) == expected


def test_the_metadata_server_wants_its_header(
    metadata_fake: tuple[FakeMetadata, FakeServer],
) -> None:
    _, server = metadata_fake
    url = f"{server.url}/computeMetadata/v1/instance/service-accounts/default/email"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(url, timeout=5)
    assert refused.value.code == 403


# --- Azure IMDS, with azure-identity ---------------------------------------------------------------


def test_azure_identity_managed_identity_gets_the_fake_imds_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from azure.identity import ManagedIdentityCredential

    fake = FakeImds()
    with serve(fake) as server:
        monkeypatch.setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", server.url)
        credential = ManagedIdentityCredential(client_id="node-identity")
        token = credential.get_token(ACR_SCOPE)
    assert token.token == fake.access_token
    assert 3500 < token.expires_on - datetime.datetime.now(datetime.UTC).timestamp() <= 3600
    assert fake.queries[-1]["client_id"] == "node-identity"
    assert fake.queries[-1]["resource"] == "https://containerregistry.azure.net"


# --- ACR's token exchange: the forms the real clients send -----------------------------------------

AAD_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJhY3IifQ.c2ln"


@pytest.mark.parametrize(
    ("form", "accepted"),
    [
        # The upstream acr-credential-provider's form (Go url.Values, keys sorted).
        (
            {
                "access_token": AAD_TOKEN,
                "grant_type": "access_token_refresh_token",
                "refresh_token": AAD_TOKEN,
                "service": "contoso.azurecr.io",
                "tenant": "t",
            },
            True,
        ),
        # Ours, and what ACR's documentation gives as the current grant.
        (
            {
                "grant_type": "access_token",
                "service": "contoso.azurecr.io",
                "access_token": AAD_TOKEN,
            },
            True,
        ),
        (
            {"grant_type": "access_token_refresh_token", "service": "s", "access_token": AAD_TOKEN},
            False,
        ),
        ({"grant_type": "access_token", "access_token": AAD_TOKEN}, False),
        ({"grant_type": "password", "service": "s", "access_token": AAD_TOKEN}, False),
    ],
)
def test_the_acr_exchange_takes_the_grants_acr_takes(form: dict[str, str], accepted: bool) -> None:
    fake = FakeAcr()
    with serve(fake) as server:
        request = urllib.request.Request(
            f"{server.url}/oauth2/exchange",
            data=urlencode(form).encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                status, body = answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as refused:
            status, body = refused.code, json.loads(refused.read())
    if accepted:
        assert status == 200
        assert body == {"refresh_token": fake.refresh_tokens[0]}
    else:
        assert (status, body) == (400, {"errors": [{"code": "INVALID_GRANT"}]})


def test_tokens_issued_at_once_are_each_their_own() -> None:
    """The fake ECR answers each call in a thread of its own: tokens issued at the same moment for
    two regions got one rotated password, and the registry then refused the earlier region's
    pull (the real-runtime run's rare 401 under load). Each is its own now."""
    import threading

    from emulators.aws import PRIVATE_TARGET
    from emulators.http import FakeRequest

    fake = FakeEcr(rotate=True)
    regions = ["us-east-1", "eu-west-1", "ap-south-1", "us-west-2"] * 50
    start = threading.Barrier(len(regions))

    def issue(region: str) -> None:
        scope = f"AWS4-HMAC-SHA256 Credential=AKIDNODE/20261130/{region}/ecr/aws4_request"
        request = FakeRequest("POST", "/", {}, {"authorization": scope,
                                                "x-amz-target": PRIVATE_TARGET}, b"{}", "ecr")  # fmt: skip
        start.wait()
        answer = json.loads(fake(request).body)
        token = answer["authorizationData"][0]["authorizationToken"]
        password = base64.b64decode(token).decode().partition(":")[2]
        assert fake.registry_identity(f"1.dkr.ecr.{region}.amazonaws.com", "AWS", password)

    refused: list[BaseException] = []

    def issued_and_checked(region: str) -> None:
        try:
            issue(region)
        except BaseException as exc:  # gathered, failed below
            refused.append(exc)

    threads = [threading.Thread(target=issued_and_checked, args=(r,)) for r in regions]
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads change hands between any two lines
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switching)
    assert refused == [] and len(fake.issued) == len(regions), refused[:3]

"""The registry's challenge and the AAD-to-ACR token exchange, and Entra ID's failures."""

from __future__ import annotations

import pytest

from emulators.http import FakeResponse
from emulators.kubelet_exec import request_bytes
from emulators.ratelimit import TokenBucket
from tests.helpers import run_listing_imports
from tests.integration.azure.common import (
    PLUGIN,
    SECRET,
    assert_refresh_token_answer,
)
from tests.integration.conftest import Azure


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ({"challenge_status": 200}, "registry did not issue a valid AAD challenge, status: 200"),
        ({"challenge": []}, "challenge response does not contain header 'Www-Authenticate'"),
        (
            {"challenge": ['Basic realm="https://myreg.azurecr.io/"']},
            "Www-Authenticate: expected realm: Bearer, actual: basic",
        ),
        (
            {
                "challenge": [
                    'Bearer realm="https://myreg.azurecr.io/oauth2/token",service="a"',
                    'Bearer realm="https://myreg.azurecr.io/x",service="b"',
                ]
            },
            "registry did not issue a valid AAD challenge, authenticate header",
        ),
        (
            {"challenge": ['Bearer realm="https://myreg.azurecr.io/oauth2/token"']},
            'Www-Authenticate: missing header "service"',
        ),
        (
            {"challenge": ['Bearer service="myreg.azurecr.io"']},
            'Www-Authenticate: missing header "realm"',
        ),
        (
            {"challenge": ['Bearer realm="https://other.azurecr.io/oauth2/token",service="x"']},
            "is not on the registry myreg.azurecr.io: refusing to send an AAD token to another host",
        ),
        (
            {
                "challenge": [
                    'Bearer realm="https://myreg.azurecr.io@other.azurecr.io/t",service="x"'
                ]
            },
            "invalid realm",
        ),
        (
            {"challenge": ['Bearer realm="http://myreg.azurecr.io/oauth2/token",service="x"']},
            "invalid realm",
        ),
        (
            {
                "exchange_fault": FakeResponse.json(
                    {"errors": [{"code": "UNAUTHORIZED"}]}, status=401
                )
            },
            'failed with HTTP 401: {"errors": [{"code": "UNAUTHORIZED"}]}; the identity needs the '
            "AcrPull role on the registry",
        ),
        ({"exchange_fault": FakeResponse.json({"access_token": "x"})}, "returned no refresh_token"),
        (
            {"exchange_fault": FakeResponse.text("<html>gateway</html>")},
            "returned no refresh_token",
        ),
    ],
)
def test_challenge_and_exchange_errors(
    azure: Azure, setup: dict[str, object], message: str
) -> None:
    for name, value in setup.items():
        setattr(azure.acr, name, value)
    run = azure.run("myreg.azurecr.io/app", azure.config(useManagedIdentityExtension=True))
    assert (run.code, run.stdout) == (1, b"")
    assert len(run.error_lines) == 1
    assert message in run.error_lines[0]
    if "another host" in message or "invalid realm" in message:
        assert azure.acr.exchanges == []
    assert azure.imds.access_token not in run.stderr


def test_exchange_server_errors_are_retried(azure: Azure) -> None:
    azure.acr.exchange_faults = [
        FakeResponse.text("busy", status=503),
        FakeResponse.text("busy", status=429),
    ]
    run = azure.run("myreg.azurecr.io/app", azure.config(useManagedIdentityExtension=True))
    assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    assert len(azure.acr.exchanges) == 3


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (
            FakeResponse.json(
                {
                    "error": "invalid_client",
                    "error_description": "AADSTS7000215: Invalid client secret provided.",
                },
                status=401,
            ),
            "AADSTS7000215",
        ),
    ],
)
def test_aad_failure_is_an_error(azure: Azure, fault: FakeResponse, message: str) -> None:
    azure.aad.fault = fault
    run = azure.run(
        "myreg.azurecr.io/app",
        azure.config(tenantId="t", aadClientId="app", aadClientSecret=SECRET),
    )
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines[0].startswith(
        f"{PLUGIN}: error: could not get an AAD token with the service principal app (client secret): "
    )
    assert message in run.error_lines[0]
    assert SECRET not in run.stderr


def test_with_a_proxy_set_the_exchange_goes_through_requests(azure: Azure) -> None:
    """The stdlib client never uses a proxy: with a proxy variable set, requests makes the two
    registry calls (here NO_PROXY exempts the loopback registry, as a node would its own)."""
    config = azure.config(useManagedIdentityExtension=True)
    env = {**azure.env, "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "myreg.azurecr.io"}
    run = run_listing_imports(PLUGIN, request_bytes("myreg.azurecr.io/a"), [config, "-v=1"], env)
    assert run.code == 0
    assert run.response["auth"]["myreg.azurecr.io"]["password"] == azure.acr.refresh_tokens[-1]
    assert "requests" in run.roots
    direct = run_listing_imports(PLUGIN, request_bytes("myreg.azurecr.io/b"), [config], azure.env)
    assert direct.code == 0 and "requests" not in direct.roots


def test_a_throttled_exchange_waits_as_asked_and_is_answered(azure: Azure) -> None:
    """ACR's rate limit (a token bucket, 429 with Retry-After beyond it) with no token until
    a second has passed: the plugin waits at least the Retry-After it was given, not one of its
    own short retries, then gets its answer and says at -v=1 how long it waited."""
    azure.acr.bucket = TokenBucket.emptied_at_first_call(rate=1.0, burst=1.0)  # by another node
    azure.acr.retry_after = 1
    run = azure.run("myreg.azurecr.io/app", azure.config(useManagedIdentityExtension=True), "-v=2")
    assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    assert azure.acr.bucket.throttled >= 1
    assert len(azure.acr.exchanges) == azure.acr.bucket.throttled + 1
    assert "throttled (Retry-After 1s); retrying in 1.00s" in run.stderr
    assert f"throttled {azure.acr.bucket.throttled} time(s), waited " in run.stderr


def test_an_exchange_throttled_to_the_end_says_so(azure: Azure) -> None:
    """Throttled for the whole deadline: retried over it (not three times), one line at the end."""
    azure.acr.bucket = TokenBucket(rate=0.0, burst=0.0)
    azure.acr.retry_after = 1
    run = azure.run(
        "myreg.azurecr.io/app",
        azure.config(useManagedIdentityExtension=True),
        "--deadline=6s",
        "-v=1",
    )
    assert (run.code, run.stdout) == (1, b"")
    assert len(azure.acr.exchanges) > 3
    assert "and no time is left to wait for the service" in run.stderr
    assert "429" in run.error_lines[-1]


def test_a_throttled_entra_token_request_waits_and_is_answered(azure: Azure) -> None:
    """azure-identity's route follows the same policy: its pipeline retries no status itself, so
    a 429 from Entra ID is waited out over the deadline (Retry-After honoured), not given up
    after the SDK's two retries, and each wait is one call, not three."""
    azure.aad.bucket = TokenBucket.emptied_at_first_call(rate=1.0, burst=1.0)
    azure.aad.retry_after = 1
    run = azure.run(
        "myreg.azurecr.io/app",
        azure.config(tenantId="t", aadClientId="app", aadClientSecret=SECRET),
        "-v=2",
    )
    assert run.code == 0, run.stderr
    assert run.response["auth"]["myreg.azurecr.io"]["password"] == azure.acr.refresh_tokens[-1]
    assert azure.aad.bucket.throttled >= 1
    assert len(azure.aad.token_requests) == azure.aad.bucket.throttled + 1
    assert "Entra ID token request: throttled (Retry-After 1s); retrying in 1.00s" in run.stderr
    assert SECRET not in run.stderr


def test_an_entra_token_request_throttled_to_the_end_is_one_line(azure: Azure) -> None:
    """Throttled for the whole deadline: one call per wait (MSAL holds a throttled request back
    until its Retry-After, and our waits are never shorter), one line at the end."""
    azure.aad.bucket = TokenBucket(rate=0.0, burst=0.0)
    azure.aad.retry_after = 1
    run = azure.run(
        "myreg.azurecr.io/app",
        azure.config(tenantId="t", aadClientId="app", aadClientSecret=SECRET),
        "--deadline=5s",
        "-v=1",
    )
    assert (run.code, run.stdout) == (1, b"")
    assert len(azure.aad.token_requests) >= 3
    assert "and no time is left to wait for the service" in run.stderr
    assert run.error_lines[-1] == (
        f"{PLUGIN}: error: could not get an AAD token with the service principal app (client "
        "secret): Entra ID answered HTTP 429 (throttled); still throttled when the plugin's time "
        "ran out, the kubelet retries on the next pull"
    )
    assert SECRET not in run.stderr

"""The stdlib IMDS client's pure parts: which environments it serves, the URL, answer parsing."""

from __future__ import annotations

import pytest

from credprovider.azure.imds import (
    ARC_DEFAULT_ENDPOINT,
    ARC_KEY_DIR,
    AccessToken,
    ImdsError,
    arc_endpoint,
    arc_key_file,
    error_detail,
    parse_token_answer,
    serves,
    token_url,
)

RESOURCE = "https://containerregistry.azure.net"


@pytest.mark.parametrize(
    ("environ", "imds"),
    [
        ({}, True),
        ({"AZURE_POD_IDENTITY_AUTHORITY_HOST": "http://127.0.0.1:8080"}, True),
        ({"IDENTITY_ENDPOINT": ""}, True),
        ({"IDENTITY_ENDPOINT": "http://127.0.0.1:41741/msi/token", "IDENTITY_HEADER": "h"}, False),
        ({"IDENTITY_ENDPOINT": "http://localhost:40342", "IMDS_ENDPOINT": "http://x"}, False),
        ({"MSI_ENDPOINT": "http://localhost:50342/oauth2/token"}, False),
        ({"AZURE_FEDERATED_TOKEN_FILE": "/var/run/secrets/azure/tokens/token"}, False),
    ],
)
def test_imds_serves_only_where_azure_identity_would_ask_imds(
    environ: dict[str, str], imds: bool
) -> None:
    assert serves(environ) is imds


AGENT = "http://localhost:40342/metadata/identity/oauth2/token"


@pytest.mark.parametrize(
    ("environ", "himds", "endpoint"),
    [
        ({}, False, None),
        ({"IDENTITY_ENDPOINT": AGENT, "IMDS_ENDPOINT": "http://x"}, False, AGENT),
        ({"IDENTITY_ENDPOINT": AGENT, "IMDS_ENDPOINT": ""}, False, None),
        (
            {"IDENTITY_ENDPOINT": "http://x", "IMDS_ENDPOINT": "http://x", "IDENTITY_HEADER": "h"},
            False,
            None,
        ),
        # the agent installed, the kubelet passing no variable on: its fixed address (MSAL Go)
        ({}, True, ARC_DEFAULT_ENDPOINT),
        ({"IDENTITY_ENDPOINT": AGENT}, True, AGENT),
        ({"IDENTITY_ENDPOINT": AGENT, "IDENTITY_HEADER": "h"}, True, None),
        ({"MSI_ENDPOINT": "http://localhost:50342/oauth2/token"}, True, None),
        ({"AZURE_FEDERATED_TOKEN_FILE": "/var/run/secrets/azure/tokens/token"}, True, None),
    ],
)
def test_arc_is_asked_where_msal_would_ask_it(
    environ: dict[str, str], himds: bool, endpoint: str | None
) -> None:
    assert arc_endpoint(environ, himds) == endpoint


@pytest.mark.parametrize(
    ("challenge", "key_file"),
    [
        (f"Basic realm={ARC_KEY_DIR}/3f2a.key", f"{ARC_KEY_DIR}/3f2a.key"),
        ("basic realm=/etc/shadow", f"{ARC_KEY_DIR}/shadow.key"),
        ("Basic realm=../../../../root/.ssh/id_rsa.pub", f"{ARC_KEY_DIR}/id_rsa.key"),
        ("Basic realm=/var/opt/azcmagent/tokens/", None),
        ("Basic realm=a=b", None),
        ("Bearer realm=/x.key", None),
        ("", None),
    ],
)
def test_an_arc_challenge_names_a_key_file_only_in_the_agents_directory(
    challenge: str, key_file: str | None
) -> None:
    """As MSAL confines it: the realm's name only, in the agent's directory, ending ``.key``."""
    assert arc_key_file(challenge) == key_file


@pytest.mark.parametrize(
    ("environ", "selector", "url"),
    [
        (
            {},
            {},
            "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01"
            "&resource=https%3A%2F%2Fcontainerregistry.azure.net",
        ),
        (
            {"AZURE_POD_IDENTITY_AUTHORITY_HOST": "http://127.0.0.1:8080/"},
            {"client_id": "11111111-2222-3333-4444-555555555555"},
            "http://127.0.0.1:8080/metadata/identity/oauth2/token?api-version=2018-02-01"
            "&resource=https%3A%2F%2Fcontainerregistry.azure.net"
            "&client_id=11111111-2222-3333-4444-555555555555",
        ),
        (
            {},
            {"msi_res_id": "/subscriptions/s/resourceGroups/rg/providers/x/y"},
            "http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01"
            "&resource=https%3A%2F%2Fcontainerregistry.azure.net"
            "&msi_res_id=%2Fsubscriptions%2Fs%2FresourceGroups%2Frg%2Fproviders%2Fx%2Fy",
        ),
    ],
)
def test_token_url(environ: dict[str, str], selector: dict[str, str], url: str) -> None:
    assert token_url(environ, RESOURCE, selector) == url


@pytest.mark.parametrize(
    ("body", "token"),
    [
        (
            b'{"access_token": "ey.a", "expires_on": "1700003599", "expires_in": "3599"}',
            ("ey.a", 1700003599),
        ),
        (b'{"access_token": "ey.b", "expires_in": "60"}', ("ey.b", 1700000060)),
        (b'{"access_token": "ey.c", "expires_on": 1700000100}', ("ey.c", 1700000100)),
    ],
)
def test_token_answers(body: bytes, token: tuple[str, int]) -> None:
    assert parse_token_answer(body, now=1700000000.5) == AccessToken(*token)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>", "IMDS answered with invalid JSON"),
        (b"[]", "IMDS answered without an access_token"),
        (b'{"access_token": ""}', "IMDS answered without an access_token"),
        (b'{"access_token": 5}', "IMDS answered without an access_token"),
        (b'{"access_token": "t"}', "IMDS answered without a usable expires_on or expires_in"),
        (b'{"access_token": "t", "expires_on": "1.5e9"}', "IMDS answered without a usable"),
    ],
)
def test_unusable_token_answers(body: bytes, message: str) -> None:
    with pytest.raises(ImdsError, match=message):
        parse_token_answer(body, now=0)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (
            b'{"error": "invalid_request", "error_description": "Identity not found"}',
            "Identity not found",
        ),
        (b'{"error": "invalid_request"}', "invalid_request"),
        (b'{"error": 5}', '{"error": 5}'),
        (b"service\n  unavailable", "service unavailable"),
        (b"", ""),  # the caller says what stands in (a challenge, "an empty answer")
        (b" \r\n", ""),
    ],
)
def test_error_detail(body: bytes, detail: str) -> None:
    assert error_detail(body) == detail

"""The node's managed identity through IMDS: the stdlib client, what IMDS failures say, and the
real IMDS address never contacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from credprovider.runtime.advice import NOT_THE_SERVICE, RETRIES_NEXT_PULL
from emulators.http import FakeResponse
from emulators.kubelet_exec import request_bytes
from tests.helpers import run_listing_imports
from tests.integration.azure.common import (
    PLUGIN,
    assert_refresh_token_answer,
)
from tests.integration.conftest import Azure


def test_the_managed_identity_token_is_fetched_without_azure_identity(azure: Azure) -> None:
    """The common cache miss (node managed identity) does not load azure-identity, MSAL or crypto."""
    config = azure.config(useManagedIdentityExtension=True, userAssignedIdentityID="kubelet-id")
    run = run_listing_imports(PLUGIN, request_bytes("myreg.azurecr.io/a"), [config], azure.env)
    assert run.code == 0
    assert run.response["auth"]["myreg.azurecr.io"]["password"] == azure.acr.refresh_tokens[-1]
    assert azure.imds.queries[-1]["client_id"] == "kubelet-id"
    heavy = {
        "azure",
        "msal",
        "cryptography",
        "jwt",
        "requests",
        "urllib3",
        "charset_normalizer",
        "logging",
    }
    assert heavy.isdisjoint(run.roots), heavy.intersection(run.roots)


@pytest.mark.parametrize(
    ("fault", "detail", "attempts"),
    [
        (
            FakeResponse.json(
                {"error": "invalid_request", "error_description": "Identity not found"}, status=400
            ),
            "IMDS ({imds}) answered HTTP 400: Identity not found; check that this managed identity "
            "is assigned to the node (az vm identity show)",
            1,
        ),
        (
            FakeResponse.text("upgrading", status=410),
            "IMDS ({imds}) answered HTTP 410: upgrading; " + RETRIES_NEXT_PULL,
            3,
        ),
        (
            FakeResponse.json({"token_type": "Bearer"}),
            "IMDS answered without an access_token; " + NOT_THE_SERVICE,
            1,
        ),
        (
            FakeResponse.text("<html>proxy</html>"),
            "IMDS answered with invalid JSON; " + NOT_THE_SERVICE,
            1,
        ),
        (
            FakeResponse.json({"access_token": "t", "expires_on": "soon"}),
            "IMDS answered without a usable expires_on or expires_in; " + NOT_THE_SERVICE,
            1,
        ),
    ],
)
def test_imds_failures_say_what_imds_answered(
    azure: Azure, fault: FakeResponse, detail: str, attempts: int
) -> None:
    azure.imds.fault = fault
    run = azure.run("myreg.azurecr.io/app", azure.config(useManagedIdentityExtension=True))
    imds = azure.env["AZURE_POD_IDENTITY_AUTHORITY_HOST"] + "/metadata/identity/oauth2/token"
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines == [
        f"{PLUGIN}: error: could not get an AAD token with the system-assigned managed identity: "
        + detail.format(imds=imds)
    ]
    assert len(azure.imds.queries) == attempts  # IMDS answers 410 while it updates: retried


def test_imds_is_reached_directly_not_through_a_proxy(azure: Azure) -> None:
    proxies = {"HTTP_PROXY": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9"}
    run = azure.run(
        "myreg.azurecr.io/app", azure.config(useManagedIdentityExtension=True), env=proxies
    )
    assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    assert len(azure.imds.queries) == 1


def test_the_real_imds_address_is_never_contacted_by_tests(azure: Azure) -> None:
    """Without the override the client targets 169.254.169.254; test mode refuses the connect,
    and the run is in a network namespace of its own, so a broken guard could not reach it."""
    run = azure.run(
        "myreg.azurecr.io/app",
        azure.config(useManagedIdentityExtension=True),
        env={"AZURE_POD_IDENTITY_AUTHORITY_HOST": ""},
        own_network=True,
    )
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines[0].startswith(
        f"{PLUGIN}: error: could not get an AAD token with the system-assigned managed identity: "
        "IMDS (http://169.254.169.254/metadata/identity/oauth2/token) did not answer: "
    )
    assert "blocked connection to non-loopback address 169.254.169.254" in run.error_lines[0]
    assert azure.imds.queries == []


@pytest.mark.parametrize("host", ["http://[::1", "http://imds:99999", "ftp://imds"])
def test_an_imds_address_that_names_no_address_says_to_fix_it(azure: Azure, host: str) -> None:
    """AZURE_POD_IDENTITY_AUTHORITY_HOST that no request can go to is the setting's fault."""
    run = azure.run(
        "myreg.azurecr.io/app",
        azure.config(useManagedIdentityExtension=True),
        env={"AZURE_POD_IDENTITY_AUTHORITY_HOST": host},
    )
    assert (run.code, run.stdout) == (1, b"")
    (line,) = run.error_lines
    assert "cannot be asked: " in line, line
    assert line.endswith("; fix AZURE_POD_IDENTITY_AUTHORITY_HOST in the provider's env"), line
    assert azure.imds.queries == []


def test_other_managed_identity_sources_are_left_to_azure_identity(azure: Azure) -> None:
    """With App Service's IDENTITY_ENDPOINT set, azure-identity picks the source (not IMDS)."""
    env = {"IDENTITY_ENDPOINT": "http://127.0.0.1:9/msi/token", "IDENTITY_HEADER": "h"}
    run = azure.run("myreg.azurecr.io/app", azure.config(useManagedIdentityExtension=True), env=env)
    assert (run.code, run.stdout) == (1, b"")
    prefix = (
        f"{PLUGIN}: error: could not get an AAD token with the system-assigned managed identity: "
    )
    assert run.error_lines[0].startswith(prefix)
    assert not run.error_lines[0].removeprefix(prefix).startswith("IMDS")
    assert azure.imds.queries == []


def test_imds_without_identity_is_an_error(azure: Azure) -> None:
    azure.imds.fault = FakeResponse.json(
        {"error": "invalid_request", "error_description": "Identity not found"}, status=400
    )
    run = azure.run("myreg.azurecr.io/app", azure.config(useManagedIdentityExtension=True))
    assert run.code == 1
    assert "could not get an AAD token with the system-assigned managed identity" in run.stderr


def test_tls_keys_are_never_written_where_sslkeylogfile_says(azure: Azure, tmp_path: Path) -> None:
    """The stdlib client's TLS (the ACR exchange), as requests' (tests/integration/gcp): Python's
    ssl wrote every session's keys to SSLKEYLOGFILE."""
    keys = tmp_path / "keys.log"
    config = azure.config(useManagedIdentityExtension=True)
    run = azure.run("myreg.azurecr.io/app", config, env={"SSLKEYLOGFILE": str(keys)})
    assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    assert not keys.exists()

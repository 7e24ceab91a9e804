"""acr-credential-provider against fakes of Azure IMDS, Entra ID (AAD) and an ACR registry: every
identity azure.json or a service account can name.

The node's managed identity token comes from the project's stdlib IMDS client (found through
azure-identity's ``AZURE_POD_IDENTITY_AUTHORITY_HOST``); the real azure-identity/MSAL code runs for
every other identity, with AAD and the registry over TLS (test CA via ``REQUESTS_CA_BUNDLE``) under
their real host names, mapped to loopback by ``CREDPROVIDER_TEST_RESOLVE``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12

from emulators.tls import CertAuthority, key_pem, self_signed
from tests.integration.azure.common import (
    PLUGIN,
    SA_TOKEN,
    SECRET,
    assert_refresh_token_answer,
)
from tests.integration.conftest import Azure


@pytest.mark.parametrize(
    ("settings", "query"),
    [
        ({}, {}),
        (
            {"userAssignedIdentityID": "11111111-2222-3333-4444-555555555555"},
            {"client_id": "11111111-2222-3333-4444-555555555555"},
        ),
        (
            {
                "userAssignedIdentityID": "/subscriptions/s/resourceGroups/rg/providers/"
                "Microsoft.ManagedIdentity/userAssignedIdentities/kubelet"
            },
            {
                "msi_res_id": "/subscriptions/s/resourceGroups/rg/providers/"
                "Microsoft.ManagedIdentity/userAssignedIdentities/kubelet"
            },
        ),
    ],
)
def test_managed_identity(azure: Azure, settings: dict[str, str], query: dict[str, str]) -> None:
    config = azure.config(
        useManagedIdentityExtension=True,
        tenantId="tenant-1",
        aadClientId="msi",
        aadClientSecret="msi",
        **settings,
    )
    run = azure.run("myreg.azurecr.io/team/app", config)
    assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    assert azure.imds.queries == [
        {"api-version": "2018-02-01", "resource": "https://containerregistry.azure.net", **query}
    ]
    ((host, form),) = azure.acr.exchanges
    assert host.startswith("myreg.azurecr.io")
    assert form == {
        "grant_type": "access_token",
        "service": "myreg.azurecr.io",
        "access_token": azure.imds.access_token,
        "tenant": "tenant-1",
    }
    assert azure.aad.token_requests == []


def test_managed_identity_through_the_bundle(azure: Azure, use_bundle: bool) -> None:
    run = azure.run(
        "myreg.azurecr.io/app",
        azure.config(useManagedIdentityExtension=True),
        "-v=6",
        use_bundle=use_bundle,
    )
    assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    for secret in (azure.imds.access_token, azure.acr.refresh_tokens[-1]):
        assert secret not in run.stderr


@pytest.mark.parametrize(
    ("cloud", "image", "authority"),
    [
        ("AzurePublicCloud", "myreg.azurecr.io/app", "login.microsoftonline.com"),
        ("", "myreg.azurecr.io/app", "login.microsoftonline.com"),
        ("AzureChinaCloud", "myreg.azurecr.cn/app", "login.chinacloudapi.cn"),
        ("AzureUSGovernmentCloud", "myreg.azurecr.us/app", "login.microsoftonline.us"),
        ("azureusgovernment", "myreg.azurecr.us/app", "login.microsoftonline.us"),
    ],
)
def test_service_principal_secret_in_every_cloud(
    azure: Azure, cloud: str, image: str, authority: str, use_bundle: bool
) -> None:
    config = azure.config(
        cloud=cloud, tenantId="tenant-2", aadClientId="app-id", aadClientSecret=SECRET
    )
    run = azure.run(image, config, "-v=6", use_bundle=use_bundle)
    assert_refresh_token_answer(azure, run, image.split("/")[0])
    ((host, tenant, form),) = azure.aad.token_requests
    assert (host, tenant) == (authority, "tenant-2")
    assert form["grant_type"] == "client_credentials"
    assert form["client_id"] == "app-id" and form["client_secret"] == SECRET
    assert form["scope"] == "https://containerregistry.azure.net/.default"
    # The long-lived secret never leaves the plugin: the runtime gets an ACR refresh token.
    assert SECRET not in run.stdout.decode() and SECRET not in run.stderr
    assert azure.acr.exchanges[0][1]["access_token"] == azure.aad.access_token


def _certificate(directory: Path, password: bytes | None) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = self_signed(key, "kubelet-sp")
    if password is None:
        path = directory / "sp.pem"
        path.write_bytes(key_pem(key) + cert.public_bytes(serialization.Encoding.PEM))
    else:
        path = directory / "sp.pfx"
        path.write_bytes(
            pkcs12.serialize_key_and_certificates(
                b"sp", key, cert, None, serialization.BestAvailableEncryption(password)
            )
        )
    return path


@pytest.mark.parametrize("password", [None, b"pfx-password-123"])
def test_service_principal_certificate(azure: Azure, password: bytes | None) -> None:
    cert = _certificate(azure.directory, password)
    config = azure.config(
        tenantId="tenant-3",
        aadClientId="app-id",
        aadClientCertPath=str(cert),
        aadClientCertPassword=password.decode() if password else "",
    )
    run = azure.run("myreg.azurecr.io/app", config, "-v=6")
    assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    ((_, tenant, form),) = azure.aad.token_requests
    assert tenant == "tenant-3"
    assert form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    assert form["client_assertion"].count(".") == 2
    if password:
        assert password.decode() not in run.stderr


def test_unreadable_certificate_is_an_error(azure: Azure) -> None:
    config = azure.config(
        tenantId="t", aadClientId="a", aadClientCertPath=str(azure.directory / "none.pem")
    )
    run = azure.run("myreg.azurecr.io/app", config)
    assert (run.code, run.stdout) == (1, b"")
    assert "cannot load the client certificate" in run.error_lines[0]


def test_workload_identity_token_file(azure: Azure) -> None:
    token_file = azure.directory / "token"
    token_file.write_text(SA_TOKEN)
    config = azure.config(
        tenantId="tenant-4",
        aadClientId="wi-app",
        aadFederatedTokenFile=str(token_file),
        useFederatedWorkloadIdentityExtension=True,
    )
    run = azure.run("myreg.azurecr.io/app", config)
    assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    ((_, tenant, form),) = azure.aad.token_requests
    assert (tenant, form["client_id"], form["client_assertion"]) == ("tenant-4", "wi-app", SA_TOKEN)


def test_a_ca_directory_verifies_entra_id_and_the_registry(
    azure: Azure, test_ca: CertAuthority, tmp_path: Path
) -> None:
    """REQUESTS_CA_BUNDLE naming a directory as update-ca-certificates leaves one (the
    certificate and its hash link): azure-identity's requests and the exchange on the stdlib,
    which reads the directory itself (runtime/tls.py), both verify with it."""
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "test-ca.pem").write_bytes(test_ca.bundle.read_bytes())
    done = subprocess.run(
        ["openssl", "x509", "-noout", "-subject_hash", "-in", str(test_ca.bundle)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    (certs / f"{done.stdout.strip()}.0").symlink_to("test-ca.pem")
    config = azure.config(tenantId="tenant-2", aadClientId="app-id", aadClientSecret=SECRET)
    run = azure.run("myreg.azurecr.io/app", config, env={"REQUESTS_CA_BUNDLE": str(certs)})
    assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    assert len(azure.aad.token_requests) == 1 and len(azure.acr.exchanges) == 1


@pytest.mark.parametrize("identity", ["service principal", "workload identity"])
def test_an_entra_id_it_cannot_reach_says_what_to_check(azure: Azure, identity: str) -> None:
    """azure-identity's refused connection (its ClientAuthenticationError from azure-core's
    transport error) names the authority host and what to check, as every unreachable service's
    line does."""
    token_file = azure.directory / "token"
    token_file.write_text(SA_TOKEN)
    credentials: dict[str, object] = (
        {"aadClientSecret": SECRET}
        if identity == "service principal"
        else {"aadFederatedTokenFile": str(token_file)}
    )
    config = azure.config(tenantId="tenant-4", aadClientId="app-id", **credentials)
    resolve = ",".join(
        "login.microsoftonline.com=127.0.0.1:9"
        if entry.startswith("login.microsoftonline")
        else entry
        for entry in azure.env["CREDPROVIDER_TEST_RESOLVE"].split(",")
    )
    run = azure.run("myreg.azurecr.io/app", config, env={"CREDPROVIDER_TEST_RESOLVE": resolve})
    assert (run.code, run.stdout) == (1, b"")
    [line] = run.error_lines
    assert "could not get an AAD token with " in line, line
    assert "check that login.microsoftonline.com is reachable from this node" in line, line
    # the OS's reason, not the transport's layers of repr (HTTPSConnectionPool(host=...) ...)
    assert ": ConnectionRefusedError: [Errno 111] Connection refused; check that" in line, line
    assert "HTTPSConnectionPool" not in line
    assert SECRET not in run.stderr and SA_TOKEN not in run.stderr
    assert azure.aad.token_requests == [] and azure.acr.exchanges == []


SA_ANNOTATIONS = {
    "kubernetes.azure.com/acr-client-id": "pod-app-id",
    "kubernetes.azure.com/acr-tenant-id": "pod-tenant",
}


def test_service_account_token_uses_the_annotated_identity(azure: Azure, use_bundle: bool) -> None:
    config = azure.config(useManagedIdentityExtension=True, tenantId="node-tenant")
    run = azure.run(
        "myreg.azurecr.io/app",
        config,
        token=SA_TOKEN,
        annotations=SA_ANNOTATIONS,
        use_bundle=use_bundle,
    )
    assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    ((host, tenant, form),) = azure.aad.token_requests
    assert (host, tenant, form["client_id"], form["client_assertion"]) == (
        "login.microsoftonline.com",
        "pod-tenant",
        "pod-app-id",
        SA_TOKEN,
    )
    assert azure.imds.queries == []
    assert azure.acr.exchanges[0][1]["tenant"] == "pod-tenant"
    assert SA_TOKEN not in run.stderr


def test_service_account_token_without_annotations_uses_the_node_identity(azure: Azure) -> None:
    run = azure.run(
        "myreg.azurecr.io/app", azure.config(useManagedIdentityExtension=True), token=SA_TOKEN
    )
    assert run.code == 0
    assert len(azure.imds.queries) == 1 and azure.aad.token_requests == []


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {"kubernetes.azure.com/acr-client-id": "x"},
            "tenant id annotation kubernetes.azure.com/acr-tenant-id is not found or the value is empty",
        ),
        (
            {"kubernetes.azure.com/acr-tenant-id": "t", "kubernetes.azure.com/acr-client-id": ""},
            "client id annotation kubernetes.azure.com/acr-client-id is not found or the value is empty",
        ),
    ],
)
def test_incomplete_service_account_annotations_are_errors(
    azure: Azure, annotations: dict[str, str], message: str
) -> None:
    run = azure.run(
        "myreg.azurecr.io/app",
        azure.config(useManagedIdentityExtension=True),
        token=SA_TOKEN,
        annotations=annotations,
    )
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines == [
        f"{PLUGIN}: error: failed to get service account token credential for image "
        f"myreg.azurecr.io/app: {message}"
    ]
    assert azure.imds.queries == []

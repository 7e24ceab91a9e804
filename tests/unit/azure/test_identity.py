"""Which credential the ACR plugin picks (azure.identities.choose_identity), in process: the pod's
service account when its annotations name one, else azure.json's workload identity, managed
identity, client secret or certificate, in that order. Real azure-identity objects are built (no
call is made: building one reaches nothing)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from credprovider.azure.cloudconfig import parse_cloud_config
from credprovider.azure.identities import choose_identity
from credprovider.azure.registry import CLOUDS
from credprovider.errors import ProviderError
from credprovider.runtime.api import CredentialProviderRequest
from credprovider.runtime.deadline import Deadline
from credprovider.runtime.log import Logger
from credprovider.runtime.provider import Context

IMAGE = "contoso.azurecr.io/team/app"
ANNOTATED = {
    "kubernetes.azure.com/acr-client-id": "pod-client",
    "kubernetes.azure.com/acr-tenant-id": "pod-tenant",
}
BASE = {"cloud": "AzurePublicCloud", "tenantId": "node-tenant", "aadClientId": "node-client"}


def _choose(settings: dict[str, object], token: str = "", annotations: dict[str, str] | None = None,
            environ: dict[str, str] | None = None) -> tuple[str, str, str]:  # fmt: skip
    config = parse_cloud_config(json.dumps(settings), "azure.json")
    request = CredentialProviderRequest(
        IMAGE, "credentialprovider.kubelet.k8s.io/v1", token, annotations or {}
    )
    log = io.StringIO()
    ctx = Context(Deadline(30.0), Logger("acr-credential-provider", 1, log), environ or {})
    identity = choose_identity(request, config, CLOUDS["azurepubliccloud"], ctx)
    return identity.description, type(identity.credential).__name__, identity.tenant


@pytest.mark.parametrize(
    ("settings", "description", "credential", "tenant"),
    [
        ({**BASE, "aadClientSecret": "s3cret-value"},
         "the service principal node-client (client secret)", "ClientSecretCredential", "node-tenant"),
        ({**BASE, "aadFederatedTokenFile": "/var/run/token"},
         "workload identity (client id node-client, token file /var/run/token)",
         "ClientAssertionCredential", "node-tenant"),
        # workload identity wins over a client secret, managed identity over the secret too
        ({**BASE, "aadFederatedTokenFile": "/var/run/token", "aadClientSecret": "s3cret-value"},
         "workload identity (client id node-client, token file /var/run/token)",
         "ClientAssertionCredential", "node-tenant"),
        ({**BASE, "useManagedIdentityExtension": True, "aadClientSecret": "s3cret-value"},
         "the system-assigned managed identity", "ImdsCredential", "node-tenant"),
        ({**BASE, "useManagedIdentityExtension": True, "userAssignedIdentityID": "mi-client"},
         "the managed identity with client id mi-client", "ImdsCredential", "node-tenant"),
    ],
)  # fmt: skip
def test_the_node_identity_follows_azure_json(
    settings: dict[str, object], description: str, credential: str, tenant: str, tmp_path: Path
) -> None:
    """(The workload identity's token is read as the identity is chosen, by the node-file
    reader, and given to azure-identity as the assertion its WorkloadIdentityCredential reads.)"""
    token_file = tmp_path / "token"
    token_file.write_text("eyJ.token.sig")
    settings = {k: str(token_file) if v == "/var/run/token" else v for k, v in settings.items()}
    description = description.replace("/var/run/token", str(token_file))
    assert _choose(settings) == (description, credential, tenant)


def test_a_managed_identity_served_by_another_source_goes_through_azure_identity() -> None:
    """IMDS is reached on the stdlib (the node case); any other managed-identity source (App
    Service, Arc, Cloud Shell ...) is left to azure-identity, which knows them."""
    settings = {**BASE, "useManagedIdentityExtension": True}
    description, credential, _ = _choose(
        settings, environ={"IDENTITY_ENDPOINT": "http://127.0.0.1:9/msi/token"}
    )
    assert (description, credential) == (
        "the system-assigned managed identity",
        "ManagedIdentityCredential",
    )


def test_an_annotated_service_account_wins_and_brings_its_tenant() -> None:
    chosen = _choose({**BASE, "aadClientSecret": "s3cret-value"}, "eyJ.token.sig", ANNOTATED)
    assert chosen == (
        "the service account token (client id pod-client, tenant pod-tenant)",
        "ClientAssertionCredential",
        "pod-tenant",
    )


def test_a_service_account_without_annotations_uses_the_node_identity() -> None:
    chosen = _choose({**BASE, "aadClientSecret": "s3cret-value"}, "eyJ.token.sig", {})
    assert chosen[1] == "ClientSecretCredential"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tenantId": "t"}, "configures no credentials"),
        ({"tenantId": "t", "aadClientSecret": "s3cret-value"}, "missing aadClientId"),
        ({"aadClientId": "c", "aadFederatedTokenFile": "/t"}, "missing tenantId"),
        ({**BASE, "aadClientCertPath": "/nonexistent/cert.pfx"}, "cannot load the client certificate"),
    ],
)  # fmt: skip
def test_what_cannot_be_used_is_said(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ProviderError, match=message):
        _choose(settings)

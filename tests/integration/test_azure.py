"""acr-credential-provider against fakes of Azure IMDS, Entra ID (AAD) and an ACR registry.

The node's managed identity token comes from the project's stdlib IMDS client (found through
azure-identity's ``AZURE_POD_IDENTITY_AUTHORITY_HOST``); the real azure-identity/MSAL code runs for
every other identity, with AAD and the registry over TLS (test CA via ``REQUESTS_CA_BUNDLE``) under
their real host names, mapped to loopback by ``CREDPROVIDER_TEST_RESOLVE``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from credprovider.goformat import parse_go_duration
from credprovider.matching import keyring_lookup
from tests.fakes.azure import make_jwt
from tests.fakes.http import FakeResponse, serve
from tests.helpers import request_bytes, run_listing_imports, run_plugin
from tests.integration.conftest import STACK_AUTHORITY_HOST, Azure

PLUGIN = "acr-credential-provider"
NULL_GUID = "00000000-0000-0000-0000-000000000000"
SA_TOKEN = make_jwt(
    {"sub": "system:serviceaccount:apps:puller", "aud": ["api://AzureADTokenExchange"]}
)
SECRET = "sp-client-secret-value-0123456789"


def _assert_refresh_token_answer(azure: Azure, run, key: str) -> None:  # type: ignore[no-untyped-def]
    response = run.response
    assert response["cacheKeyType"] == "Registry"
    assert response["auth"] == {
        key: {"username": NULL_GUID, "password": azure.acr.refresh_tokens[-1]}
    }
    # The refresh token lives 3h: half of its remaining validity.
    assert 5390 <= parse_go_duration(response["cacheDuration"]) / 1e9 <= 5400


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
    _assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
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
    _assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
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
    _assert_refresh_token_answer(azure, run, image.split("/")[0])
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
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubelet-sp")])
    import datetime

    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    if password is None:
        path = directory / "sp.pem"
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
            + cert.public_bytes(serialization.Encoding.PEM)
        )
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
    _assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
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
    _assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    ((_, tenant, form),) = azure.aad.token_requests
    assert (tenant, form["client_id"], form["client_assertion"]) == ("tenant-4", "wi-app", SA_TOKEN)


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
    _assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
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


def test_azure_stack_cloud_from_the_environment_file(azure: Azure) -> None:
    environment = azure.directory / "stack.json"
    environment.write_text(
        json.dumps(
            {
                "name": "AzureStackCloud",
                "activeDirectoryEndpoint": f"https://{STACK_AUTHORITY_HOST}/",
                "containerRegistryDNSSuffix": ".azurecr.my.cloud",
                "resourceManagerEndpoint": "https://management.stack.local/",
            }
        )
    )
    config = azure.config(
        cloud="AzureStackCloud", tenantId="stack-tenant", aadClientId="a", aadClientSecret=SECRET
    )
    run = azure.run(
        "myreg.azurecr.my.cloud/app", config, env={"AZURE_ENVIRONMENT_FILEPATH": str(environment)}
    )
    _assert_refresh_token_answer(azure, run, "myreg.azurecr.my.cloud")
    assert azure.aad.token_requests[0][0] == STACK_AUTHORITY_HOST


def test_cloud_discovered_from_resource_manager_metadata(azure: Azure) -> None:
    metadata = [
        {
            "name": "AzureStackCloud",
            "authentication": {
                "loginEndpoint": f"https://{STACK_AUTHORITY_HOST}/",
                "audiences": ["https://management.stack.local/"],
            },
            "suffixes": {"acrLoginServer": "azurecr.my.cloud"},
        }
    ]
    with serve(lambda _: FakeResponse.json(metadata)) as arm:
        config = azure.config(
            cloud="AzureStackCloud",
            resourceManagerEndpoint=arm.url,
            tenantId="t",
            aadClientId="a",
            aadClientSecret=SECRET,
        )
        run = azure.run("myreg.azurecr.my.cloud/app", config)
        assert [r.path for r in arm.requests] == ["/metadata/endpoints"]
    _assert_refresh_token_answer(azure, run, "myreg.azurecr.my.cloud")
    assert azure.aad.token_requests[0][0] == STACK_AUTHORITY_HOST


@pytest.mark.parametrize(
    ("image", "key"),
    [
        ("myreg-abc123.azurecr.io/app", "myreg-abc123.azurecr.io"),
        ("myreg.eastus.geo.azurecr.io/app", "myreg.eastus.geo.azurecr.io"),
        ("myreg.azurecr.io:443/app", "myreg.azurecr.io:443"),
    ],
)
def test_login_server_forms_and_port(azure: Azure, image: str, key: str) -> None:
    run = azure.run(image, azure.config(useManagedIdentityExtension=True))
    _assert_refresh_token_answer(azure, run, key)
    assert keyring_lookup(list(run.response["auth"]), image) == [key]


@pytest.mark.parametrize(
    "image",
    [
        "myreg.azurecr.io.evil.net/app",
        "docker.io/myreg.azurecr.io/app",
        "evil.com/myreg.azurecr.io/x",
        "myreg.azurecr.io.azurecr.cn/x",
        "mcr.microsoft.com/oss/nginx",
        "myreg.eastus.data.azurecr.io/x",
        "xn--myreg-9ya.azurecr.io/x",
    ],
)
def test_non_acr_images_get_an_empty_answer_without_any_request(azure: Azure, image: str) -> None:
    run = azure.run(image, azure.config(useManagedIdentityExtension=True))
    assert run.response == {
        "kind": "CredentialProviderResponse",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "cacheKeyType": "Registry",
        "cacheDuration": "0s",
    }
    assert azure.imds.queries == [] and azure.acr.exchanges == []


@pytest.mark.parametrize(
    "settings",
    [
        {"useManagedIdentityExtension": True},
        {"tenantId": "t", "aadClientId": "a", "aadClientSecret": SECRET},
    ],
)
def test_registry_mirror_in_every_mode(azure: Azure, settings: dict[str, object]) -> None:
    config = azure.config(**settings)
    mirror = "--registry-mirror=mcr.microsoft.com:myreg.azurecr.io,ghcr.io:other.azurecr.io"
    run = azure.run("mcr.microsoft.com/oss/nginx/nginx", config, mirror)
    response = run.response
    token = azure.acr.refresh_tokens[-1]
    assert response["auth"] == {
        "mcr.microsoft.com": {"username": NULL_GUID, "password": token},
        "myreg.azurecr.io": {"username": NULL_GUID, "password": token},
    }
    assert azure.acr.exchanges[0][1]["service"] == "myreg.azurecr.io"
    assert keyring_lookup(list(response["auth"]), "mcr.microsoft.com/oss/nginx/nginx") == [
        "mcr.microsoft.com"
    ]


def test_mirror_source_is_matched_on_the_host_boundary(azure: Azure) -> None:
    run = azure.run(
        "mcr.microsoft.com.evil.net/x",
        azure.config(useManagedIdentityExtension=True),
        "-r",
        "mcr.microsoft.com:myreg.azurecr.io",
    )
    assert "auth" not in run.response
    assert azure.acr.exchanges == []


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
    _assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
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


@pytest.mark.parametrize(
    ("fault", "detail", "attempts"),
    [
        (
            FakeResponse.json(
                {"error": "invalid_request", "error_description": "Identity not found"}, status=400
            ),
            "IMDS ({imds}) answered HTTP 400: Identity not found (is this managed identity "
            "assigned to the node?)",
            1,
        ),
        (
            FakeResponse.text("upgrading", status=410),
            "IMDS ({imds}) answered HTTP 410: upgrading",
            3,
        ),
        (FakeResponse.json({"token_type": "Bearer"}), "IMDS answered without an access_token", 1),
        (FakeResponse.text("<html>proxy</html>"), "IMDS answered with invalid JSON", 1),
        (
            FakeResponse.json({"access_token": "t", "expires_on": "soon"}),
            "IMDS answered without a usable expires_on or expires_in",
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
    _assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
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


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read the cloud config {path}: No such file or directory"),
        ("{not json: [", "is neither JSON"),
        (
            '{"useManagedIdentityExtension": "yes"}',
            "useManagedIdentityExtension must be true or false",
        ),
        ('["a"]', "must hold a JSON object of settings"),
        ('{"tenantId": "t"}', "the cloud config configures no credentials"),
        ("", "the cloud config configures no credentials"),
        (
            '{"aadClientSecret": "x"}',
            "the cloud config is missing tenantId, aadClientId for this auth mode",
        ),
        (
            '{"cloud": "AzureMarsCloud", "useManagedIdentityExtension": true}',
            "unknown cloud 'AzureMarsCloud'",
        ),
        (
            '{"cloud": "AzureStackCloud", "useManagedIdentityExtension": true}',
            "cloud AzureStackCloud needs AZURE_ENVIRONMENT_FILEPATH",
        ),
    ],
)
def test_cloud_config_errors_name_the_file_and_the_problem(
    azure: Azure, content: str | None, message: str
) -> None:
    path = azure.directory / "azure.json"
    if content is not None:
        path.write_text(content)
    run = azure.run("myreg.azurecr.io/app", str(path))
    assert (run.code, run.stdout) == (1, b"")
    assert len(run.error_lines) == 1
    assert message.format(path=path) in run.error_lines[0]


def test_yaml_cloud_config_with_any_key_case(azure: Azure) -> None:
    path = azure.directory / "azure.yaml"
    path.write_text("# node config\nUSEMANAGEDIDENTITYEXTENSION: true\nTenantID: yaml-tenant\n")
    run = azure.run("myreg.azurecr.io/app", str(path))
    _assert_refresh_token_answer(azure, run, "myreg.azurecr.io")
    assert azure.acr.exchanges[0][1]["tenant"] == "yaml-tenant"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "config file is not specified"),
        (
            ["a.json", "b.json"],
            "expected exactly one argument (config file); Got arguments: [a.json b.json]",
        ),
        (
            ["a.json", "--ib-sni-name", "https://x"],
            "--ib-sni-name must not contain protocol prefix (https:// or http://), got: https://x",
        ),
        (
            ["a.json", "--ib-sni-name", "ib.example"],
            "--ib-apiserver-ip must be set when --ib-sni-name is provided",
        ),
        (
            ["a.json", "--ib-default-client-id", "c"],
            "--ib-sni-name must be set when --ib-default-client-id is provided",
        ),
        (
            ["a.json", "--ib-default-tenant-id", "t"],
            "--ib-sni-name must be set when --ib-default-tenant-id is provided",
        ),
        (
            ["a.json", "--ib-apiserver-ip", "10.0.0.1"],
            "--ib-sni-name must be set when --ib-apiserver-ip is provided",
        ),
        (
            ["a.json", "--ib-sni-name", "ib.example", "--ib-apiserver-ip", "10.0.0.1"],
            "AKS identity bindings (--ib-sni-name) are not supported by this plugin",
        ),
        (["a.json", "--registry-mirror", "mcr.microsoft.com"], "is not source:target"),
    ],
)
def test_command_line_errors(args: list[str], message: str) -> None:
    run = run_plugin(PLUGIN, request_bytes("myreg.azurecr.io/app"), args)
    assert (run.code, run.stdout) == (1, b"")
    assert message in run.error_lines[0]


def test_a_misspelt_azure_json_key_is_a_warning(azure: Azure) -> None:
    config = azure.config(useManagedIdentityExtension=True, userAssignedIdentityIDD="kubelet-id")
    run = azure.run("myreg.azurecr.io/app", config)
    assert run.code == 0
    warnings = [
        line
        for line in run.stderr.splitlines()
        if ": warning: " in line and "test mode" not in line
    ]
    assert warnings == [
        f"{PLUGIN}: warning: {config}: ignoring unknown key 'userAssignedIdentityIDD': did you mean "
        "'userAssignedIdentityID'?"
    ]

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credprovider.azure.cloudconfig import parse_cloud_config
from credprovider.azure.registry import (
    CLOUDS,
    AzureConfigError,
    ChallengeError,
    cloud_from_metadata,
    cloud_from_name,
    exchange_url,
    login_server_suffix,
    parse_challenge,
    parse_registry_mirrors,
    service_account_identity,
)
from credprovider.runtime.answer import jwt_expiry
from emulators.azure import make_jwt

PUBLIC = CLOUDS["azurepubliccloud"]


@pytest.mark.parametrize(
    ("host", "suffix"),
    [
        ("myreg.azurecr.io", "azurecr.io"),
        ("MyReg.AzureCR.io", "azurecr.io"),
        ("myreg.azurecr.cn", "azurecr.cn"),
        ("myreg.azurecr.de", "azurecr.de"),
        ("myreg.azurecr.us", "azurecr.us"),
        ("myreg-abc123def.azurecr.io", "azurecr.io"),
        ("myreg.eastus.geo.azurecr.io", "azurecr.io"),
        ("myreg-h4sh.westeurope.geo.azurecr.io", "azurecr.io"),
        ("myreg.azurecr.io.example", None),
        ("foo.azurecr.io.azurecr.cn", None),
        ("azurecr.io", None),
        (".azurecr.io", None),
        ("my_reg.azurecr.io", None),
        ("my--reg.azurecr.io", None),
        ("-myreg.azurecr.io", None),
        ("myreg-.azurecr.io", None),
        ("a.b.azurecr.io", None),
        ("myreg.eastus.data.azurecr.io", None),
        ("myreg.azurecr.io\n", None),
        ("myrеg.azurecr.io", None),
        ("myreg.azurecr.my.cloud", None),
    ],
)
def test_login_servers(host: str, suffix: str | None) -> None:
    assert login_server_suffix(host, PUBLIC) == suffix


def test_custom_cloud_suffix() -> None:
    stack = cloud_from_name(
        "AzureStackCloud",
        json.dumps(
            {
                "activeDirectoryEndpoint": "https://login.stack/",
                "containerRegistryDNSSuffix": ".azurecr.my.cloud",
            }
        ),
    )
    assert (stack.authority_host, stack.registry_suffix) == (
        "https://login.stack",
        "azurecr.my.cloud",
    )
    assert login_server_suffix("myreg.azurecr.my.cloud", stack) == "azurecr.my.cloud"
    assert login_server_suffix("myreg.azurecr.io", stack) == "azurecr.io"
    assert login_server_suffix("myreg.azurecr.my.cloud.evil", stack) is None


@pytest.mark.parametrize(
    ("name", "authority", "suffix"),
    [
        ("", "https://login.microsoftonline.com", "azurecr.io"),
        ("AzurePublicCloud", "https://login.microsoftonline.com", "azurecr.io"),
        (" azurecloud ", "https://login.microsoftonline.com", "azurecr.io"),
        ("AzureChinaCloud", "https://login.chinacloudapi.cn", "azurecr.cn"),
        ("AZUREUSGOVERNMENTCLOUD", "https://login.microsoftonline.us", "azurecr.us"),
        ("AzureUSGovernment", "https://login.microsoftonline.us", "azurecr.us"),
    ],
)
def test_clouds(name: str, authority: str, suffix: str) -> None:
    cloud = cloud_from_name(name)
    assert (cloud.authority_host, cloud.registry_suffix) == (authority, suffix)


@pytest.mark.parametrize(
    ("name", "environment", "message"),
    [
        ("AzureMarsCloud", None, "unknown cloud 'AzureMarsCloud'"),
        ("AzureStackCloud", None, "needs AZURE_ENVIRONMENT_FILEPATH"),
        ("AzureStackCloud", "{", "not valid JSON"),
        ("AzureStackCloud", '{"activeDirectoryEndpoint": "http://x"}', "are required"),
    ],
)
def test_cloud_errors(name: str, environment: str | None, message: str) -> None:
    with pytest.raises(AzureConfigError, match=message):
        cloud_from_name(name, environment)


def test_cloud_from_metadata_picks_the_named_environment() -> None:
    answer = json.dumps(
        [
            {
                "name": "AzureCloud",
                "authentication": {"loginEndpoint": "https://login.microsoftonline.com/"},
                "suffixes": {"acrLoginServer": "azurecr.io"},
            },
            {
                "name": "AzureStack",
                "authentication": {"loginEndpoint": "https://adfs.stack/adfs/"},
                "suffixes": {"acrLoginServer": "azurecr.stack"},
            },
        ]
    )
    assert cloud_from_metadata(answer, "azurestack").registry_suffix == "azurecr.stack"
    assert cloud_from_metadata(answer, "").registry_suffix == "azurecr.io"
    with pytest.raises(AzureConfigError):
        cloud_from_metadata('[{"name": "x"}]', "x")


@pytest.mark.parametrize(
    ("header", "realm", "service"),
    [
        (
            'Bearer realm="https://r.azurecr.io/oauth2/token",service="r.azurecr.io"',
            "https://r.azurecr.io/oauth2/token",
            "r.azurecr.io",
        ),
        (
            "bearer realm=https://r.azurecr.io/oauth2/token,service=r.azurecr.io",
            "https://r.azurecr.io/oauth2/token",
            "r.azurecr.io",
        ),
        (
            'Bearer service="r.azurecr.io", realm="https://r.azurecr.io/t", scope="a,b"',
            "https://r.azurecr.io/t",
            "r.azurecr.io",
        ),
        ('BEARER realm="https://r/\\"q\\"",service="s"', 'https://r/"q"', "s"),
    ],
)
def test_parse_challenge(header: str, realm: str, service: str) -> None:
    challenge = parse_challenge(401, [header])
    assert (challenge.realm, challenge.service) == (realm, service)


@pytest.mark.parametrize(
    ("status", "headers", "message"),
    [
        (200, [], "status: 200"),
        (401, [], "does not contain header 'Www-Authenticate'"),
        (401, ["Bearer realm=a,service=b", "Bearer realm=c,service=d"], "authenticate header"),
        (401, ["Basic realm=x"], "expected realm: Bearer, actual: basic"),
        (401, ["Bearer"], 'missing header "service"'),
        (401, ['Bearer realm="unterminated,service=x'], "unable to understand"),
        (401, ["Bearer realm=x"], 'missing header "service"'),
        (401, ["Bearer service=x"], 'missing header "realm"'),
    ],
)
def test_parse_challenge_errors(status: int, headers: list[str], message: str) -> None:
    with pytest.raises(ChallengeError, match=message.replace("(", r"\(")):
        parse_challenge(status, headers)


@given(st.text(max_size=60))
def test_parse_challenge_raises_only_challenge_error(header: str) -> None:
    with contextlib.suppress(ChallengeError):
        parse_challenge(401, [header])


@pytest.mark.parametrize(
    ("realm", "login", "url"),
    [
        (
            "https://r.azurecr.io/oauth2/token",
            "r.azurecr.io",
            "https://r.azurecr.io/oauth2/exchange",
        ),
        (
            "https://R.AZURECR.IO:443/oauth2/token",
            "r.azurecr.io",
            "https://r.azurecr.io/oauth2/exchange",
        ),
        (
            "https://r.azurecr.io/oauth2/token",
            "r.azurecr.io:443",
            "https://r.azurecr.io:443/oauth2/exchange",
        ),
    ],
)
def test_exchange_url_on_the_registry(realm: str, login: str, url: str) -> None:
    assert exchange_url(realm, login) == url


@pytest.mark.parametrize(
    "realm",
    [
        "https://evil.net/oauth2/token",
        "https://r.azurecr.io.evil.net/t",
        "http://r.azurecr.io/t",
        "https://r.azurecr.io@evil.net/t",
        "https://r.azurecr.io:8443/t",
        "r.azurecr.io/t",
        "https://evil.net/r.azurecr.io",
    ],
)
def test_exchange_url_refuses_other_hosts(realm: str) -> None:
    with pytest.raises(ChallengeError):
        exchange_url(realm, "r.azurecr.io")


@pytest.mark.parametrize(
    ("token", "expiry"),
    [
        (make_jwt({"exp": 1800000000}), 1800000000.0),
        (make_jwt({"exp": 1.5}), 1.5),
        (make_jwt({"iat": 1}), None),
        (make_jwt({"exp": "soon"}), None),
        (make_jwt({"exp": True}), None),
        ("opaque-token", None),
        ("a.!!!.c", None),
        ("a.bm90IGpzb24.c", None),
    ],
)
def test_jwt_expiry(token: str, expiry: float | None) -> None:
    assert jwt_expiry(token) == expiry


@pytest.mark.parametrize(
    ("value", "mirrors"),
    [
        ("", {}),
        ("mcr.microsoft.com:xxx.azurecr.io", {"mcr.microsoft.com": "xxx.azurecr.io"}),
        (
            " a.io : b.azurecr.io , C.io:D.azurecr.io ",
            {"a.io": "b.azurecr.io", "c.io": "d.azurecr.io"},
        ),
    ],
)
def test_parse_registry_mirrors(value: str, mirrors: dict[str, str]) -> None:
    assert parse_registry_mirrors(value) == mirrors


@pytest.mark.parametrize("value", ["a.io", "a.io:", ":b.azurecr.io", "a.io:5000:b.azurecr.io"])
def test_bad_registry_mirrors(value: str) -> None:
    with pytest.raises(ValueError, match="is not source:target"):
        parse_registry_mirrors(value)


def test_service_account_identity() -> None:
    assert service_account_identity({}) is None
    identity = service_account_identity(
        {"kubernetes.azure.com/acr-client-id": "c", "kubernetes.azure.com/acr-tenant-id": "t"}
    )
    assert identity is not None and (identity.client_id, identity.tenant_id) == ("c", "t")
    with pytest.raises(ValueError, match="tenant id annotation"):
        service_account_identity({"kubernetes.azure.com/acr-client-id": "c"})


def test_cloud_config_keys_are_case_insensitive_and_extra_keys_ignored() -> None:
    config = parse_cloud_config(
        json.dumps(
            {
                "TENANTID": "t",
                "aadclientid": "c",
                "UseManagedIdentityExtension": True,
                "userAssignedIdentityID": "/SUBSCRIPTIONS/s/x",
                "subscriptionId": "ignored",
                "vmType": "vmss",
            }
        ),
        "azure.json",
    )
    assert (config.tenantId, config.aadClientId, config.useManagedIdentityExtension) == (
        "t",
        "c",
        True,
    )
    assert config.user_assigned_is_resource_id


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "must hold a JSON object"),
        ('{"tenantId": 5}', "tenantId must be a string"),
        ('{"useManagedIdentityExtension": "true"}', "must be true or false"),
        ("key: [unclosed", "neither JSON"),
    ],
)
def test_cloud_config_errors(text: str, message: str) -> None:
    with pytest.raises(AzureConfigError, match=message):
        parse_cloud_config(text, "azure.json")


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        (["useManagedIdentityExtention"], [("useManagedIdentityExtention", "useManagedIdentityExtension")]),
        (["userAssignedIdentityId", "UseManagedIdentityExtension"], []),  # case differs only: read
        (["aadClientSecrect", "tenantID"], [("aadClientSecrect", "aadClientSecret")]),
        (["tennantId"], [("tennantId", "tenantId")]),
        (["aadClientCertPasword"], [("aadClientCertPasword", "aadClientCertPassword")]),
        # cloud-provider-azure's own settings are not misspellings of ours
        (["subscriptionId", "resourceGroup", "location", "vmType", "subnetName", "securityGroupName",
          "vnetName", "routeTableName", "loadBalancerSku", "useInstanceMetadata",
          "networkResourceTenantID", "aadMSIDataPlaneIdentityPath", "cloudProviderBackoff"], []),
    ],
)  # fmt: skip
def test_near_misses(keys: list[str], expected: list[tuple[str, str]]) -> None:
    from credprovider.azure.cloudconfig import near_misses

    assert near_misses(keys) == expected


def test_one_warning_names_every_near_miss() -> None:
    from credprovider.azure.cloudconfig import parse_cloud_config_with_notes

    text = '{"useManagedIdentityExtention": true, "tennantId": "x", "subscriptionId": "s"}'
    config, notes = parse_cloud_config_with_notes(text, "/etc/kubernetes/azure.json")
    assert config.useManagedIdentityExtension is False  # the misspelt key was not read
    assert notes == [
        "/etc/kubernetes/azure.json: ignoring unknown key 'useManagedIdentityExtention': did you "
        "mean 'useManagedIdentityExtension'?; unknown key 'tennantId': did you mean 'tenantId'?"
    ]

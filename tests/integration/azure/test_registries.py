"""Which images get ACR credentials and under which keys: clouds (Azure Stack, discovered from
Resource Manager), login server forms, non-ACR images, registry mirrors."""

from __future__ import annotations

import json

import pytest

from credprovider.runtime.matching import keyring_lookup
from emulators.http import FakeResponse, serve
from tests.integration.azure.common import (
    NULL_GUID,
    SECRET,
    assert_refresh_token_answer,
)
from tests.integration.conftest import STACK_AUTHORITY_HOST, Azure


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
    assert_refresh_token_answer(azure, run, "myreg.azurecr.my.cloud")
    assert azure.aad.token_requests[0][0] == STACK_AUTHORITY_HOST


STACK_METADATA = [
    {
        "name": "AzureStackCloud",
        "authentication": {
            "loginEndpoint": f"https://{STACK_AUTHORITY_HOST}/",
            "audiences": ["https://management.stack.local/"],
        },
        "suffixes": {"acrLoginServer": "azurecr.my.cloud"},
    }
]


def stack_config(azure: Azure, arm_url: str) -> str:
    return azure.config(
        cloud="AzureStackCloud",
        resourceManagerEndpoint=arm_url,
        tenantId="t",
        aadClientId="a",
        aadClientSecret=SECRET,
    )


def test_cloud_discovered_from_resource_manager_metadata(azure: Azure) -> None:
    answers = [FakeResponse.text("busy", status=503), FakeResponse.json(STACK_METADATA)]
    with serve(lambda _: answers.pop(0)) as arm:
        run = azure.run("myreg.azurecr.my.cloud/app", stack_config(azure, arm.url))
        # a 503 is retried, as every plugin-made call is (the transport seam)
        assert [r.path for r in arm.requests] == ["/metadata/endpoints"] * 2
    assert_refresh_token_answer(azure, run, "myreg.azurecr.my.cloud")
    assert azure.aad.token_requests[0][0] == STACK_AUTHORITY_HOST


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            FakeResponse.text("down", status=500),
            "reading cloud endpoints from {url}/metadata/endpoints?api-version=2019-05-01 failed "
            "with HTTP 500",
        ),
        (FakeResponse.json({"name": "x"}), "cloud endpoints from {url}/metadata/endpoints"),
        (
            FakeResponse(body=b"[" * (64 << 20)),
            "could not read cloud endpoints from {url}/metadata/endpoints",
        ),
    ],
    ids=["http-500-after-retries", "not-the-metadata", "oversized"],
)
def test_resource_manager_metadata_that_cannot_be_used(
    azure: Azure, answer: FakeResponse, message: str
) -> None:
    with serve(lambda _: answer) as arm:
        run = azure.run("myreg.azurecr.my.cloud/app", stack_config(azure, arm.url))
    assert run.code == 1 and run.stdout == b""
    (line,) = run.error_lines
    assert message.format(url=arm.url) in line
    assert azure.aad.token_requests == []


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
    assert_refresh_token_answer(azure, run, key)
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

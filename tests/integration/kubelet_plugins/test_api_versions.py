"""Every plugin's answer is accepted by the kubelet's strict decoder in every API version."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulators.aws import FakeEcr
from emulators.gcp import FakeMetadata
from emulators.http import FakeServer
from tests.helpers import API_VERSIONS
from tests.helpers_kubelet import run_harness
from tests.integration.conftest import Azure
from tests.integration.kubelet_plugins.common import (
    ECR_IMAGE,
    Node,
    aws_env,
    found,
    provider,
)


@pytest.mark.parametrize("api_version", API_VERSIONS)
def test_ecr_is_accepted_in_every_api_version(
    kubelet_harness: Path, node: Node, ecr: tuple[FakeEcr, FakeServer], api_version: str
) -> None:
    fake, server = ecr
    config = node.config(
        [
            provider(
                "ecr-credential-provider",
                ["*.dkr.ecr.*.amazonaws.com"],
                api_version,
                ["get-credentials"],
            )
        ]
    )
    run = run_harness(
        kubelet_harness, config, node.bin_dir, [{"image": ECR_IMAGE}], aws_env(server)
    )
    assert found(run) == [(True, [fake.password])]


@pytest.mark.parametrize("api_version", API_VERSIONS)
def test_gcp_is_accepted_in_every_api_version(
    kubelet_harness: Path, node: Node, metadata: tuple[FakeMetadata, FakeServer], api_version: str
) -> None:
    fake, server = metadata
    config = node.config(
        [
            provider(
                "auth-provider-gcp",
                ["*.pkg.dev", "gcr.io"],
                api_version,
                ["get-credentials", "--v=3"],
            )
        ]
    )
    run = run_harness(
        kubelet_harness,
        config,
        node.bin_dir,
        [{"image": "us-docker.pkg.dev/p/r/app"}, {"image": "gcr.io/p/app"}],
        {"GCE_METADATA_HOST": server.address},
    )
    # The image's own registry and the matching fixed key both carry the token.
    assert [(ok, set(passwords)) for ok, passwords in found(run)] == [
        (True, {fake.access_token})
    ] * 2
    assert node.execs() == 1  # cacheKeyType Global: one exec serves every Google registry


@pytest.mark.parametrize("api_version", API_VERSIONS)
def test_acr_is_accepted_in_every_api_version(
    kubelet_harness: Path, node: Node, azure: Azure, api_version: str
) -> None:
    azure_json = azure.config(useManagedIdentityExtension=True, tenantId="t")
    config = node.config(
        [provider("acr-credential-provider", ["*.azurecr.io"], api_version, [azure_json])]
    )
    run = run_harness(
        kubelet_harness, config, node.bin_dir, [{"image": "myreg.azurecr.io/app"}], azure.env
    )
    assert found(run) == [(True, [azure.acr.refresh_tokens[-1]])]

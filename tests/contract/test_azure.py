"""The runtime contract, kept by acr-credential-provider against the IMDS, Entra ID and ACR
emulators: with the node's managed identity (IMDS, the plugin's own client), and with a service
principal's secret (azure-identity)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from emulators.azure import FakeAcr
from emulators.harness import ACR_REGISTRY, azure_emulator
from emulators.http import FakeResponse
from tests.contract.provider import Cloud, ProviderContract


@contextmanager
def acr_cloud(config: dict[str, object] | None = None) -> Iterator[Cloud]:
    """The emulators, the plugin given their azure.json, or ``config`` written beside it."""
    with azure_emulator() as emulator:
        acr: FakeAcr = emulator.fakes["acr"]  # type: ignore[assignment]
        config_file = emulator.files["config"]
        if config is not None:
            config_file = str(Path(config_file).with_name("service-principal.json"))
            Path(config_file).write_text(json.dumps(config))

        def refuse() -> None:
            acr.exchange_fault = FakeResponse.json(
                {"errors": [{"code": "UNAUTHORIZED"}]}, status=401
            )

        yield Cloud(
            env=emulator.env,
            username="00000000-0000-0000-0000-000000000000",
            password=lambda: set(acr.refresh_tokens),
            calls=lambda: len(acr.exchanges),
            refuse=refuse,
            args=[config_file],
        )


class TestAcr(ProviderContract):
    plugin = "acr-credential-provider"
    image = f"{ACR_REGISTRY}/team/app"

    @pytest.fixture
    def cloud(self) -> Iterator[Cloud]:
        with acr_cloud() as cloud:
            yield cloud


class TestAcrThroughAzureIdentity(TestAcr):
    """A service principal's secret: azure-identity gets the AAD token, over a requests session
    that trusts the emulators' CA only through ``REQUESTS_CA_BUNDLE``, which in process is in the
    process environment only while the provider fetches (the runtime's SDK environment seam)."""

    @pytest.fixture
    def cloud(self) -> Iterator[Cloud]:
        config = {
            "cloud": "AzurePublicCloud",
            "tenantId": "demo-tenant",
            "aadClientId": "puller-app-id",
            "aadClientSecret": "contract-client-secret-value",
        }
        with acr_cloud(config) as cloud:
            yield cloud

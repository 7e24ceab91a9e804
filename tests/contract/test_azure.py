"""The runtime contract, kept by acr-credential-provider against the IMDS and ACR emulators."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emulators.azure import FakeAcr
from emulators.harness import ACR_REGISTRY, azure_emulator
from emulators.http import FakeResponse
from tests.contract.provider import Cloud, ProviderContract


class TestAcr(ProviderContract):
    plugin = "acr-credential-provider"
    image = f"{ACR_REGISTRY}/team/app"

    @pytest.fixture
    def cloud(self) -> Iterator[Cloud]:
        with azure_emulator() as emulator:
            acr: FakeAcr = emulator.fakes["acr"]  # type: ignore[assignment]

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
                args=[emulator.files["config"]],
            )

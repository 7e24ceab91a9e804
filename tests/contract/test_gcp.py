"""The runtime contract, kept by auth-provider-gcp against the GCE metadata emulator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emulators.gcp import FakeMetadata
from emulators.harness import gcp_emulator
from emulators.http import FakeResponse
from tests.contract.provider import Cloud, ProviderContract

TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"


class TestGoogle(ProviderContract):
    plugin = "auth-provider-gcp"
    image = "us-central1-docker.pkg.dev/team-project/repo/app"

    @pytest.fixture
    def cloud(self) -> Iterator[Cloud]:
        with gcp_emulator() as emulator:
            fake: FakeMetadata = emulator.fakes["metadata"]  # type: ignore[assignment]

            def refuse() -> None:
                fake.token_fault = FakeResponse.text("forbidden", status=403)

            def calls() -> int:
                return fake.paths.count(TOKEN_PATH)

            yield Cloud(
                env=emulator.env,
                username="_token",
                password=lambda: {fake.access_token} if calls() else set(),
                calls=calls,
                refuse=refuse,
                args=["get-credentials"],
            )

"""The runtime contract, kept by auth-provider-gcp against the GCE metadata emulator (the plugin's
own client), and against Google STS with an external-account config (google-auth)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from emulators.gcp import FakeMetadata, FakeSts
from emulators.harness import gcp_emulator
from emulators.http import FakeResponse
from tests.contract.provider import Cloud, ProviderContract

TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"


@contextmanager
def metadata_cloud() -> Iterator[Cloud]:
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


@contextmanager
def external_account_cloud(directory: Path) -> Iterator[Cloud]:
    """An external-account (workload identity federation) config whose subject token is a file."""
    subject = directory / "subject-token"
    subject.write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJub2RlIn0.c2lnbmF0dXJl")
    config = directory / "external-account.json"
    config.write_text(
        json.dumps(
            {
                "type": "external_account",
                "audience": "//iam.googleapis.com/projects/123/locations/global/"
                "workloadIdentityPools/nodes/providers/onprem",
                "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                "token_url": "https://sts.googleapis.com/v1/token",
                "credential_source": {"file": str(subject)},
            }
        )
    )
    with gcp_emulator() as emulator:
        sts: FakeSts = emulator.fakes["sts"]  # type: ignore[assignment]

        def refuse() -> None:
            sts.fault = FakeResponse.json({"error": "invalid_grant"}, status=400)

        yield Cloud(
            env={**emulator.env, "GOOGLE_APPLICATION_CREDENTIALS": str(config)},
            username="_token",
            password=lambda: {sts.access_token} if sts.forms else set(),
            calls=lambda: len(sts.forms),
            refuse=refuse,
            args=["get-credentials"],
        )


class TestGoogle(ProviderContract):
    plugin = "auth-provider-gcp"
    image = "us-central1-docker.pkg.dev/team-project/repo/app"

    @pytest.fixture
    def cloud(self) -> Iterator[Cloud]:
        with metadata_cloud() as cloud:
            yield cloud


class TestGoogleThroughGoogleAuth(TestGoogle):
    """google-auth's STS call runs over requests, which trusts the emulators' CA only through
    ``REQUESTS_CA_BUNDLE``: in process that is in the process environment only while the provider
    fetches (the runtime's SDK environment seam)."""

    @pytest.fixture
    def cloud(self, tmp_path: Path) -> Iterator[Cloud]:
        with external_account_cloud(tmp_path) as cloud:
            yield cloud

"""The runtime contract, kept by ecr-credential-provider against the ECR emulator: on the stdlib
route, and on the botocore route."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from emulators.aws import FakeEcr, aws_error
from emulators.harness import aws_emulator
from tests.contract.provider import Cloud, ProviderContract


@contextmanager
def ecr_cloud(**extra_env: str) -> Iterator[Cloud]:
    with aws_emulator(with_moto=False) as emulator:
        fake: FakeEcr = emulator.fakes["ecr"]  # type: ignore[assignment]

        def refuse() -> None:
            fake.fault = aws_error("AccessDeniedException", "not authorized")

        yield Cloud(
            env={**emulator.env, **extra_env},
            username=fake.username,
            password=lambda: {fake.password} if fake.calls else set(),
            calls=lambda: len(fake.calls),
            refuse=refuse,
        )


class TestEcr(ProviderContract):
    plugin = "ecr-credential-provider"
    image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app"

    @pytest.fixture
    def cloud(self) -> Iterator[Cloud]:
        with ecr_cloud() as cloud:
            yield cloud


class TestEcrThroughBotocore(TestEcr):
    """A botocore-only setting picks the botocore route. botocore reads its settings and keys from
    the process environment, which in process holds them only while the provider fetches (the
    runtime's SDK environment seam)."""

    @pytest.fixture
    def cloud(self) -> Iterator[Cloud]:
        with ecr_cloud(AWS_USE_FIPS_ENDPOINT="false") as cloud:
            yield cloud

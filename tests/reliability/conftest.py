"""Collects every scenario's outcome; ``make reliability-report`` prints the figures."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from emulators.harness import Emulator, aws_emulator, azure_emulator, gcp_emulator
from tests.reliability.checks import Figures, figures_file


@pytest.fixture(scope="session")
def figures() -> Iterator[Figures]:
    collected = Figures()
    yield collected
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")  # the same for every worker of a run
    collected.write(figures_file(os.environ.get("PYTEST_XDIST_WORKER", "")), run or "serial")


@pytest.fixture(scope="session")
def aws() -> Iterator[Emulator]:
    with aws_emulator(with_moto=False) as emulator:
        yield emulator


@pytest.fixture(scope="session")
def gcp() -> Iterator[Emulator]:
    with gcp_emulator() as emulator:
        yield emulator


@pytest.fixture(scope="session")
def azure() -> Iterator[Emulator]:
    with azure_emulator() as emulator:
        yield emulator

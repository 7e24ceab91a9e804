"""auth-provider-gcp against the project's fakes of the GCE metadata server, Google STS and OAuth.

The node's metadata-server token comes from the project's stdlib client (found through google-auth's
``GCE_METADATA_HOST``); google-auth's real code runs for the rest: the STS client
(``sts.googleapis.com`` reached over TLS with a test CA through the loopback-only
``CREDPROVIDER_TEST_RESOLVE``), and service-account / external-account credentials from
``GOOGLE_APPLICATION_CREDENTIALS``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emulators.gcp import FakeSts
from emulators.harness import Emulator, gcp_emulator
from emulators.http import FakeServer, serve
from emulators.tls import CertAuthority


@pytest.fixture
def sts(test_ca: CertAuthority) -> Iterator[tuple[FakeSts, FakeServer]]:
    fake = FakeSts()
    with serve(fake, tls=test_ca.server_context("sts.googleapis.com")) as server:
        yield fake, server


@pytest.fixture
def google() -> Iterator[Emulator]:
    """The metadata server, STS and the IAM Credentials API (TLS, test CA), as make demo runs them:
    the node's default account may impersonate ``GCP_PULLER``."""
    with gcp_emulator() as emulator:
        yield emulator

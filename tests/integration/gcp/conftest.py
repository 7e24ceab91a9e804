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
from emulators.http import FakeServer, serve
from emulators.tls import CertAuthority


@pytest.fixture
def sts(test_ca: CertAuthority) -> Iterator[tuple[FakeSts, FakeServer]]:
    fake = FakeSts()
    with serve(fake, tls=test_ca.server_context("sts.googleapis.com")) as server:
        yield fake, server

"""The classes of defect an independent red-team run found, each with cases of our own.

1. the cache path swapped under root (test_cache_path); 2. cache content that fails or delays a
request (test_cache_content); 3. secrets cut before they are scrubbed and 4. log injection and
flooding (test_secrets_and_logs); 5. tracebacks and "internal error" for bad input (test_bad_input);
6. a catastrophic glob (tests/reliability/test_properties.py); 7. ``install --copy`` following a
planted symlink (test_install_copy). Every case runs the real plugin or tool as a subprocess (as
root: the other user's files are made with chown inside the test's own temporary directory).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emulators.aws import FakeEcr
from emulators.http import FakeServer, serve


@pytest.fixture
def ecr() -> Iterator[tuple[FakeEcr, FakeServer]]:
    fake = FakeEcr()
    with serve(fake) as server:
        yield fake, server

"""The suite's own safety net (tests/conftest.py), checked from inside a test as every test sees it."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.helpers import RUN_SETTINGS


def _started_with() -> dict[str, str]:
    """The environment this process was started with (what make test or CI passed in)."""
    raw = Path(f"/proc/{os.getpid()}/environ").read_bytes()
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, _, value in pairs}


def test_cloud_settings_are_gone_and_the_runs_own_kept() -> None:
    started = _started_with()
    for key in RUN_SETTINGS:  # e.g. CREDPROVIDER_REQUIRE_BUNDLE=1 from make test
        assert os.environ.get(key) == started.get(key), key
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_PROFILE",
        "AZURE_CLIENT_SECRET",
        "GOOGLE_APPLICATION_CREDENTIALS",
    ):
        assert key not in os.environ
    assert os.environ["AWS_EC2_METADATA_DISABLED"] == "true"
    assert os.environ["HOME"] != started.get("HOME")


@pytest.mark.parametrize("address", ["169.254.169.254", "10.255.255.1"])
def test_a_connect_off_loopback_fails_the_test(address: str) -> None:
    """The guard refuses before the connect system call. The socket is closed first, so that even
    without the guard nothing could be sent: the connect would then fail with EBADF instead."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.close()
    with pytest.raises(AssertionError, match=f"test tried to connect to '{address}'"):
        sock.connect((address, 80))

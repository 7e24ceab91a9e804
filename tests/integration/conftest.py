"""Emulators and runners shared by the integration tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.tls import CertAuthority, make_test_ca
from tests.helpers import BUNDLE_DIR

REQUIRE_BUNDLE_ENV = "CREDPROVIDER_REQUIRE_BUNDLE"


@pytest.fixture(params=["source", "bundle"])
def use_bundle(request: pytest.FixtureRequest) -> bool:
    """Run each plugin test from source and through the built executable in dist/credprovider."""
    if request.param == "source":
        return False
    if not (BUNDLE_DIR / "credprovider").exists():
        if os.environ.get(REQUIRE_BUNDLE_ENV) == "1":
            pytest.fail(f"the bundle {BUNDLE_DIR} is missing: run make build")
        pytest.skip("bundle not built (make build); make test builds it and requires it")
    return True


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """moto in server mode on loopback: the AWS emulator (ECR, STS)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory: pytest.TempPathFactory) -> CertAuthority:
    return make_test_ca(Path(tmp_path_factory.mktemp("ca")))

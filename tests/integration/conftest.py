"""Emulators and runners shared by the integration tests."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from emulators.aws import FakeEcr
from emulators.azure import FakeAad, FakeAcr, FakeImds
from emulators.gcp import FakeMetadata
from emulators.harness import SAFE_ENV, aws_emulator, azure_emulator, gcp_emulator
from emulators.http import FakeServer
from emulators.kubelet_exec import NodeFile, request_bytes, run_plugin
from emulators.tls import CertAuthority, make_test_ca
from release import gobuild
from tests.helpers import unavailable

STACK_AUTHORITY_HOST = "login.stack.local"
REGISTRY_HOSTS = [
    "myreg.azurecr.io",
    "myreg.azurecr.cn",
    "myreg.azurecr.us",
    "myreg-abc123.azurecr.io",
    "myreg.eastus.geo.azurecr.io",
    "myreg.azurecr.my.cloud",
    "other.azurecr.io",
]


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


@pytest.fixture(scope="session")
def kubelet_harness() -> Path:
    """The Go harness around the real kubelet code (release/gobuild.py: built once per source)."""
    try:
        return gobuild.binary(gobuild.HARNESS, "kubelet-harness")
    except gobuild.GoBuildError as exc:
        if shutil.which("go") is None:
            unavailable(str(exc))
        pytest.fail(str(exc))


@dataclass
class Azure:
    imds: FakeImds
    aad: FakeAad
    acr: FakeAcr
    env: dict[str, str]
    directory: Path

    def config(self, name: str = "azure.json", **settings: object) -> str:
        path = self.directory / name
        path.write_text(json.dumps(settings))
        return str(path)

    def run(
        self,
        image: str,
        config: str,
        *args: str,
        token: str | None = None,
        annotations: dict[str, str] | None = None,
        api_version: str | None = None,
        use_bundle: bool = False,
        env: dict[str, str] | None = None,
        own_network: bool = False,
        node_files: Mapping[str, NodeFile] | None = None,
        as_nobody: bool = False,
        wrapper: Sequence[str] = (),
    ):  # type: ignore[no-untyped-def]
        request = (
            request_bytes(image, api_version, token, annotations)
            if api_version
            else request_bytes(image, token=token, annotations=annotations)
        )
        return run_plugin(
            "acr-credential-provider",
            request,
            [config, *args],
            {**self.env, **(env or {})},
            use_bundle=use_bundle,
            own_network=own_network,
            node_files=node_files,
            as_nobody=as_nobody,
            wrapper=wrapper,
        )


@pytest.fixture
def azure(test_ca: CertAuthority, tmp_path: Path) -> Iterator[Azure]:
    certificate_names = ("*.azurecr.io", "*.azurecr.cn", "*.azurecr.us", "*.eastus.geo.azurecr.io",
                         "*.azurecr.my.cloud")  # fmt: skip
    with azure_emulator(
        tuple(REGISTRY_HOSTS), certificate_names, (STACK_AUTHORITY_HOST,), test_ca
    ) as emulator:
        fakes: Any = emulator.fakes
        env = {k: v for k, v in emulator.env.items() if k not in SAFE_ENV}
        yield Azure(fakes["imds"], fakes["aad"], fakes["acr"], env, tmp_path)


@pytest.fixture
def ecr() -> Iterator[tuple[FakeEcr, FakeServer]]:
    with aws_emulator(with_moto=False) as emulator:
        fake: Any = emulator.fakes["ecr"]
        yield fake, emulator.servers["ecr"]


@pytest.fixture
def metadata() -> Iterator[tuple[FakeMetadata, FakeServer]]:
    with gcp_emulator() as emulator:
        fake: Any = emulator.fakes["metadata"]
        yield fake, emulator.servers["metadata"]

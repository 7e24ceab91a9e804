"""The runtime contract, kept by registry-credential-provider for each of its backends, against
the stand-ins of emulators/federation.py over TLS (as emulators.harness.registries_emulator
serves them for the demo and the bench too) (the plugin trusts the test CA through
``--ca-file`` only): each checks the pod's token against the keys its issuer publishes, and the
credentials it issued are the only ones the answer may carry."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from emulators.federation import Backend, Issuer, Verifier
from emulators.harness import (
    REGISTRY_AUDIENCE,
    REGISTRY_HOST,
    REGISTRY_ROBOT,
    registries_emulator,
)
from emulators.http import FakeResponse
from tests.contract.provider import Cloud, ProviderContract

HOST = REGISTRY_HOST
AUDIENCE = REGISTRY_AUDIENCE
ROBOT = REGISTRY_ROBOT
ANNOTATION = "registry.credprovider.io/pull-secret"

# Each backend: its stand-in in registries_emulator, the plugin's args for it, and the username
# of what it issues.
BACKENDS: dict[str, tuple[str, list[str], str]] = {
    "quay": ("quay", ["--robot", ROBOT], ROBOT),
    "quay-sts": ("quay", ["--robot", ROBOT], ROBOT),
    "artifactory": ("artifactory", ["--provider-name", "k8s"], "puller"),
    "cloudsmith": ("cloudsmith", ["--org", "acme", "--service-slug", "pullers"], "token"),
    "vault": ("vault", ["--role", "pull", "--secret-path", "registry/team"], "vault-user"),
    "secret": ("secrets", [], "secret-user"),
}


@dataclass
class BackendCloud(Cloud):
    """A backend's cloud, with its stand-in and the issuer whose tokens it trusts."""

    fake: Backend = field(default_factory=lambda: Backend(Verifier("")))
    issuer: Issuer = field(default_factory=Issuer)


@contextmanager
def backend_cloud(name: str) -> Iterator[BackendCloud]:
    """The backend ``name``'s stand-in over TLS (emulators.harness.registries_emulator), its
    issuer's discovery over loopback HTTP, and the plugin's args for them."""
    stand_in, backend_args, username = BACKENDS[name]
    with registries_emulator(serving=(stand_in,)) as emulator:
        fake: Backend = emulator.fakes[stand_in]  # type: ignore[assignment]
        issuer: Issuer = emulator.fakes["issuer"]  # type: ignore[assignment]
        url = emulator.servers[stand_in].url.rstrip("/")
        args = ["--backend", name, "--url", url, "--registry", HOST,
                "--ca-file", emulator.files["ca"], *backend_args]  # fmt: skip

        def refuse() -> None:
            fake.fault = FakeResponse.json({"errors": ["permission denied"]}, 403)

        yield BackendCloud(
            env=emulator.env,
            username=username,
            password=lambda: set(fake.issued),
            calls=lambda: len(fake.calls),
            refuse=refuse,
            args=args,
            token=issuer.token(audience=AUDIENCE),
            annotations={ANNOTATION: "pull"} if name == "secret" else {},
            fake=fake,
            issuer=issuer,
        )


class TestRegistries(ProviderContract):
    plugin = "registry-credential-provider"
    image = f"{HOST}/team/app"

    @pytest.fixture(params=sorted(BACKENDS))
    def cloud(self, request: pytest.FixtureRequest) -> Iterator[Cloud]:
        with backend_cloud(request.param) as cloud:
            yield cloud

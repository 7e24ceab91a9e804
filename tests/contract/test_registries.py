"""The runtime contract, kept by registry-credential-provider for each of its backends, against
the stand-ins of emulators/federation.py over TLS (the plugin trusts the test CA through
``--ca-file`` only): each checks the pod's token against the keys its issuer publishes, and the
credentials it issued are the only ones the answer may carry."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from emulators.federation import (
    Backend,
    FakeArtifactory,
    FakeCloudsmith,
    FakeQuay,
    FakeSecrets,
    FakeVault,
    Issuer,
    Verifier,
    dockerconfigjson,
)
from emulators.harness import SAFE_ENV
from emulators.http import FakeResponse, serve
from emulators.tls import make_test_ca
from tests.contract.provider import Cloud, ProviderContract

HOST = "registry.example.test"
AUDIENCE = "registry.example.test"
SUBJECT = "system:serviceaccount:team:puller"
ROBOT = "team+puller"
ANNOTATION = "registry.credprovider.io/pull-secret"


def _quay(verifier: Verifier, issuer: Issuer) -> tuple[FakeQuay, list[str]]:
    fake = FakeQuay(verifier, robots={ROBOT: (issuer.url, SUBJECT)}, audience=AUDIENCE)
    return fake, ["--robot", ROBOT]


def _artifactory(verifier: Verifier, issuer: Issuer) -> tuple[FakeArtifactory, list[str]]:
    fake = FakeArtifactory(verifier, providers={"k8s": (AUDIENCE, {SUBJECT: "puller"})})
    return fake, ["--provider-name", "k8s"]


def _cloudsmith(verifier: Verifier, issuer: Issuer) -> tuple[FakeCloudsmith, list[str]]:
    fake = FakeCloudsmith(verifier, services={"pullers": (AUDIENCE, SUBJECT)})
    return fake, ["--org", "acme", "--service-slug", "pullers"]


def _vault(verifier: Verifier, issuer: Issuer) -> tuple[FakeVault, list[str]]:
    fake = FakeVault(verifier, roles={("kubernetes", "pull"): (AUDIENCE, "team", "puller")},
                     kv={("secret", "registry/team"): {"username": "vault-user",
                                                         "password": "vault-password-0123456789"}})  # fmt: skip
    return fake, ["--role", "pull", "--secret-path", "registry/team"]


def _secret(verifier: Verifier, issuer: Issuer) -> tuple[FakeSecrets, list[str]]:
    secret = dockerconfigjson({HOST: ("secret-user", "secret-password-0123456789")})
    fake = FakeSecrets(verifier, secrets={("team", "pull"): secret},
                       readers={("team", "puller")}, audiences=(AUDIENCE,))  # fmt: skip
    return fake, []


BACKENDS: dict[str, Callable[[Verifier, Issuer], tuple[Backend, list[str]]]] = {
    "quay": _quay,
    "quay-sts": _quay,
    "artifactory": _artifactory,
    "cloudsmith": _cloudsmith,
    "vault": _vault,
    "secret": _secret,
}
USERNAMES = {"quay": ROBOT, "quay-sts": ROBOT, "artifactory": "puller", "cloudsmith": "token",
             "vault": "vault-user", "secret": "secret-user"}  # fmt: skip


@dataclass
class BackendCloud(Cloud):
    """A backend's cloud, with its stand-in and the issuer whose tokens it trusts."""

    fake: Backend = field(default_factory=lambda: Backend(Verifier("")))
    issuer: Issuer = field(default_factory=Issuer)


@contextmanager
def backend_cloud(name: str, directory: Path) -> Iterator[BackendCloud]:
    """The backend ``name`` over TLS, its issuer's discovery over loopback HTTP, and the plugin's
    args for them."""
    ca = make_test_ca(directory / "ca")
    issuer = Issuer()
    with ExitStack() as stack:
        issuer.url = stack.enter_context(serve(issuer)).url.rstrip("/")
        fake, args = BACKENDS[name](Verifier(issuer.url), issuer)
        server = stack.enter_context(serve(fake, tls=ca.server_context("127.0.0.1")))
        url = server.url.rstrip("/")
        args = ["--backend", name, "--url", url, "--registry", HOST, "--ca-file", str(ca.bundle),
                *args]  # fmt: skip

        def refuse() -> None:
            fake.fault = FakeResponse.json({"errors": ["permission denied"]}, 403)

        yield BackendCloud(
            env=dict(SAFE_ENV),
            username=USERNAMES[name],
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
    def cloud(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cloud]:
        with backend_cloud(request.param, tmp_path) as cloud:
            yield cloud

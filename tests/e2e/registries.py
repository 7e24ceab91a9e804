"""The clouds' registries inside the real-runtime sandbox (tests/e2e/node.py with a real runtime).

One registry server (distribution) per cloud holds the images; one front (emulators/registry.py) on
``:443`` answers as every registry host the scenario names, with a certificate from the test CA for
those names, and asks for credentials as that host's cloud does, each cloud's emulator saying whose
a credential is. The names resolve to the front through the sandbox's own /etc/hosts (the /etc
overlay of its mount namespace). Hosts no plugin serves (Docker Hub, Quay) refuse everyone; the
registry plugin's hosts take only what its backends' stand-ins issued (tests/e2e/federated.py).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from emulators.gcp import GoogleRegistries
from emulators.harness import Emulator
from emulators.http import serve
from emulators.registry import Host, RegistryFront, Scheme, Verifier
from emulators.tls import CertAuthority
from tests.e2e import testimages

FRONT_PORT = 443
BACKEND_PORTS = {"aws": 5001, "azure": 5002, "gcp": 5003, "private": 5004}
# containerd's name for Docker Hub's registry host
DOCKER_HUB = {"docker.io": "registry-1.docker.io"}
# Each cloud's registry scheme (service, token endpoint, its answer to containerd's OAuth POST).
ECR = Scheme("basic", "ecr.amazonaws.com")
ECR_PUBLIC = Scheme("bearer", "public.ecr.aws", "/token/")
ACR_POST_STATUS = 400  # containerd's resolver records ACR answering its POST with 400
GCR_TOKEN_PATH = "/v2/token"
PRIVATE = Scheme("bearer", "registry", "/token")


@dataclass(frozen=True)
class Reference:
    """An image reference split as containerd reads it: the host it connects to (as named, port
    and all), the repository and the tag."""

    host: str
    repository: str
    tag: str

    @property
    def hostname(self) -> str:
        return self.host.split(":")[0].lower()


def split(image: str) -> Reference:
    host, _, rest = image.partition("/")
    repository, _, tag = rest.rpartition(":")
    return Reference(DOCKER_HUB.get(host, host), repository, tag)


def cloud_of(hostname: str) -> str:
    """``aws``, ``azure``, ``gcp`` or ``private`` (a registry no plugin serves)."""
    private = (".dkr.ecr", ".dkr-ecr")  # dkr-ecr: the dual-stack on.aws form
    if hostname in ("public.ecr.aws", "ecr-public.aws.com") or any(p in hostname for p in private):
        return "aws"
    if hostname.endswith(".azurecr.io"):
        return "azure"
    if hostname == "gcr.io" or hostname.endswith((".gcr.io", "-docker.pkg.dev")):
        return "gcp"
    return "private"


def scheme_of(hostname: str) -> Scheme:
    cloud = cloud_of(hostname)
    if cloud == "aws":
        return ECR_PUBLIC if hostname.startswith(("public.", "ecr-public.")) else ECR
    if cloud == "azure":
        return Scheme("bearer", hostname, "/oauth2/token", ACR_POST_STATUS)
    if cloud == "gcp":
        return Scheme("bearer", hostname, GCR_TOKEN_PATH)
    return PRIVATE


def verifiers(aws: Emulator, gcp: Emulator, azure: Emulator) -> dict[str, Verifier]:
    """Each cloud's say on whose a credential is (its emulator's records of what it issued)."""
    ecr: Any = aws.fakes["ecr"]
    acr: Any = azure.fakes["acr"]
    google = GoogleRegistries(gcp.fakes["metadata"], gcp.fakes["iam"])  # type: ignore[arg-type]
    return {
        "aws": ecr.registry_identity,
        "azure": acr.registry_identity,
        "gcp": google.registry_identity,
    }


def prefix_of(hostname: str) -> str:
    """Where a host's repositories live on its cloud's server (a geo-replica shares its
    registry's: ``contoso.eastus.geo.azurecr.io`` -> ``contoso``)."""
    if cloud_of(hostname) == "azure":
        return hostname.split(".")[0]
    return hostname.replace(".", "-")


def hosts(
    images: list[str],
    checks: dict[str, Verifier],
    admit: dict[str, frozenset[str]] | None = None,
    mirrors: dict[str, str] | None = None,
) -> dict[str, Host]:
    """The front's hosts for ``images``, each checked by ``checks``' verifier for its name, else
    its cloud's; ``mirrors`` maps a mirror's host name to the registry it mirrors (the same
    images, the same scheme and checks)."""
    names = {split(image).hostname for image in images}
    found = {}
    for name in names:
        cloud = cloud_of(name)
        found[name] = Host(
            name,
            scheme_of(name),
            checks.get(name, checks.get(cloud)),
            f"http://127.0.0.1:{BACKEND_PORTS[cloud]}",
            prefix_of(name),
            (admit or {}).get(name),
        )
    for name, upstream in (mirrors or {}).items():
        origin = found[upstream]
        found[name] = Host(name, origin.scheme, origin.verify, origin.backend, origin.prefix)
    return found


def start(
    directory: Path,
    registry: Path,
    front: RegistryFront,
    ca: CertAuthority,
    stack: ExitStack,
    log: IO[bytes],
) -> None:
    """The registry servers, the front on :443 and the sandbox's /etc/hosts naming every host."""
    for cloud, port in BACKEND_PORTS.items():
        storage = directory / cloud
        storage.mkdir(parents=True)
        config = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(storage)}},
            "http": {"addr": f"127.0.0.1:{port}"},
        }
        (directory / f"{cloud}.json").write_text(json.dumps(config))
        process = subprocess.Popen(
            [str(registry), "serve", str(directory / f"{cloud}.json")],
            env={"PATH": "/usr/bin:/bin", "OTEL_TRACES_EXPORTER": "none"},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        stack.callback(process.kill)
    for port in BACKEND_PORTS.values():
        _wait_listening(f"http://127.0.0.1:{port}/v2/")
    names = sorted(front.hosts)
    stack.enter_context(serve(front, ca.server_context(*names), port=FRONT_PORT))
    lines = ["127.0.0.1 localhost", *(f"127.0.0.1 {name}" for name in names)]
    Path("/etc/hosts").write_text("\n".join(lines) + "\n")


def stored_as(image: str) -> str:
    """Where ``image`` lies on its cloud's server (what it prints when it runs): a login server and
    its geo-replica share their repositories."""
    reference = split(image)
    return f"{prefix_of(reference.hostname)}/{reference.repository}:{reference.tag}"


def push_all(front: RegistryFront, images: list[str], busybox: Path, arch: str) -> None:
    """Each image, naming where it is stored, to the server behind its host."""
    layer = testimages.busybox_layer(busybox)
    for image in images:
        reference = split(image)
        host = front.hosts[reference.hostname]
        testimages.push(
            host.backend,
            f"{host.prefix}/{reference.repository}",
            reference.tag,
            testimages.naming(layer, arch, stored_as(image)),
        )


def _wait_listening(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the registry server at {url} did not start") from None
            time.sleep(0.1)

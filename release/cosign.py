"""The OCI image's signature (``make release REGISTRY=host/repo COSIGN_KEY=cosign.key``): once
``release push`` has put the image index in the registry, cosign (built from the Go module proxy
at a pinned version, ``gobuild.COSIGN``) signs it by digest with the operator's key, and every
architecture's image under it (``--recursive``: a node verifies the image it pulls). The
signature is stored in the same repository beside the image, where ``cosign verify --key`` finds
it (docs/release.md). The key's password comes from ``COSIGN_PASSWORD``, as cosign reads it.

Nothing is sent anywhere but the registry: no transparency log entry (``--tlog-upload=false``:
a key pair needs none, and a private registry's name is not published), so a verifier passes
``--insecure-ignore-tlog=true``. HTTP is allowed only for a registry on loopback, as for the push.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import tempfile
from pathlib import Path

from release import gobuild, oci


class CosignError(Exception):
    """The image could not be signed (the key, its password, the registry)."""


def reference(registry: str, digest: str) -> tuple[str, bool]:
    """``host[:port]/repository`` (or ``http://127.0.0.1:port/repository``) and a digest -> the
    reference cosign signs, and whether it is over HTTP (loopback only: read as the push reads
    it, :func:`release.oci.registry`)."""
    base, repository = oci.registry(registry)
    scheme, _, host = base.partition("://")
    return f"{host}/{repository}@{digest}", scheme == "http"


def ready(key: Path) -> Path:
    """cosign, once the key looks usable (checked before anything is pushed)."""
    if not key.is_file():  # absent, or a FIFO or device cosign would wait on for ever
        raise CosignError(f"COSIGN_KEY {key} is not a cosign private key (not a regular file)")
    if "COSIGN_PASSWORD" not in os.environ:
        raise CosignError(
            "COSIGN_PASSWORD is not set: give the key's password in it (empty for none)"
        )
    try:
        return gobuild.released(gobuild.COSIGN)
    except gobuild.GoBuildError as exc:
        raise CosignError(f"cosign could not be built: {exc}") from None


def sign(key: Path, registry: str, digest: str, auth: str = "", timeout: float = 300) -> None:
    """The pushed image ``digest`` in ``registry`` (and each image of its index) signed with
    ``key``, the signature pushed beside it; ``auth`` (``user:password``, the push's) given to
    cosign in a Docker config of this run's own (0600, removed after), never on its command
    line, where any user of the machine could read it."""
    cosign = ready(key)
    signed, http = reference(registry, digest)
    with tempfile.TemporaryDirectory(prefix="credprovider-cosign-") as config:
        env = dict(os.environ)
        if auth:
            host = signed.split("/", 1)[0]
            login = {"auths": {host: {"auth": base64.b64encode(auth.encode()).decode()}}}
            descriptor = os.open(f"{config}/config.json", os.O_WRONLY | os.O_CREAT, 0o600)
            with os.fdopen(descriptor, "w") as handle:
                json.dump(login, handle)
            env["DOCKER_CONFIG"] = config
        done = subprocess.run(
            [str(cosign), "sign", "--key", str(key), "--tlog-upload=false", "--recursive",
             "--yes", *(["--allow-http-registry"] if http else []), signed],
            capture_output=True, text=True, timeout=timeout, check=False,
            stdin=subprocess.DEVNULL, env=env,
        )  # fmt: skip
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        raise CosignError(
            f"cosign could not sign {signed}: {said[-1] if said else f'exit {done.returncode}'}"
        )

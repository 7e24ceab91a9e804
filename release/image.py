"""The release's OCI image: one per architecture and a multi-platform index over them.

Each image's one layer is the architecture's release tarball itself, byte for byte: the bundle
(which carries its own C library) under ``/credprovider-<version>/``, with its licence, notices and
SBOM. Nothing else: no shell, no package manager. It runs as a non-root user (``65532``); the
plugins and the tool are on its PATH (``ecr-credential-provider``, ``credprovider`` ...), and its
entry point is the tool.

``make release`` writes ``credprovider-<version>-oci.tar``, an OCI layout archive whose index is
tagged ``<version>``, with no registry in its name (``ctr -n k8s.io images import --base-name
REGISTRY/credprovider``, ``skopeo copy oci-archive:... docker://REGISTRY/credprovider:<version>``); each
architecture's image has an SBOM of its own (its purl names the image's manifest digest).
``make release REGISTRY=host/repository`` pushes the index and its images as ``:<version>``.
"""

from __future__ import annotations

import gzip
import hashlib
import tarfile
from pathlib import Path
from typing import Final
from urllib.parse import quote

from release import oci

USER: Final = "65532:65532"
NAME: Final = "credprovider"


def archive_name(version: str) -> str:
    return f"{NAME}-{version}-oci.tar"


def sbom_name(version: str, arch: str) -> str:
    return f"{NAME}-{version}-image-linux-{arch}.cdx.json"


def purl(built: oci.Image) -> str:
    return f"pkg:oci/{NAME}@{quote(built.manifest.digest, safe='')}?arch={built.arch}"


def _diff_id(tarball: Path) -> str:
    digest = hashlib.sha256()
    with gzip.open(tarball, "rb") as raw:
        while chunk := raw.read(1 << 20):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def _top(tarball: Path) -> str:
    """The tarball's one top directory (``credprovider-0.1.0``)."""
    with tarfile.open(tarball) as tar:
        first = tar.next()
    if first is None or "/" in first.name.rstrip("/"):
        raise ValueError(f"{tarball} does not start with its top directory")
    return first.name.rstrip("/")


def arch_image(tarball: Path, arch: str, version: str, commit: str) -> oci.Image:
    """``arch``'s image: the tarball as its layer."""
    top = f"/{_top(tarball)}"
    layer = oci.Blob(oci.LAYER, tarball.read_bytes())
    config: dict[str, object] = {
        "User": USER,
        "Entrypoint": [f"{top}/credprovider"],
        "Cmd": ["--help"],
        "Env": [f"PATH={top}"],
        "WorkingDir": "/",
        "Labels": {
            "org.opencontainers.image.title": NAME,
            "org.opencontainers.image.version": version,
            "org.opencontainers.image.revision": commit,
            "org.opencontainers.image.licenses": "Apache-2.0",
            "org.opencontainers.image.description": (
                "kubelet image credential provider plugins for ECR, ACR and Google registries"
            ),
        },
    }
    return oci.image([(layer, _diff_id(tarball))], arch, config)


def write(out: Path, version: str, images: list[oci.Image]) -> Path:
    """The archive of ``images`` and their index, tagged ``<version>``."""
    top = oci.index(images)
    blobs = [blob for built in images for blob in built.blobs]
    return oci.archive(out / archive_name(version), version, top, blobs)


def push(archive: Path, reference: str, tag: str, auth: str = "") -> str:
    """The archive's index and images pushed to ``reference`` (``host[:port]/repository``) as
    ``:tag``; the index's digest."""
    return oci.push_archive(archive, reference, tag, auth)

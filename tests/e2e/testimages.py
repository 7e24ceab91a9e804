"""The real-runtime sandbox's images, built without a Docker engine (release/oci.py): one layer
holding Debian's static busybox in ``/bin`` with a few applets linked to it, and a config of its own
naming the image, so what a container prints tells which image ran. Pushed to a registry server
(``push``), or written as an OCI archive (``archive``) for ``ctr images import`` (the pause image,
which nothing may pull).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path
from typing import Final

from release import oci
from release.oci import Image

APPLETS: Final = ("sh", "echo", "cat", "sleep")


def busybox_layer(busybox: Path) -> tuple[oci.Blob, str]:
    """The layer (gzipped, reproducible) and its diff ID (the digest of the uncompressed tar)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        directory = tarfile.TarInfo("bin")
        directory.type, directory.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(directory)
        data = busybox.read_bytes()
        binary = tarfile.TarInfo("bin/busybox")
        binary.mode, binary.size = 0o755, len(data)
        tar.addfile(binary, io.BytesIO(data))
        for applet in APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname, link.mode = tarfile.SYMTYPE, "busybox", 0o777
            tar.addfile(link)
    uncompressed = raw.getvalue()
    compressed = gzip.compress(uncompressed, mtime=0)
    return oci.Blob(oci.LAYER, compressed), f"sha256:{hashlib.sha256(uncompressed).hexdigest()}"


def naming(layer: tuple[oci.Blob, str], arch: str, reference: str) -> Image:
    """The scenario's image for ``reference``: it prints ``pulled <reference>`` and exits."""
    return oci.image(
        [layer],
        arch,
        {"Cmd": ["/bin/sh", "-c", 'echo "pulled $IMAGE"'], "Env": [f"IMAGE={reference}"]},
    )


def pause(layer: tuple[oci.Blob, str], arch: str) -> Image:
    """A sandbox (pause) image: sleeps until it is killed."""
    return oci.image([layer], arch, {"Cmd": ["/bin/sleep", "2147483647"]})


def push(base: str, repository: str, tag: str, pushed: Image) -> None:
    """``pushed`` as ``repository:tag`` to the server at ``base`` (no auth: the sandbox pushes to
    the server behind its front)."""
    oci.push(base, repository, tag, pushed)


def archive(path: Path, name: str, saved: Image) -> Path:
    """``saved`` as an OCI archive naming it ``name``."""
    tag = name.rsplit(":", 1)[1]
    return oci.archive(path, tag, saved.manifest, (*saved.layers, saved.config), name)

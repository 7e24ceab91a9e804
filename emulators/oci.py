"""Small OCI images built without a Docker engine, for the real-runtime sandbox.

Every image has one layer, Debian's static busybox in ``/bin`` with a few applets linked to it, and a
config of its own naming the image, so what a container prints tells which image ran. Images are
pushed to a registry server over the distribution API (``push``), or written as an OCI archive
(``archive``) for ``ctr images import`` (the pause image, which nothing may pull).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Final

MANIFEST: Final = "application/vnd.oci.image.manifest.v1+json"
CONFIG: Final = "application/vnd.oci.image.config.v1+json"
LAYER: Final = "application/vnd.oci.image.layer.v1.tar+gzip"
APPLETS: Final = ("sh", "echo", "cat", "sleep")


@dataclass(frozen=True)
class Blob:
    media_type: str
    data: bytes

    @property
    def digest(self) -> str:
        return f"sha256:{hashlib.sha256(self.data).hexdigest()}"

    def descriptor(self, **annotations: str) -> dict[str, object]:
        found: dict[str, object] = {
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": len(self.data),
        }
        if annotations:
            found["annotations"] = annotations
        return found


@dataclass(frozen=True)
class Image:
    layer: Blob
    config: Blob
    manifest: Blob


def busybox_layer(busybox: Path) -> tuple[Blob, str]:
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
    return Blob(LAYER, compressed), f"sha256:{hashlib.sha256(uncompressed).hexdigest()}"


def image(layer: tuple[Blob, str], arch: str, command: list[str], env: dict[str, str]) -> Image:
    """An image of ``layer`` running ``command`` with ``env``."""
    blob, diff_id = layer
    config = Blob(
        CONFIG,
        json.dumps(
            {
                "architecture": arch,
                "os": "linux",
                "config": {"Cmd": command, "Env": [f"{k}={v}" for k, v in env.items()]},
                "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            },
            sort_keys=True,
        ).encode(),
    )
    manifest = Blob(
        MANIFEST,
        json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": MANIFEST,
                "config": config.descriptor(),
                "layers": [blob.descriptor()],
            },
            sort_keys=True,
        ).encode(),
    )
    return Image(blob, config, manifest)


def naming(layer: tuple[Blob, str], arch: str, reference: str) -> Image:
    """The scenario's image for ``reference``: it prints ``pulled <reference>`` and exits."""
    return image(layer, arch, ["/bin/sh", "-c", 'echo "pulled $IMAGE"'], {"IMAGE": reference})


def pause(layer: tuple[Blob, str], arch: str) -> Image:
    """A sandbox (pause) image: sleeps until it is killed."""
    return image(layer, arch, ["/bin/sleep", "2147483647"], {})


def _call(
    method: str, url: str, data: bytes | None = None, media_type: str = ""
) -> tuple[int, str]:
    headers = {"Content-Type": media_type} if media_type else {}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.headers.get("Location", "")
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers.get("Location", "")


def push(base: str, repository: str, tag: str, pushed: Image) -> None:
    """``pushed`` as ``repository:tag`` to the registry server at ``base`` (no auth: the sandbox
    pushes to the server behind its front)."""
    for blob in (pushed.layer, pushed.config):
        if _call("HEAD", f"{base}/v2/{repository}/blobs/{blob.digest}")[0] == 200:
            continue
        status, location = _call("POST", f"{base}/v2/{repository}/blobs/uploads/")
        if status != 202:
            raise RuntimeError(f"starting an upload to {base}/{repository}: HTTP {status}")
        target = location if location.startswith("http") else base + location
        joiner = "&" if "?" in target else "?"
        status, _ = _call(
            "PUT", f"{target}{joiner}digest={blob.digest}", blob.data, "application/octet-stream"
        )
        if status != 201:
            raise RuntimeError(f"uploading {blob.digest} to {base}/{repository}: HTTP {status}")
    url = f"{base}/v2/{repository}/manifests/{tag}"
    status, _ = _call("PUT", url, pushed.manifest.data, MANIFEST)
    if status != 201:
        raise RuntimeError(f"pushing the manifest {url}: HTTP {status}")


def archive(path: Path, name: str, saved: Image) -> Path:
    """``saved`` as an OCI archive naming it ``name`` (what ``ctr images import`` reads)."""
    index = {
        "schemaVersion": 2,
        "manifests": [
            saved.manifest.descriptor(
                **{
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                }
            )
        ],
    }
    members = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index).encode(),
        **{
            f"blobs/sha256/{blob.digest.split(':')[1]}": blob.data
            for blob in (saved.layer, saved.config, saved.manifest)
        },
    }
    with tarfile.open(path, "w") as tar:
        for member, data in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path

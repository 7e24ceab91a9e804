"""OCI images without a Docker engine: blobs, image manifests and indexes, an OCI layout archive
(what ``ctr images import``, ``skopeo copy oci-archive:`` and ``crane`` read), and a push over the
distribution API. Used by the release's image (release/image.py) and by the test images of the
real-runtime sandbox (tests/e2e/testimages.py).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

MANIFEST: Final = "application/vnd.oci.image.manifest.v1+json"
INDEX: Final = "application/vnd.oci.image.index.v1+json"
CONFIG: Final = "application/vnd.oci.image.config.v1+json"
LAYER: Final = "application/vnd.oci.image.layer.v1.tar+gzip"
# The annotations containerd and the OCI layout name an image by.
CONTAINERD_NAME: Final = "io.containerd.image.name"
REF_NAME: Final = "org.opencontainers.image.ref.name"


class PushError(RuntimeError):
    """The registry refused a push."""


@dataclass(frozen=True)
class Blob:
    media_type: str
    data: bytes

    @property
    def digest(self) -> str:
        return f"sha256:{hashlib.sha256(self.data).hexdigest()}"

    def descriptor(self, **more: object) -> dict[str, object]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": len(self.data), **more}


@dataclass(frozen=True)
class Image:
    """One platform's image: its layers, its config and its manifest."""

    layers: tuple[Blob, ...]
    config: Blob
    manifest: Blob
    arch: str

    @property
    def blobs(self) -> tuple[Blob, ...]:
        return (*self.layers, self.config, self.manifest)


def _json(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def image(layers: Sequence[tuple[Blob, str]], arch: str, config: dict[str, object]) -> Image:
    """An image of ``layers`` (each a gzipped tar and its diff ID) with ``config`` (the image
    config's ``config`` part: Entrypoint, Cmd, Env, User, Labels ...)."""
    config_blob = Blob(
        CONFIG,
        _json(
            {
                "architecture": arch,
                "os": "linux",
                "config": config,
                "rootfs": {"type": "layers", "diff_ids": [diff_id for _, diff_id in layers]},
            }
        ),
    )
    manifest = Blob(
        MANIFEST,
        _json(
            {
                "schemaVersion": 2,
                "mediaType": MANIFEST,
                "config": config_blob.descriptor(),
                "layers": [blob.descriptor() for blob, _ in layers],
            }
        ),
    )
    return Image(tuple(blob for blob, _ in layers), config_blob, manifest, arch)


def index(images: Sequence[Image]) -> Blob:
    """The multi-platform index of ``images``."""
    return Blob(
        INDEX,
        _json(
            {
                "schemaVersion": 2,
                "mediaType": INDEX,
                "manifests": [
                    one.manifest.descriptor(platform={"architecture": one.arch, "os": "linux"})
                    for one in images
                ],
            }
        ),
    )


def archive(
    path: Path, tag: str, top: Blob, blobs: Sequence[Blob], name: str = "", epoch: int = 0
) -> Path:
    """An OCI layout archive holding ``blobs`` whose entry point is ``top`` (an image's manifest or
    an index), its ref name ``tag``; ``name``, a full reference (``registry.k8s.io/pause:3.10``),
    is what ``ctr images import`` names it (without one: ``--base-name REGISTRY/REPOSITORY``)."""
    annotations = {REF_NAME: tag, **({CONTAINERD_NAME: name} if name else {})}
    entry = top.descriptor(annotations=annotations)
    members = {
        "oci-layout": _json({"imageLayoutVersion": "1.0.0"}),
        "index.json": _json({"schemaVersion": 2, "manifests": [entry]}),
    }
    for blob in (*blobs, top):
        members[f"blobs/sha256/{blob.digest.split(':')[1]}"] = blob.data
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for member, data in sorted(members.items()):
            info = tarfile.TarInfo(member)
            info.size, info.mtime, info.mode = len(data), epoch, 0o644
            tar.addfile(info, io.BytesIO(data))
    return path


def _call(
    method: str, url: str, data: bytes | None = None, media_type: str = "", auth: str = ""
) -> tuple[int, str]:
    headers = {"Content-Type": media_type} if media_type else {}
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    if not url.startswith(("https://", "http://")):
        raise PushError(f"{url}: only https:// (or http:// to a registry on loopback) is pushed to")
    request = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:  # noqa: S310
            return answer.status, answer.headers.get("Location", "")
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers.get("Location", "")


def registry(reference: str) -> tuple[str, str]:
    """``host[:port]/repository`` (HTTPS) or ``http://127.0.0.1:port/repository`` -> the base URL
    and the repository."""
    scheme, _, rest = reference.rpartition("://")
    if scheme not in ("", "https", "http"):
        raise PushError(f"{reference}: a registry is host[:port]/repository")
    host, _, repository = rest.partition("/")
    if not host or not repository:
        raise PushError(f"{reference}: a registry is host[:port]/repository")
    if scheme == "http" and host.split(":")[0] not in ("127.0.0.1", "localhost", "[::1]"):
        raise PushError(f"{reference}: http:// is for a registry on loopback only; use HTTPS")
    return f"{scheme or 'https'}://{host}", repository


def push_blob(base: str, repository: str, blob: Blob, auth: str = "") -> None:
    """``blob`` into ``repository`` at the registry ``base`` (``https://host[:port]``), unless it
    is there already."""
    if _call("HEAD", f"{base}/v2/{repository}/blobs/{blob.digest}", auth=auth)[0] == 200:
        return
    status, location = _call("POST", f"{base}/v2/{repository}/blobs/uploads/", auth=auth)
    if status != 202:
        raise PushError(f"{base}/v2/{repository}: starting an upload answered HTTP {status}")
    target = location if location.startswith("http") else base + location
    joiner = "&" if "?" in target else "?"
    url = f"{target}{joiner}digest={blob.digest}"
    status, _ = _call("PUT", url, blob.data, "application/octet-stream", auth)
    if status != 201:
        raise PushError(f"{base}/v2/{repository}: uploading {blob.digest} answered HTTP {status}")


def push_manifest(base: str, repository: str, tag: str, blob: Blob, auth: str = "") -> None:
    url = f"{base}/v2/{repository}/manifests/{tag}"
    status, _ = _call("PUT", url, blob.data, blob.media_type, auth)
    if status != 201:
        raise PushError(f"{url}: pushing the manifest answered HTTP {status}")


def push(base: str, repository: str, tag: str, pushed: Image, auth: str = "") -> None:
    """One image as ``repository:tag``."""
    for blob in (*pushed.layers, pushed.config):
        push_blob(base, repository, blob, auth)
    push_manifest(base, repository, tag, pushed.manifest, auth)


def push_archive(path: Path, reference: str, tag: str, auth: str = "") -> str:
    """The image or index an OCI layout archive names, with everything it refers to, pushed to
    ``reference`` as ``:tag``; its digest."""
    base, repository = registry(reference)
    with tarfile.open(path) as tar:
        members = {
            member.name: extracted.read()
            for member in tar.getmembers()
            if member.isfile() and (extracted := tar.extractfile(member)) is not None
        }

    def blob(descriptor: dict[str, str]) -> Blob:
        data = members[f"blobs/sha256/{descriptor['digest'].split(':')[1]}"]
        return Blob(descriptor["mediaType"], data)

    top = blob(json.loads(members["index.json"])["manifests"][0])
    manifests = (
        [blob(entry) for entry in json.loads(top.data)["manifests"]]
        if top.media_type == INDEX
        else [top]
    )
    for manifest in manifests:
        document = json.loads(manifest.data)
        for entry in (*document["layers"], document["config"]):
            push_blob(base, repository, blob(entry), auth)
        if manifest is not top:
            push_manifest(base, repository, manifest.digest, manifest, auth)
    push_manifest(base, repository, tag, top, auth)
    return top.digest

"""The bundle as a Talos system extension: Talos' lasting way to put a credential provider on a
node (its image is read-only, and the kubelet's bin dir is filled by extensions alone).

What Talos takes, from its vendor's sources:

* the kubelet's bin dir is ``/usr/local/lib/kubelet/credentialproviders`` (siderolabs/talos
  ``pkg/machinery/constants``: ``KubeletCredentialProviderBinDir``), and Talos passes the two
  flags itself when ``machine.kubelet.credentialProviderConfig`` is set;
* an extension is an image whose filesystem holds ``manifest.yaml`` and ``rootfs/`` (siderolabs/
  extensions ``container-runtime/ecr-credential-provider/pkg.yaml``: ``finalize`` copies
  ``/rootfs`` and ``/pkg/manifest.yaml``; the plugin is installed at
  ``/rootfs/usr/local/lib/kubelet/credentialproviders/ecr-credential-provider``);
* the manifest is ``version: v1alpha1`` with ``metadata`` ``name``, ``version``, ``author``,
  ``description`` and ``compatibility.talos.version`` (siderolabs/talos
  ``pkg/machinery/extensions/metadata.go``, ``load.go``: only those two entries at the top);
* its files (siderolabs/talos ``pkg/machinery/extensions/validate.go`` and ``extensions.go``): no
  world-writable entry, nothing but directories, regular files and symlinks, every file under one
  of ``AllowedPaths`` (``/usr/local`` among them).

The kubelet runs in a container that sees only that bin dir of the extension's files (bind-mounted
read-only: platforms.md, Talos row), so the whole bundle lies inside it, in
``credprovider-<version>/``, and each plugin name is a relative link to it there.
``make release`` writes ``credprovider-<version>-talos-extension-oci.tar``, one image per
architecture and their index (``crane push``/``skopeo copy`` it to a registry, then name it in an
installer image: docs/platforms.md).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path
from typing import Final

from credprovider.entry import PLUGIN_PACKAGES
from release import oci

BIN_DIR: Final = "usr/local/lib/kubelet/credentialproviders"
ROOTFS: Final = "rootfs"
TALOS_SINCE: Final = ">= v1.6.0"  # machine.kubelet.credentialProviderConfig came with Talos 1.6
NAME: Final = "credprovider"


def archive_name(version: str) -> str:
    return f"{NAME}-{version}-talos-extension-oci.tar"


def manifest_text(version: str) -> str:
    return (
        "version: v1alpha1\n"
        "metadata:\n"
        f"  name: {NAME}\n"
        f'  version: "{version}"\n'
        "  author: credprovider\n"
        "  description: |\n"
        "    kubelet image credential provider plugins for ECR, ACR and Google registries\n"
        "    (ecr-credential-provider, acr-credential-provider, auth-provider-gcp), one bundle\n"
        "    that carries its own C library.\n"
        "  compatibility:\n"
        "    talos:\n"
        f'      version: "{TALOS_SINCE}"\n'
    )


def _entry(name: str, kind: bytes, mtime: int, mode: int, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mtime, info.mode, info.size = kind, mtime, mode, size
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def layer(tarball: Path, version: str) -> tuple[bytes, bytes]:
    """The extension's one layer (gzipped) and its uncompressed tar (the diff ID's input), from
    the release tarball: its ``credprovider-<version>/`` under the kubelet's bin dir, the plugin
    links beside it, and the manifest. Reproducible: the tarball's order and times, root's."""
    top = f"{NAME}-{version}"
    raw = io.BytesIO()
    with (
        tarfile.open(tarball) as source,
        tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as out,
    ):
        members = source.getmembers()
        epoch = int(members[0].mtime) if members else 0
        text = manifest_text(version).encode()
        out.addfile(
            _entry("manifest.yaml", tarfile.REGTYPE, epoch, 0o644, len(text)), io.BytesIO(text)
        )
        parts = [ROOTFS, *BIN_DIR.split("/")]
        for depth in range(1, len(parts) + 1):
            out.addfile(_entry("/".join(parts[:depth]), tarfile.DIRTYPE, epoch, 0o755))
        for member in members:
            if member.name != top and not member.name.startswith(f"{top}/"):
                raise ValueError(f"{tarball} holds {member.name}, outside {top}/")
            writable = member.mode & 0o002 and not member.issym()  # a link's mode is not its own
            if writable or not (member.isfile() or member.isdir() or member.issym()):
                raise ValueError(f"{tarball} holds {member.name}, which Talos refuses")
            moved = _entry(
                f"{ROOTFS}/{BIN_DIR}/{member.name}", member.type, int(member.mtime), member.mode,
                member.size,
            )  # fmt: skip
            moved.linkname = member.linkname
            out.addfile(moved, source.extractfile(member) if member.isfile() else None)
        for plugin in sorted(PLUGIN_PACKAGES):
            link = _entry(f"{ROOTFS}/{BIN_DIR}/{plugin}", tarfile.SYMTYPE, epoch, 0o777)
            link.linkname = f"{top}/{plugin}"
            out.addfile(link)
    data = raw.getvalue()
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=6) as gz:
        gz.write(data)
    return packed.getvalue(), data


def extension_image(tarball: Path, arch: str, version: str) -> oci.Image:
    """``arch``'s extension image: its one layer, a config that runs nothing."""
    packed, data = layer(tarball, version)
    diff_id = f"sha256:{hashlib.sha256(data).hexdigest()}"
    config: dict[str, object] = {
        "Labels": {
            "org.opencontainers.image.title": f"{NAME} Talos system extension",
            "org.opencontainers.image.version": version,
            "org.opencontainers.image.licenses": "Apache-2.0",
        }
    }
    return oci.image([(oci.Blob(oci.LAYER, packed), diff_id)], arch, config)


def write(out: Path, version: str, images: list[oci.Image], epoch: int = 0) -> Path:
    """The archive of every architecture's extension image and their index, tagged
    ``<version>``."""
    top = oci.index(images)
    blobs = [blob for built in images for blob in built.blobs]
    return oci.archive(out / archive_name(version), version, top, blobs, epoch=epoch)

"""The release's Talos system extension (release/talos.py): each architecture's image is what Talos
loads, checked with Talos' own rules as its sources state them (siderolabs/talos
``pkg/machinery/extensions``: ``load.go``, ``metadata.go``, ``validate.go``, ``extensions.go``;
their Go module is not on this machine's proxy, so the rules are applied here), and a plugin runs
from the kubelet's bin dir alone: in a root holding nothing but that directory (the kubelet's
container on Talos sees only it of the extension) and /proc.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from credprovider.entry import PLUGIN_PACKAGES
from release import bundle, oci, talos
from release.targets import Target
from tests.helpers import private
from tests.release.test_image import archive_members, blob

RELEASE = bundle.REPO / "dist" / "release"
# siderolabs/talos pkg/machinery/extensions/extensions.go: AllowedPaths
ALLOWED = ("/etc/cri/conf.d", "/lib/firmware", "/lib/modules", "/lib64/ld-linux-x86-64.so.2",
           "/sbin/ldconfig", "/usr/lib/udev/rules.d", "/usr/local", "/usr/share/glvnd",
           "/usr/share/egl", "/etc/vulkan")  # fmt: skip


@pytest.fixture
def unpacked(tarball: Path, target: Target, tmp_path: Path) -> Path:
    """``target``'s extension image from the release's archive, its layer unpacked as Talos
    unpacks an extension (manifest.yaml and rootfs/)."""
    version = bundle.project_version()
    path = RELEASE / talos.archive_name(version)
    assert path.exists(), f"{path} is missing beside {tarball.name}: make release writes both"
    members = archive_members(path)
    [top] = json.loads(members["index.json"])["manifests"]
    index = json.loads(blob(members, top["digest"]))
    [entry] = [m for m in index["manifests"] if m["platform"]["architecture"] == target.arch]
    manifest = json.loads(blob(members, entry["digest"]))
    [layer] = manifest["layers"]
    assert layer["mediaType"] == oci.LAYER
    out = tmp_path / "extension"
    out.mkdir()
    with tarfile.open(fileobj=io.BytesIO(blob(members, layer["digest"]))) as tar:
        tar.extractall(out, filter="tar")
    return out


def test_the_extension_is_one_talos_loads_and_validates(unpacked: Path) -> None:
    # load.go: only manifest.yaml and rootfs at the top; the manifest v1alpha1
    assert sorted(p.name for p in unpacked.iterdir()) == ["manifest.yaml", "rootfs"]
    manifest = yaml.safe_load((unpacked / "manifest.yaml").read_text())
    assert manifest["version"] == "v1alpha1"
    metadata = manifest["metadata"]
    assert metadata["name"] == "credprovider"
    assert metadata["version"] == bundle.project_version()
    assert metadata["author"] and metadata["description"]
    assert metadata["compatibility"]["talos"]["version"] == ">= v1.6.0"
    # validate.go: nothing world-writable, no special file, every file under an allowed path
    rootfs = unpacked / "rootfs"
    for path in rootfs.rglob("*"):
        found = path.lstat()
        where = "/" + str(path.relative_to(rootfs))
        if stat.S_ISLNK(found.st_mode):
            continue
        assert not found.st_mode & 0o002, where
        assert stat.S_ISDIR(found.st_mode) or stat.S_ISREG(found.st_mode), where
        if not stat.S_ISDIR(found.st_mode):
            assert any(where.startswith(allowed) for allowed in ALLOWED), where


def test_a_plugin_runs_from_the_kubelets_bin_dir_alone(unpacked: Path, target: Target) -> None:
    """The kubelet's container sees only /usr/local/lib/kubelet/credentialproviders: each plugin
    name is a link inside it, and the bundle with its own C library lies there too."""
    bin_dir = unpacked / "rootfs" / talos.BIN_DIR
    for name in PLUGIN_PACKAGES:
        link = bin_dir / name
        assert link.is_symlink() and not os.readlink(link).startswith("/"), name
        assert link.resolve().is_relative_to(bin_dir.resolve()), name
    if target.arch != os.uname().machine.replace("x86_64", "amd64").replace("aarch64", "arm64"):
        pytest.skip(f"{target.arch} runs under qemu-user in test_old_userland; here only links")
    view = unpacked.parent / "kubelet-view"
    inside = view / talos.BIN_DIR
    script = "\n".join([
        "set -e",
        f"mkdir -p {shlex.quote(str(inside))} {shlex.quote(str(view / 'proc'))}",
        f"mount --bind -o ro {shlex.quote(str(bin_dir))} {shlex.quote(str(inside))}",
        f"mount -t proc proc {shlex.quote(str(view / 'proc'))}",
        f"chroot {shlex.quote(str(view))} /{talos.BIN_DIR}/ecr-credential-provider --version",
    ])  # fmt: skip
    done = subprocess.run(
        private(["sh", "-c", script]), capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ecr-credential-provider "), done.stdout
    assert bundle.project_version() in done.stdout

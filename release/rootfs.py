"""Debian 11 (bullseye, glibc 2.31) root filesystems, one per target, made once and cached.

Bundles are built in them (PyInstaller resolves libraries with the root filesystem's ldd, so nothing
of this machine's newer libraries can slip into a bundle) and tested in them (an older userland
than this machine's). debootstrap's first stage runs here; the second stage, which runs the
target's binaries, runs in a sandbox (qemu-user for arm64), so the host's mounts and binfmt_misc
stay as they were.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

from release import chroot
from release.native import cache_root
from release.targets import DEBIAN_MIRROR, DEBIAN_SUITE, Target

# binutils: PyInstaller strips the bundle with the target's own strip.
PACKAGES: Final = ("binutils",)


def rootfs_dir(target: Target) -> Path:
    recipe = f"{DEBIAN_SUITE} {target.arch} {PACKAGES} {Path(__file__).read_text()}"
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    return cache_root() / "rootfs" / f"{DEBIAN_SUITE}-{target.arch}-{key}"


def ensure(target: Target) -> Path:
    """The cached root filesystem for ``target``, made with debootstrap if there is none yet."""
    root = rootfs_dir(target)
    if (root / ".complete").exists():
        return root
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is missing: apt-get install debootstrap")
    # Root filesystems of other recipes for this suite and architecture are stale: drop them.
    for stale in root.parent.glob(f"{DEBIAN_SUITE}-{target.arch}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    partial = root.with_name(root.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.write(f"[rootfs] {target.arch}: debootstrap {DEBIAN_SUITE} into {partial}\n")
    subprocess.run(
        [
            "debootstrap", "--foreign", f"--arch={target.arch}", "--variant=minbase",
            f"--include={','.join(PACKAGES)}", DEBIAN_SUITE, str(partial), DEBIAN_MIRROR,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    # container=lxc: debootstrap then neither creates device nodes (the first stage did, and the
    # sandbox binds /dev) nor mounts /proc itself.
    spec = chroot.spec_for(
        target,
        partial,
        ["/debootstrap/debootstrap", "--second-stage"],
        env=chroot.env_with_path({"container": "lxc"}),
        overlay=False,
    )
    result = chroot.run(spec, timeout=1800)
    if result.returncode != 0:
        log = (partial / "debootstrap" / "debootstrap.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(
            f"debootstrap second stage failed ({result.returncode}):\n{result.stderr.decode()}\n{log}"
        )
    (partial / ".complete").touch()
    partial.rename(root)
    return root


def package_versions(root: Path, names: list[str]) -> dict[str, str]:
    """Installed versions of ``names`` in ``root``'s dpkg database."""
    versions: dict[str, str] = {}
    status = (root / "var" / "lib" / "dpkg" / "status").read_text()
    for stanza in status.split("\n\n"):
        fields = dict(
            line.split(": ", 1)
            for line in stanza.splitlines()
            if ": " in line and not line.startswith(" ")
        )
        if fields.get("Package") in names and "installed" in fields.get("Status", ""):
            versions[fields["Package"]] = fields["Version"]
    return versions

"""What a build will have to make first, and about how long that takes, said before it starts.

A cold build makes the portable interpreter (OpenSSL and CPython compiled) and a Debian 11 root
filesystem (debootstrap); both are cached (release/native.py, release/rootfs.py), so later builds
take under a minute. The figures are measured on a 2-core machine from an empty cache and scaled by
this machine's cores where the work is compiling.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Final

from release import native, rootfs, wheels
from release.targets import Target, host_target

MEASURED_CORES: Final = 2


@dataclass(frozen=True)
class Piece:
    what: str
    seconds: int  # on MEASURED_CORES cores, from an empty cache
    compiles: bool  # scales with cores (a compile), or not (downloads, emulated work)


# Measured 2026-11-25 on a 2-core machine, empty cache: amd64's root filesystem, wheels and analysis
# about 80 s, arm64's (under qemu-user) about 200 s. The interpreters measured again 2026-11-27
# (ThinLTO, the fixed-path namespace): amd64's 467-484 s, arm64's 338-352 s (cross-compiled); a
# whole cold release of both architectures 21.6 min.
INTERPRETER: Final = Piece("the portable interpreter (OpenSSL, CPython)", 480, True)
CROSS_INTERPRETER: Final = Piece("the portable interpreter (OpenSSL, CPython)", 350, True)
ROOTFS: Final = Piece("a Debian 11 root filesystem (debootstrap)", 60, False)
FOREIGN_ROOTFS: Final = Piece("a Debian 11 root filesystem, under qemu-user", 150, False)
WHEELS: Final = Piece("the locked wheels", 20, False)


def uncached(target: Target) -> list[Piece]:
    """What building ``target``'s bundle will make first: nothing when the cache holds it all."""
    pieces = []
    if not target.is_native() and not (native.python_prefix(host_target()) / "BUILT.json").exists():
        pieces.append(INTERPRETER)
    if not (native.python_prefix(target) / "BUILT.json").exists():
        pieces.append(INTERPRETER if target.is_native() else CROSS_INTERPRETER)
    if not (rootfs.rootfs_dir(target) / ".complete").exists():
        pieces.append(ROOTFS if target.is_native() else FOREIGN_ROOTFS)
    if not (wheels.site_dir(target) / ".complete").exists():
        pieces.append(WHEELS)
    return pieces


def estimate(pieces: list[Piece], cores: int) -> int:
    """Seconds for ``pieces`` on ``cores`` cores."""
    scale = MEASURED_CORES / max(cores, 1)
    return round(sum(p.seconds * (scale if p.compiles else 1) for p in pieces))


def notice(target: Target, pieces: list[Piece], cores: int) -> str | None:
    if not pieces:
        return None
    minutes = max(1, round(estimate(pieces, cores) / 60))
    made = "; ".join(dict.fromkeys(p.what for p in pieces))
    return (
        f"[build] {target.arch}: first build on this machine, about {minutes} min on {cores} "
        f"cores: {made}. They are cached in {native.cache_root()}: later builds take under a minute."
    )


def announce(target: Target) -> None:
    text = notice(target, uncached(target), os.cpu_count() or 1)
    if text:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

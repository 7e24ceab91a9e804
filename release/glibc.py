"""The C library a bundle carries: Debian 12's libc6 (release/debs.py), so a node's libc is never used.

The launcher runs the interpreter through the bundle's own loader (``_internal/ld-linux-*``, with
``--inhibit-cache --library-path _internal``), so a bundle starts where there is no glibc at all
(Talos, Alpine, distroless roots) and, on a glibc node, runs the very libc it was tested with. Debian
12's glibc (2.36) is security-supported until mid-2028; the interpreter needs only what glibc 2.17
has (release/targets.py), so ``python -m release.debs --refresh`` can take any later Debian 12 fix.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Final

from release import debs
from release.targets import Target

PACKAGE: Final = "libc6"
# Where libc6 puts the libraries and the loader on a multiarch Debian.
LIBRARY_DIR: Final = "lib/{triplet}"
COPYRIGHT: Final = "usr/share/doc/libc6/copyright"
LICENSE: Final = "LGPL-2.1-or-later"


def pin() -> debs.Pin:
    return debs.load_lock()[PACKAGE]


def library_dir(target: Target) -> Path:
    return debs.unpacked(PACKAGE, target) / LIBRARY_DIR.format(triplet=target.gnu_triplet)


def add_to(target: Target, contents: Path) -> None:
    """Copy glibc's files (``target.glibc_files``) into the bundle's ``contents`` (``_internal/``)."""
    source_dir = library_dir(target)
    for name in target.glibc_files:
        source = source_dir / name
        if not source.exists():
            raise debs.DebError(f"{PACKAGE} for {target.arch} has no {name} in {source_dir}")
        shutil.copyfile(source.resolve(), contents / name)
        (contents / name).chmod(0o755)


def copyright_text(target: Target) -> str:
    return (debs.unpacked(PACKAGE, target) / COPYRIGHT).read_text(errors="replace")

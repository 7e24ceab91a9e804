"""The architectures a release is built for, and the glibc facts they share: one place for each fact."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Final

# The glibc version the interpreter and its modules are linked against (zig links against any
# version's symbol set). A bundle no longer uses the node's libc: it carries its own (release/glibc.py),
# so this is no longer what a node needs; it stays the oldest, which keeps the interpreter's recipe.
GLIBC_FLOOR: Final = (2, 17)
# RHEL 8 ships GCC 8's libstdc++: GLIBCXX_3.4.25 and CXXABI_1.3.11 are the newest it has.
GLIBCXX_LIMIT: Final = (3, 4, 25)
CXXABI_LIMIT: Final = (1, 3, 11)
# glibc's files a bundle carries in _internal/ besides the target's loader: the libraries the
# interpreter and its modules link, and the name-service modules glibc keeps outside libc.so.6 (files
# and dns are inside it since 2.34). A glibc module of the node's own (libnss_compat for a
# "passwd: compat" line) would need the node glibc's private symbols: the bundle's is found first.
GLIBC_FILES: Final = (
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libutil.so.1",
    "libresolv.so.2",
    "libnss_compat.so.2",
    "libnss_hesiod.so.2",
)

# The Debian suite of the root filesystems the bundles are built and tested in (glibc 2.31).
DEBIAN_SUITE: Final = "bullseye"
DEBIAN_MIRROR: Final = "http://deb.debian.org/debian"


@dataclass(frozen=True)
class Target:
    arch: str  # Debian, Go and Kubernetes name: amd64, arm64
    machine: str  # uname -m, and zig's CPU name: x86_64, aarch64
    elf_machine: str  # e_machine as pyelftools names it
    qemu: str  # the qemu-user binary that runs it on another machine
    binfmt_magic: (
        str  # binfmt_misc "magic:mask" of its ELF executables (escaped as the kernel reads it)
    )
    loader: str  # glibc's dynamic loader (PT_INTERP's file name), carried in _internal/

    @property
    def glibc_files(self) -> tuple[str, ...]:
        """Every file of glibc's the bundle carries: the loader first."""
        return (self.loader, *GLIBC_FILES)

    @property
    def zig_target(self) -> str:
        return f"{self.machine}-linux-gnu.{GLIBC_FLOOR[0]}.{GLIBC_FLOOR[1]}"

    @property
    def gnu_triplet(self) -> str:
        return f"{self.machine}-linux-gnu"

    @property
    def wheel_platforms(self) -> list[str]:
        """pip --platform tags, newest first, none newer than the floor."""
        return [
            f"manylinux_{GLIBC_FLOOR[0]}_{GLIBC_FLOOR[1]}_{self.machine}",
            f"manylinux2014_{self.machine}",
        ]

    def is_native(self) -> bool:
        return platform.machine() == self.machine


_ELF_HEAD = r"\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00"
_ELF_MASK = r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff"

TARGETS: Final = {
    "amd64": Target(
        "amd64",
        "x86_64",
        "EM_X86_64",
        "qemu-x86_64-static",
        rf"{_ELF_HEAD}\x3e\x00:{_ELF_MASK}\xff\xff",
        "ld-linux-x86-64.so.2",
    ),
    "arm64": Target(
        "arm64",
        "aarch64",
        "EM_AARCH64",
        "qemu-aarch64-static",
        rf"{_ELF_HEAD}\xb7\x00:{_ELF_MASK}\xff\xff",
        "ld-linux-aarch64.so.1",
    ),
}


def host_target() -> Target:
    for target in TARGETS.values():
        if target.is_native():
            return target
    raise RuntimeError(f"no release target for this machine ({platform.machine()})")


def target(arch: str) -> Target:
    try:
        return TARGETS[arch]
    except KeyError:
        raise ValueError(
            f"unknown architecture {arch!r}; choose one of {', '.join(TARGETS)}"
        ) from None

"""zig as a C cross compiler for every target, linking against the glibc floor whatever the host has.

``ziglang`` (PyPI) ships zig; ``zig cc -target x86_64-linux-gnu.2.17`` compiles with its own glibc
headers and links against stubs of exactly that glibc version, so nothing of the build machine's
libc leaks into the result. The wrappers written here make it look like a plain ``cc`` to configure
scripts, with three adjustments that CPython's and libffi's builds need.
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from release.targets import Target

ZIG_VERSION: Final = "0.15.2"

# Shell wrapper around ``zig cc``:
# - ``-print-multiarch`` says nothing: there are no multiarch system directories in this hermetic
#   toolchain (CPython's setup.py would otherwise add the host's /usr/include/<triplet>);
# - ``-Wl,-h<soname>`` (which zig's linker driver does not know) becomes ``-Wl,-soname,<soname>``;
# - UBSan traps stay off (zig turns them on at -O0, which configure's test programs use) and
#   __DATE__/__TIME__ are allowed (SOURCE_DATE_EPOCH fixes them).
_CC_WRAPPER: Final = """#!/bin/sh
case "$*" in -print-multiarch|--print-multiarch) exit 1 ;; esac
for arg do
  shift
  case $arg in
    -Wl,-h*) set -- "$@" "-Wl,-soname,${{arg#-Wl,-h}}" ;;
    *) set -- "$@" "$arg" ;;
  esac
done
exec {zig} {tool} -target {target} -fno-sanitize=undefined -Wno-error=date-time "$@"
"""
_TOOL_WRAPPER: Final = """#!/bin/sh
exec {zig} {tool} "$@"
"""


@dataclass(frozen=True)
class Toolchain:
    directory: Path
    target: Target

    @property
    def cc(self) -> str:
        return str(self.directory / "cc")

    def env(self) -> dict[str, str]:
        """Compiler settings for configure, make and cmake."""
        return {
            "CC": self.cc,
            "CXX": str(self.directory / "c++"),
            "AR": str(self.directory / "ar"),
            "RANLIB": str(self.directory / "ranlib"),
            "STRIP": "true",  # PyInstaller strips the bundle with the target's binutils
        }


def zig_binary() -> Path:
    """The zig shipped by the ``ziglang`` package (a test dependency: ``make venv`` installs it)."""
    try:
        import ziglang  # type: ignore[import-untyped]
    except ImportError:
        raise RuntimeError(
            f"zig is missing: pip install ziglang=={ZIG_VERSION} (make venv does)"
        ) from None
    return Path(ziglang.__file__).parent / "zig"


def make_toolchain(target: Target, directory: Path) -> Toolchain:
    """Write the compiler wrappers for ``target`` into ``directory``."""
    zig = zig_binary()
    directory.mkdir(parents=True, exist_ok=True)
    wrappers = {
        "cc": _CC_WRAPPER.format(zig=zig, tool="cc", target=target.zig_target),
        "c++": _CC_WRAPPER.format(zig=zig, tool="c++", target=target.zig_target),
        "ar": _TOOL_WRAPPER.format(zig=zig, tool="ar"),
        "ranlib": _TOOL_WRAPPER.format(zig=zig, tool="ranlib"),
    }
    for name, text in wrappers.items():
        path = directory / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return Toolchain(directory, target)


def wrapper_text() -> str:
    """What the wrappers are made of: part of the recipe's cache key."""
    return _CC_WRAPPER + _TOOL_WRAPPER + ZIG_VERSION


def compile_static(toolchain: Toolchain, source: Path, output: Path, flags: list[str]) -> None:
    """One C file to one fully static executable (the bundle's launcher)."""
    zig = zig_binary()
    target = f"{toolchain.target.machine}-linux-musl"
    subprocess.run(
        [
            str(zig),
            "cc",
            "-target",
            target,
            "-static",
            "-Os",
            "-s",
            *flags,
            "-o",
            str(output),
            str(source),
        ],
        check=True,
        env={**os.environ, "ZIG_GLOBAL_CACHE_DIR": str(toolchain.directory / "zig-cache")},
    )

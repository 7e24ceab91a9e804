"""The portable interpreter: CPython and its native libraries, built by zig against the glibc floor.

Sources are Debian's (``sources.lock.json``), compiled for one target into a cached prefix keyed by the
recipe (the lock, this file, the toolchain and the floor), so a warm machine never rebuilds it:

- OpenSSL as shared libraries (libssl.so.3, libcrypto.so.3), as CPython's _ssl and _hashlib use them;
- zlib as a shared library too (libz.so.1): PyInstaller's bootloader links it, and the launcher puts
  the bundle's library directory on its LD_LIBRARY_PATH;
- bzip2, xz (liblzma), libffi and expat as static archives linked into the extension modules that
  use them;
- CPython with a shared libpython (PyInstaller needs one) and only the modules a bundle can use.

Another architecture is cross-compiled; its CPython build runs the host's build of the same recipe.

The build runs in a private mount namespace (release/chroot.py, without a chroot) that shows the
cache at one fixed path, ``FIXED_CACHE``: configure bakes the prefix into libpython, OpenSSL its
module directory and compiler line, the compilers the source paths of asserts, _sysconfigdata all
of them. So every machine, whatever its cache directory or user, builds the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from release import chroot, sources, targets, toolchain
from release.targets import GLIBC_FLOOR, Target, host_target

# Where the bundle's OpenSSL looks for openssl.cnf and default CA paths. Deliberately not the node's
# /etc/ssl or /etc/pki: a distribution's config (a FIPS provider, crypto-policies includes) is written
# for its own OpenSSL build. TLS trust comes from certifi, or AWS_CA_BUNDLE / REQUESTS_CA_BUNDLE /
# SSL_CERT_FILE (docs/release.md).
OPENSSL_DIR: Final = "/etc/credprovider/ssl"
# Modules a node bundle never uses, or whose libraries would come from the node (libcrypt, libnsl,
# ncurses, readline, sqlite, Tk, gdbm, libuuid).
# What configure would learn by running a test program, which it cannot do for another architecture:
# the answers for Linux with glibc (its cross-compiling defaults assume the worst).
CROSS_ANSWERS: Final = {
    "ac_cv_file__dev_ptmx": "yes",
    "ac_cv_file__dev_ptc": "no",
    "ac_cv_buggy_getaddrinfo": "no",
    "ac_cv_aligned_required": "no",
    "ac_cv_broken_sem_getvalue": "no",
    "ac_cv_working_tzset": "yes",
    "ac_cv_computed_gotos": "yes",
    "ac_cv_pthread_system_supported": "yes",
    "ac_cv_have_chflags": "no",
    "ac_cv_have_lchflags": "no",
}
DISABLED_MODULES: Final = (
    "_crypt", "nis", "_dbm", "_gdbm", "readline", "_curses", "_curses_panel", "_tkinter",
    "_sqlite3", "_uuid",
)  # fmt: skip
SOURCE_DATE_EPOCH: Final = "1700000000"
# Link-time optimisation of CPython itself (not of the extension modules third parties build against
# it): every exec runs the interpreter's start-up and imports, and ThinLTO takes 6-8% of the
# instructions off both (callgrind, this recipe with and without it). PGO would give more, but zig
# ships no profile runtime for -fprofile-instr-generate.
CPYTHON_NODIST_FLAGS: Final = {"CFLAGS_NODIST": "-flto=thin", "LDFLAGS_NODIST": "-flto=thin"}
# Where the build sees the cache (a bind mount on the namespace's own tmpfs over /mnt): the one path
# every interpreter's files name, on any machine.
FIXED_CACHE: Final = "/mnt/credprovider-build"
HOST_CACHE_VARIABLE: Final = "CREDPROVIDER_BUILD_CACHE_ON_HOST"


def cache_root() -> Path:
    """Where built interpreters, root filesystems and downloads are kept between runs."""
    configured = os.environ.get("CREDPROVIDER_BUILD_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "credprovider-build"


def recipe_key(target: Target) -> str:
    """Changes whenever anything that goes into the interpreter changes."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in ("sources.lock.json", "native.py", "toolchain.py"):
        digest.update((here / name).read_bytes())
    for patch in sorted((here / "patches").rglob("*.patch")):
        digest.update(patch.read_bytes())
    digest.update(toolchain.wrapper_text().encode())
    digest.update(f"{target.arch} {GLIBC_FLOOR}".encode())
    return digest.hexdigest()[:16]


def python_prefix(target: Target) -> Path:
    return cache_root() / "python" / f"{target.arch}-{recipe_key(target)}"


def _log(message: str) -> None:
    # In the namespace, the paths said are the ones the host shows (where the logs can be read).
    message = message.replace(FIXED_CACHE, os.environ.get(HOST_CACHE_VARIABLE, FIXED_CACHE))
    sys.stderr.write(f"[native] {message}\n")
    sys.stderr.flush()


def _run(argv: list[str], cwd: Path, env: Mapping[str, str], log: Path) -> None:
    with log.open("a") as handle:
        handle.write(f"\n$ {' '.join(argv)}\n")
        handle.flush()
        result = subprocess.run(
            argv, cwd=cwd, env=dict(env), stdout=handle, stderr=subprocess.STDOUT
        )
    if result.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-25:]
        raise RuntimeError(
            f"{argv[0]} failed in {cwd} (exit {result.returncode}); last lines of {log}:\n"
            + "\n".join(tail)
        )


class Build:
    """One target's build: a work directory, a toolchain and the prefix everything installs into."""

    def __init__(self, target: Target, work: Path, prefix: Path, jobs: int) -> None:
        self.target, self.work, self.prefix, self.jobs = target, work, prefix, jobs
        self.lock = sources.load_lock()
        self.tools = toolchain.make_toolchain(target, work / "toolchain")
        # No multiarch system directories in this hermetic toolchain (see toolchain.py).
        stub = work / "toolchain" / "dpkg-architecture"
        stub.write_text("#!/bin/sh\nexit 1\n")
        stub.chmod(0o755)
        self.log = work / "build.log"
        self.env = {
            "PATH": f"{self.tools.directory}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(work),
            "LANG": "C.UTF-8",
            "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH,
            "ZIG_GLOBAL_CACHE_DIR": str(cache_root() / "zig-cache"),
            **self.tools.env(),
            "CFLAGS": "-O2 -fPIC",
            "CPPFLAGS": f"-I{prefix}/include",
            "LDFLAGS": f"-L{prefix}/lib",
            "PKG_CONFIG_PATH": f"{prefix}/lib/pkgconfig",
            "PKG_CONFIG_LIBDIR": f"{prefix}/lib/pkgconfig",
        }

    def source(self, name: str) -> Path:
        return sources.unpack(self.lock, name, cache_root() / "sources", self.work / "src")

    def run(self, argv: list[str], cwd: Path, **extra: str) -> None:
        _run(argv, cwd, {**self.env, **extra}, self.log)

    def autotools(self, name: str, *options: str, subdir: str = "") -> None:
        source = self.source(name) / subdir
        host = [] if self.target.is_native() else [f"--host={self.target.gnu_triplet}"]
        self.run(["./configure", f"--prefix={self.prefix}", *host, *options], source)
        self.run(["make", f"-j{self.jobs}"], source)
        self.run(["make", "install"], source)

    def zlib(self) -> None:
        source = self.source("zlib")
        # Shared as well as static: PyInstaller's bootloader itself links libz.so.1. lld refuses
        # zlib.map's versions for symbols configure's one-function test library lacks.
        ldshared = f"{self.env['CC']} -shared -Wl,-soname,libz.so.1,--version-script,zlib.map -Wl,--undefined-version"
        self.run(["./configure", f"--prefix={self.prefix}"], source, LDSHARED=ldshared)
        self.run(["make", f"-j{self.jobs}"], source)
        self.run(["make", "install"], source)

    def bzip2(self) -> None:
        source = self.source("bzip2")
        flags = "-O2 -fPIC -D_FILE_OFFSET_BITS=64"
        cc, ar, ranlib = self.env["CC"], self.env["AR"], self.env["RANLIB"]
        self.run(
            [
                "make",
                f"-j{self.jobs}",
                "libbz2.a",
                f"CC={cc}",
                f"AR={ar}",
                f"RANLIB={ranlib}",
                f"CFLAGS={flags}",
            ],
            source,
        )
        shutil.copy2(source / "libbz2.a", self.prefix / "lib" / "libbz2.a")
        shutil.copy2(source / "bzlib.h", self.prefix / "include" / "bzlib.h")

    def expat(self) -> None:
        source = self.source("expat") / "expat"
        build = source / "build"
        build.mkdir()
        cross = (
            []
            if self.target.is_native()
            else ["-DCMAKE_SYSTEM_NAME=Linux", f"-DCMAKE_SYSTEM_PROCESSOR={self.target.machine}"]
        )
        options = [
            f"-DEXPAT_{name}=OFF"
            for name in (
                "SHARED_LIBS",
                "BUILD_TOOLS",
                "BUILD_EXAMPLES",
                "BUILD_TESTS",
                "BUILD_DOCS",
            )
        ]
        self.run(
            [
                "cmake", "..", f"-DCMAKE_INSTALL_PREFIX={self.prefix}", "-DCMAKE_INSTALL_LIBDIR=lib",
                "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_AR={self.env['AR']}", f"-DCMAKE_RANLIB={self.env['RANLIB']}",
                *cross, *options,
            ],
            build,
        )  # fmt: skip
        # Debian's security patches test "#if XML_DTD == 1", as autotools defines it; CMake's
        # config header defines the feature macros empty.
        header = build / "expat_config.h"
        text = re.sub(
            r"^#define (XML_DTD|XML_NS)\s*$", r"#define \1 1", header.read_text(), flags=re.M
        )
        header.write_text(text)
        self.run(["make", f"-j{self.jobs}"], build)
        self.run(["make", "install"], build)

    def openssl(self) -> None:
        source = self.source("openssl")
        platform = {"x86_64": "linux-x86_64", "aarch64": "linux-aarch64"}[self.target.machine]
        self.run(
            [
                "./Configure", platform, f"--prefix={self.prefix}", "--libdir=lib", f"--openssldir={OPENSSL_DIR}",
                "shared", "no-tests", "no-engine", "no-module", "-O2",
            ],
            source,
        )  # fmt: skip
        self.run(["make", f"-j{self.jobs}", "build_libs"], source)
        self.run(["make", "install_dev"], source)

    def cpython(self, build_python: Path | None) -> None:
        source = self.source("python3.11")
        disabled = {f"py_cv_module_{name}": "n/a" for name in DISABLED_MODULES}
        cross: list[str] = []
        if build_python is not None:
            cross = [
                f"--build={host_target().gnu_triplet}",
                f"--host={self.target.gnu_triplet}",
                f"--with-build-python={build_python}",
                *(f"{name}={value}" for name, value in CROSS_ANSWERS.items()),
                # binutils' readelf reads every architecture's ELF files (configure wants a path)
                f"READELF={shutil.which('readelf') or 'readelf'}",
            ]
        self.run(
            [
                "./configure", f"--prefix={self.prefix}", "--enable-shared", f"--with-openssl={self.prefix}",
                "--with-system-expat", "--without-ensurepip", "--disable-test-modules", *cross,
            ],
            source,
            **disabled,
            **CPYTHON_NODIST_FLAGS,
            CFLAGS="",
        )  # fmt: skip
        # No libpython3.so (the stable-ABI stub, unused here); setup.py builds the shared modules
        # as for another host, so that it adds none of this machine's include directories.
        platform = f"_PYTHON_HOST_PLATFORM=linux-{self.target.machine}"
        self.run(["make", f"-j{self.jobs}", "PY3LIBRARY=", platform], source, CFLAGS="")
        self.run(["make", "install", "PY3LIBRARY=", platform], source, CFLAGS="")

    def check(self, build_python: Path | None) -> None:
        """The shared libraries are there, and the modules a bundle needs import."""
        for name in ("libpython3.11.so.1.0", "libssl.so.3", "libcrypto.so.3", "libz.so.1"):
            if not (self.prefix / "lib" / name).exists():
                raise RuntimeError(f"the build made no {name} (see {self.log})")
        if build_python is not None:
            return  # another architecture: checked when the bundle runs under qemu
        probe = "import ssl, _hashlib, zlib, bz2, lzma, ctypes, pyexpat, decimal; print(ssl.OPENSSL_VERSION)"
        python = self.prefix / "bin" / "python3.11"
        result = subprocess.run(
            [str(python), "-I", "-c", probe],
            env={"LD_LIBRARY_PATH": str(self.prefix / "lib")},
            capture_output=True,
            text=True,
            check=False,
        )
        expected = self.lock.packages["openssl"].upstream_version
        if result.returncode != 0 or expected not in result.stdout:
            raise RuntimeError(
                f"the built interpreter does not work: {result.stdout}{result.stderr}"
            )


def _prune(target: Target, keep: str) -> None:
    """Drop this target's interpreters and work directories of other recipes."""
    for kind in ("python", "work"):
        for stale in (cache_root() / kind).glob(f"{target.arch}-*"):
            if stale.name != keep:
                shutil.rmtree(stale, ignore_errors=True)


def build_python(target: Target, jobs: int | None = None) -> Path:
    """The cached portable CPython for ``target``, built first if this recipe has none yet."""
    prefix = python_prefix(target)
    if (prefix / "BUILT.json").exists():
        return prefix
    if not target.is_native():
        build_python(host_target(), jobs)  # its CPython build runs the host's interpreter
    if cache_root() == Path(FIXED_CACHE):
        _build_here(target, jobs)  # already at the fixed path (the namespace's own run)
    else:
        _build_at_fixed_path(target, jobs)
    if not (prefix / "BUILT.json").exists():
        raise RuntimeError(f"the {target.arch} interpreter build left no {prefix}/BUILT.json")
    return prefix


def _build_at_fixed_path(target: Target, jobs: int | None) -> None:
    """Run this module's build of ``target`` in a mount namespace that shows the cache at FIXED_CACHE."""
    cache = cache_root()
    cache.mkdir(parents=True, exist_ok=True)
    repo = Path(__file__).resolve().parent.parent
    argv = [sys.executable, "-m", "release.native", target.arch, str(jobs or 0)]
    env = {
        **os.environ,
        "PYTHONPATH": str(repo),
        "CREDPROVIDER_BUILD_CACHE": FIXED_CACHE,
        HOST_CACHE_VARIABLE: str(cache),
    }
    binds = [chroot.Bind(str(cache.resolve()), FIXED_CACHE)]
    spec = chroot.Spec("/", argv, env=env, cwd=str(repo), binds=binds, overlay=False)
    result = chroot.run(spec, capture=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"the {target.arch} interpreter build failed (exit {result.returncode}): see the lines above"
        )


def _build_here(target: Target, jobs: int | None) -> None:
    """Build ``target``'s interpreter into this cache (at FIXED_CACHE, in the namespace)."""
    prefix = python_prefix(target)
    build_python_path: Path | None = None
    if not target.is_native():
        build_python_path = python_prefix(host_target()) / "bin" / "python3.11"
    jobs = jobs or os.cpu_count() or 2
    _prune(target, keep=prefix.name)
    work = cache_root() / "work" / prefix.name
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(prefix, ignore_errors=True)
    work.mkdir(parents=True)
    (prefix / "lib").mkdir(parents=True)
    (prefix / "include").mkdir()
    build = Build(target, work, prefix, jobs)
    started = time.monotonic()
    steps = [
        ("zlib", build.zlib),
        ("bzip2", build.bzip2),
        ("xz-utils", lambda: build.autotools("xz-utils", "--disable-shared", "--enable-static", "--disable-xz", "--disable-xzdec", "--disable-lzmadec", "--disable-lzmainfo", "--disable-scripts", "--disable-doc", "--disable-nls")),
        # Static trampolines need a temp-file mapping helper this configuration leaves undeclared.
        ("libffi", lambda: build.autotools("libffi", "--disable-shared", "--enable-static", "--disable-docs", "--disable-multi-os-directory", "--disable-exec-static-tramp")),
        ("expat", build.expat),
        ("openssl", build.openssl),
        ("python3.11", lambda: build.cpython(build_python_path)),
    ]  # fmt: skip
    for name, step in steps:
        _log(f"{target.arch}: building {name} {build.lock.packages[name].version} ({build.log})")
        step()
    build.check(build_python_path)
    versions = {name: package.version for name, package in build.lock.packages.items()}
    record = {
        "arch": target.arch,
        "zig": toolchain.ZIG_VERSION,
        "glibc_floor": ".".join(map(str, GLIBC_FLOOR)),
        "sources": versions,
        "seconds": round(time.monotonic() - started),
    }
    (prefix / "BUILT.json").write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    _log(f"{target.arch}: interpreter ready in {prefix} ({record['seconds']} s)")


def main(argv: Sequence[str]) -> int:
    """``python -m release.native ARCH JOBS``: the namespace's half of build_python."""
    arch, jobs = argv[0], int(argv[1])
    try:
        build_python(targets.target(arch), jobs or None)
    except (RuntimeError, OSError, ValueError) as exc:
        _log(f"{arch}: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A portable bundle for one target: the portable interpreter and what PyInstaller's analysis finds
the programs need (run in a Debian 11 chroot), laid out by release/layout.py.

The result, in ``out``:

    credprovider                 the launcher (static): checks the bundle, then execs the interpreter
                                 _internal/credprovider-main on _internal/credprovider-boot.py,
                                 through the bundle's own glibc loader
    ecr-credential-provider ...  symlinks to it, one per plugin name
    _internal/                   the interpreter, its libraries, glibc (release/glibc.py), and every
                                 module as bytecode
    _internal/credprovider.start the files start-up needs, with their sizes (what the launcher
                                 checks on each exec)
    _internal/credprovider.files every file of _internal/ with its size (checked after a start
                                 fails: credprovider/runtime/bundlecheck.py)

Nothing in it loads a library from outside the bundle, or needs a symbol version the bundle's glibc
does not define: the build fails otherwise (release/elfcheck.py).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from credprovider.runtime.bundlecheck import FILES_MANIFEST, START_MANIFEST, install_hint
from release import chroot, elfcheck, firstbuild, glibc, native, rootfs, toolchain, wheels
from release.buildlock import one_builder
from release.targets import Target

REPO: Final = Path(__file__).resolve().parent.parent
# Where make build puts this machine's bundle (the tests and the bench run it from there).
BUNDLE_DIR: Final = REPO / "dist" / "credprovider"
CONTENTS: Final = "_internal"
MANIFEST: Final = f"{CONTENTS}/{FILES_MANIFEST}"
START: Final = f"{CONTENTS}/{START_MANIFEST}"
# What the interpreter reads before credprovider.entry answers (``--version``), besides every file
# directly in _internal/ (the loader, the interpreter, the libraries, the boot script, the plugins'
# modules in credprovider-exec.bin, which a failed start needs to say which file is missing): the
# launcher checks these on each exec, the rest only after a start fails. A release test traces
# --version and finds nothing else read.
START_MODULES: Final = (
    "lib/python3.11/encodings/__init__.pyc",
    "lib/python3.11/encodings/aliases.pyc",
    "lib/python3.11/encodings/utf_8.pyc",
    "lib/python3.11/encodings/ascii.pyc",
    "lib/python3.11/encodings/latin_1.pyc",
    "lib/python3.11/os.pyc",
    "lib/python3.11/__future__.pyc",
)
LAUNCHER_SOURCE: Final = Path(__file__).with_name("launcher.c")
PLUGIN_NAMES_CODE: Final = "from credprovider.entry import PLUGIN_MODULES; print(*PLUGIN_MODULES)"


@dataclass(frozen=True)
class BuildInfo:
    version: str
    commit: str
    built: str  # ISO 8601, UTC: the commit's time (SOURCE_DATE_EPOCH)
    epoch: int
    arch: str


def info_file(bundle_dir: Path) -> Path:
    """Where a bundle's build info is kept, beside it (not in it: the tarball packs the bundle)."""
    return bundle_dir.with_name(f"{bundle_dir.name}.buildinfo.json")


def recorded_info(bundle_dir: Path) -> BuildInfo:
    """The build info the bundle in ``bundle_dir`` was built with: the release's artifacts name
    the commit their bundles hold, never a later one (a commit made after the bundle was built)."""
    return BuildInfo(**json.loads(info_file(bundle_dir).read_text()))


def project_version() -> str:
    namespace: dict[str, str] = {}
    exec((REPO / "credprovider" / "__init__.py").read_text(), namespace)  # noqa: S102
    return namespace["__version__"]


def build_info(target: Target) -> BuildInfo:
    """Version, commit and a reproducible build time (the commit's) for ``target``."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short=12", "HEAD")
        epoch = int(git("log", "-1", "--format=%ct"))
        if git("status", "--porcelain", "--untracked-files=no"):
            commit += "-dirty"
    except (OSError, subprocess.CalledProcessError, ValueError):
        commit, epoch = "unknown", int(os.environ.get("SOURCE_DATE_EPOCH", "0")) or 0
    built = datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return BuildInfo(project_version(), commit, built, epoch, target.arch)


def plugin_names() -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", PLUGIN_NAMES_CODE],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.split()


def _inside(path: Path) -> str:
    """Where a path of this repository appears inside the build chroot."""
    return "/src/" + path.resolve().relative_to(REPO).as_posix()


def openssl_version_text(prefix: Path) -> str:
    """What ``_ssl.OPENSSL_VERSION`` says of the bundle's OpenSSL, less its "OpenSSL " prefix
    (``3.0.20 7 Apr 2026``), read from the header it was built with."""
    header = (prefix / "include" / "openssl" / "opensslv.h").read_text()
    match = re.search(r'OPENSSL_VERSION_TEXT\s+"OpenSSL ([^"]+)"', header)
    if match is None:
        raise RuntimeError(f"no OPENSSL_VERSION_TEXT in {prefix}/include/openssl/opensslv.h")
    return match.group(1)


def run_analysis(target: Target, out: Path, info: BuildInfo) -> None:
    """build.spec: PyInstaller's analysis, then release/layout.py writes ``out/_internal``."""
    # what the cache holds (the interpreters, the root filesystems, the wheels) is made by one
    # build at a time on this machine: two (a clone's make test, another's make build) would share
    # their work directories (release/buildlock.py)
    with one_builder(native.cache_root() / "builds.lock"):
        prefix = native.build_python(target)
        root = rootfs.ensure(target)
        site = wheels.install(target)
    work = REPO / "build" / f"pyinstaller-{target.arch}"
    work.mkdir(parents=True, exist_ok=True)
    facts = {
        "commit": info.commit,
        "built": info.built,
        "arch": info.arch,
        # --version reports it without loading OpenSSL (the bundle carries its own build)
        "openssl": openssl_version_text(prefix),
    }
    # A module, not a data file: --version then needs no json (credprovider/version.py).
    info_file = work / "_buildinfo.py"
    info_file.write_text(
        '"""This build\'s facts (release/bundle.py)."""\n\n'
        f"BUILD_INFO = {dict(sorted(facts.items()))!r}\n"
    )
    env = chroot.env_with_path(
        {
            "HOME": "/tmp",
            "LD_LIBRARY_PATH": "/opt/python/lib",
            "PYTHONPATH": "/opt/site:/src",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "SOURCE_DATE_EPOCH": str(info.epoch),
            "CREDPROVIDER_BUILD_INFO": _inside(info_file),
        }
    )
    argv = [
        "/opt/python/bin/python3.11", "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
        "--distpath", _inside(out), "--workpath", _inside(work), "/src/build.spec",
    ]  # fmt: skip
    binds = [
        chroot.Bind(str(prefix), "/opt/python", read_only=True),
        chroot.Bind(str(site), "/opt/site", read_only=True),
        chroot.Bind(str(REPO), "/src"),
    ]
    spec = chroot.spec_for(target, root, argv, env=env, cwd="/src", binds=binds)
    result = chroot.run(spec, timeout=3600)
    if result.returncode != 0:
        raise RuntimeError(
            f"PyInstaller failed for {target.arch} ({result.returncode}):\n"
            + result.stderr.decode(errors="replace")[-4000:]
        )


def add_launcher(target: Target, out: Path, info: BuildInfo) -> None:
    tools = toolchain.make_toolchain(
        target, native.cache_root() / "launcher-toolchain" / target.arch
    )
    flags = [
        f'-DCREDPROVIDER_LOADER="{target.loader}"',
        f'-DCREDPROVIDER_MANIFEST="{START_MANIFEST}"',
        f'-DCREDPROVIDER_INSTALL_HINT="{install_hint(info.version, target.arch)}"',
    ]
    toolchain.compile_static(tools, LAUNCHER_SOURCE, out / "credprovider", flags)
    for name in plugin_names():
        (out / name).symlink_to("credprovider")


def write_manifest(out: Path) -> None:
    """Both manifests: every file of _internal/ with its size, and the start-up part of that list."""
    contents = out / CONTENTS
    sizes = {
        relative: path.stat().st_size
        for path, relative in elfcheck.bundle_files(contents)
        if relative not in (FILES_MANIFEST, START_MANIFEST)
    }
    missing = [relative for relative in START_MODULES if relative not in sizes]
    if missing:
        raise RuntimeError(f"the bundle lacks what start-up reads: {', '.join(missing)}")
    start = sorted({r for r in sizes if "/" not in r} | set(START_MODULES))
    for name, listed in ((MANIFEST, sorted(sizes)), (START, start)):
        (out / name).write_text("".join(f"{sizes[r]} {r}\n" for r in listed))


def build(target: Target, out: Path) -> Path:
    """Build the bundle for ``target`` into ``out`` (inside this repository), checked."""
    out = out.resolve()
    if not out.is_relative_to(REPO):
        raise ValueError(f"{out} must be inside {REPO} (the build chroot sees only the repository)")
    firstbuild.announce(target)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    info = build_info(target)
    run_analysis(target, out, info)
    glibc.add_to(target, out / CONTENTS)
    add_launcher(target, out, info)
    write_manifest(out)
    info_file(out).write_text(json.dumps(asdict(info), sort_keys=True) + "\n")
    problems = elfcheck.check_bundle(out, target)
    if problems:
        raise RuntimeError("the bundle is not portable:\n" + "\n".join(map(str, problems)))
    sys.stderr.write(f"[bundle] {target.arch}: {out} ({elfcheck.summary(out)})\n")
    return out

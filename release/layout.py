"""The bundle's ``_internal/`` directory, laid out from PyInstaller's analysis.

PyInstaller finds what the programs import (its module graph and its hooks' hidden imports and data
files); it does not build the executable. Its bootloader cost every exec a second ``execve``, the
unpacking of an archive's table of contents and its own bootstrap modules: more than the whole start
of the interpreter. Instead the interpreter the bundle is built from runs directly:

    credprovider-main            CPython's python3.11 (renamed), started by the launcher
    credprovider-boot.py         what it runs (release/boot.py): _internal/ on sys.path, then the dispatcher
    lib/python3.11/              the standard library modules the analysis found, as bytecode; its
                                 os.pyc is the landmark the interpreter finds its prefix by
    lib/python3.11/lib-dynload/  the standard library's extension modules
    credprovider-exec.bin        the plugins' own modules (credprovider/ but its tool/), one table
    credprovider/, botocore/ ... every other module as bytecode, with the extension modules and data
    *.dist-info/                 the bundled distributions' metadata (scanners, the SBOM)
    lib*.so*                     libpython, OpenSSL, zlib and the like (the launcher's LD_LIBRARY_PATH)

Modules are compiled once, at build time, to ``.pyc`` files in place of their sources (optimisation
level 2, as the PyInstaller archive had, and hash-based, so the output does not depend on file
times). This module runs inside the build's root filesystem, under the bundle's interpreter, called
from ``build.spec``: it uses only the standard library.
"""

from __future__ import annotations

import marshal
import os
import py_compile
import re
import shutil
import subprocess
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Final

STDLIB: Final = "lib/python3.11"
DYNLOAD: Final = f"{STDLIB}/lib-dynload"
PROGRAM: Final = "credprovider-main"
BOOT: Final = "credprovider-boot.py"
OPTIMIZE: Final = 2
# Pure-Python packages that need nothing on disk (no extension module, no data file) are kept in one
# compressed archive at the end of sys.path: a third of the size. None of them is on a plugin's cache
# hit or stdlib cache miss, and an archive is only opened by an import that gets that far.
ARCHIVE: Final = "modules.zip"
ARCHIVE_ONLY: Final = (".pyc",)
ARCHIVE_SKIPPED: Final = ("py.typed",)
ON_DISK: Final = frozenset({"credprovider", "lib"})
# Left out: the East Asian codecs (no registry, cloud or kubelet speaks them; codecs.lookup then says
# "unknown encoding") and the pure-Python decimal (_decimal is there).
LEFT_OUT_BINARIES: Final = re.compile(r"(^|/)_(codecs_[a-z0-9]+|multibytecodec)\.[^/]*so$")
LEFT_OUT_MODULES: Final = frozenset({"_pydecimal"})
# The plugins' own modules, as one marshalled table {name: (is package, path, code)} that the boot
# script imports from (the tool's modules, never on a plugin's exec, stay files).
EXEC_MODULES: Final = "credprovider-exec.bin"
EXEC_PACKAGE: Final = "credprovider"
EXEC_LEFT_ON_DISK: Final = frozenset({"tool"})
PYC_HEADER: Final = 16  # magic, flags, hash: what a .pyc holds before its code object
# The modules the interpreter starts with: PyInstaller's analysis lists them in this archive only.
BASE_LIBRARY: Final = "base_library.zip"
# A TOC entry of PyInstaller's analysis: (name or destination, source path, type code).
Entry = tuple[str, str | None, str]


def module_destination(name: str, source: str, stdlib_dir: str) -> str | None:
    """Where module ``name`` (from ``source``) goes, relative to ``_internal/``; ``None`` for a
    namespace package, which is only a directory (made by the modules placed inside it)."""
    if not source or not source.endswith((".py", ".pyc")):
        return None
    parts = name.split(".")
    if os.path.basename(source).startswith("__init__."):
        parts.append("__init__")
    relative = "/".join(parts) + ".pyc"
    inside_stdlib = os.path.abspath(source).startswith(stdlib_dir.rstrip("/") + "/")
    return f"{STDLIB}/{relative}" if inside_stdlib else relative


def binary_destination(destination: str) -> str:
    """PyInstaller puts the standard library's extension modules in ``python3.11/lib-dynload/``;
    the interpreter looks for them under its prefix, in ``lib/python3.11/lib-dynload/``."""
    for collected in ("python3.11/lib-dynload/", "lib-dynload/"):
        if destination.startswith(collected):
            return f"{DYNLOAD}/{destination.removeprefix(collected)}"
    return destination


def base_library_modules(archive: str) -> list[str]:
    """The ``.pyc`` paths in PyInstaller's base library: they are compiled again here, from the
    interpreter's sources, like every other module."""
    with zipfile.ZipFile(archive) as handle:
        return sorted(name for name in handle.namelist() if name.endswith(".pyc"))


def _copy(source: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    shutil.copymode(source, target)


def _compile(source: str, target: Path, display: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.endswith(".pyc"):
        shutil.copyfile(source, target)
        return
    py_compile.compile(
        source,
        cfile=str(target),
        dfile=display,
        doraise=True,
        optimize=OPTIMIZE,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )


def archivable(path: Path) -> bool:
    """A top-level module, or a package all of whose files are bytecode."""
    if path.name in ON_DISK or path.is_symlink():
        return False
    if path.is_file():
        return path.suffix == ".pyc"
    files = [p for p in path.rglob("*") if not p.is_dir()]
    return bool(files) and all(
        p.is_file() and (p.name.endswith(ARCHIVE_ONLY) or p.name in ARCHIVE_SKIPPED) for p in files
    )


def archive(out: Path, paths: list[Path]) -> None:
    """Move ``paths`` (under ``out``) into ``out/ARCHIVE``: sorted, with fixed times (reproducible)."""
    with zipfile.ZipFile(out / ARCHIVE, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as handle:
        for top in paths:
            members = [top] if top.is_file() else [top, *sorted(top.rglob("*"))]
            for member in members:
                if member.name in ARCHIVE_SKIPPED:
                    continue
                # Directories get entries too: zipimport finds a namespace package (azure, google)
                # only by its directory entry.
                name = member.relative_to(out).as_posix() + ("/" if member.is_dir() else "")
                info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                handle.writestr(
                    info, b"" if member.is_dir() else member.read_bytes(), compresslevel=9
                )
            if top.is_file():
                top.unlink()
            else:
                shutil.rmtree(top)


def pack_exec_modules(out: Path) -> None:
    """Move every module of the plugins' exec path (``credprovider/`` but the operator's tool) into
    ``out/EXEC_MODULES``: one file, read once per exec, whose table the boot script imports from
    (release/boot.py). Two dozen modules found and opened one by one through the path finder cost a
    cache hit about 1.5 ms, a tenth of it; the table costs one read. Reproducible: sorted, and
    marshal writes a dict of bytes the same way each time."""
    table = {}
    package = out / EXEC_PACKAGE
    for pyc in sorted(package.rglob("*.pyc")):
        relative = pyc.relative_to(out)
        if relative.parts[1] in EXEC_LEFT_ON_DISK:
            continue
        is_package = pyc.name == "__init__.pyc"
        parts = relative.with_suffix("").parts
        name = ".".join(parts[:-1] if is_package else parts)
        table[name] = (is_package, relative.as_posix(), pyc.read_bytes()[PYC_HEADER:])
        pyc.unlink()
    (out / EXEC_MODULES).write_bytes(marshal.dumps(table))
    for directory in sorted((p for p in package.rglob("*") if p.is_dir()), reverse=True):
        if not any(directory.iterdir()):
            directory.rmdir()  # a package all of whose modules are in the table


def _strip(paths: Iterable[Path]) -> None:
    """Symbol tables are not needed at run time (PyInstaller's COLLECT did the same)."""
    files = [str(path) for path in paths]
    if files:
        subprocess.run(["strip", *files], check=True)


def assemble(
    pure: Iterable[Entry],
    binaries: Iterable[Entry],
    datas: Iterable[Entry],
    prefix: str,
    out: Path,
    boot_script: Path,
) -> None:
    """Write ``out`` (the bundle's ``_internal/``) from the analysis of an interpreter at ``prefix``."""
    stdlib_dir = os.path.join(prefix, STDLIB)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name, source, _kind in pure:
        if name in LEFT_OUT_MODULES:
            continue
        destination = module_destination(name, source or "", stdlib_dir)
        if destination is not None and source:
            _compile(source, out / destination, destination.removesuffix("c"))
    elves = [out / PROGRAM]
    _copy(os.path.join(prefix, "bin", "python3.11"), out / PROGRAM)
    for destination, source, _kind in binaries:
        if source and not LEFT_OUT_BINARIES.search(destination):
            target = out / binary_destination(destination)
            _copy(source, target)
            elves.append(target)
    for destination, source, _kind in datas:
        if destination == BASE_LIBRARY and source:
            for relative in base_library_modules(source):
                module = os.path.join(stdlib_dir, relative.removesuffix("c"))
                _compile(module, out / STDLIB / relative, f"{STDLIB}/{relative.removesuffix('c')}")
        elif source and os.path.isfile(source):
            _copy(source, out / destination)
    _copy(str(boot_script), out / BOOT)
    archive(out, [path for path in sorted(out.iterdir()) if archivable(path)])
    pack_exec_modules(out)
    (out / DYNLOAD).mkdir(parents=True, exist_ok=True)
    _strip(elves)
    missing = [
        path
        for path in (f"{STDLIB}/os.pyc", f"{STDLIB}/encodings/__init__.pyc", "libpython3.11.so.1.0")
        if not (out / path).is_file()
    ]
    if missing:
        raise RuntimeError(f"the analysis left out what the interpreter starts with: {missing}")

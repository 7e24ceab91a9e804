"""What a bundle loads and needs: the libraries and symbol versions of every ELF file in it.

Read from the files themselves (pyelftools): the symbol versions each file requires
(``.gnu.version_r``) and defines (``.gnu.version_d``: glibc's own files), the libraries it names
(``DT_NEEDED``), where it looks for them (``DT_RUNPATH``/``DT_RPATH``) and its machine. The rules are
pure functions over those facts: every library comes from the bundle (glibc too: release/glibc.py),
every glibc symbol version a file needs is one the bundle's glibc defines, and the loader the
launcher runs is there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from release.targets import CXXABI_LIMIT, GLIBCXX_LIMIT, Target

ELF_MAGIC = b"\x7fELF"
Version = tuple[int, ...]


@dataclass(frozen=True)
class ElfFacts:
    path: str  # relative to the bundle's root
    machine: str  # e_machine, e.g. EM_X86_64
    needed: tuple[str, ...]  # DT_NEEDED
    search: tuple[str, ...]  # DT_RUNPATH or DT_RPATH entries, unexpanded
    versions: tuple[str, ...]  # required symbol versions, e.g. GLIBC_2.17, GLIBCXX_3.4.21
    defines: tuple[str, ...] = ()  # symbol versions it defines (glibc's files: GLIBC_2.2.5 ...)


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def parse_version(name: str, prefix: str) -> Version | None:
    """``GLIBC_2.17`` -> (2, 17) for prefix ``GLIBC_``; None for other names (GLIBC_PRIVATE too)."""
    if not name.startswith(prefix):
        return None
    parts = name[len(prefix) :].split(".")
    if not all(part.isdigit() for part in parts):
        return None
    return tuple(int(part) for part in parts)


def newest(facts: Iterable[ElfFacts], prefix: str) -> tuple[Version, str] | None:
    """The newest ``prefix`` version any file requires, and one file that requires it."""
    best: tuple[Version, str] | None = None
    for elf in facts:
        for name in elf.versions:
            version = parse_version(name, prefix)
            if version is not None and (best is None or version > best[0]):
                best = (version, elf.path)
    return best


def show(version: Version) -> str:
    return ".".join(str(part) for part in version)


_LIMITS: tuple[tuple[str, Version, str], ...] = (
    ("GLIBCXX_", GLIBCXX_LIMIT, "libstdc++ (RHEL 8 has GLIBCXX_3.4.25)"),
    ("CXXABI_", CXXABI_LIMIT, "libstdc++ (RHEL 8 has CXXABI_1.3.11)"),
)


def version_problems(elf: ElfFacts, glibc_defines: Iterable[str] = ()) -> list[Problem]:
    """Every ``GLIBC_`` version ``elf`` needs must be one the bundle's glibc defines
    (``glibc_defines``); ``GLIBC_PRIVATE`` only between glibc's own files, which are built together;
    libstdc++ versions within RHEL 8's."""
    defined = set(glibc_defines)
    problems = []
    for name in elf.versions:
        if name == "GLIBC_PRIVATE" and not _is_glibc(elf):
            problems.append(
                Problem(
                    elf.path, "needs GLIBC_PRIVATE: it works only with the glibc it was built with"
                )
            )
        elif parse_version(name, "GLIBC_") is not None and name not in defined:
            newest_defined = newest_name(defined, "GLIBC_")
            problems.append(
                Problem(
                    elf.path,
                    f"needs {name}, which the bundle's glibc does not define "
                    f"(its newest is {newest_defined or 'none: no glibc in the bundle'})",
                )
            )
    for prefix, limit, what in _LIMITS:
        for name in elf.versions:
            version = parse_version(name, prefix)
            if version is not None and version > limit:
                problems.append(
                    Problem(
                        elf.path, f"needs {name} from {what}; the limit is {prefix}{show(limit)}"
                    )
                )
    return problems


def newest_name(names: Iterable[str], prefix: str) -> str | None:
    versions = [(v, n) for n in names if (v := parse_version(n, prefix)) is not None]
    return max(versions)[1] if versions else None


def _is_glibc(elf: ElfFacts) -> bool:
    """glibc's own files reference GLIBC_PRIVATE of each other (libc.so.6 of the loader's)."""
    return any(name.startswith("GLIBC_") for name in elf.defines)


def search_problems(elf: ElfFacts) -> list[Problem]:
    """A RUNPATH/RPATH outside $ORIGIN would make the loader look on the node first."""
    problems = []
    for entry in elf.search:
        for directory in entry.split(":"):
            if directory and not directory.startswith(("$ORIGIN", "${ORIGIN}")):
                problems.append(
                    Problem(
                        elf.path,
                        f"searches {directory} for libraries: only $ORIGIN-relative paths stay in the bundle",
                    )
                )
    return problems


def expand_search(elf: ElfFacts) -> list[str]:
    """The bundle-relative directories an ELF file's RUNPATH/RPATH names ($ORIGIN expanded)."""
    origin = os.path.dirname(elf.path)
    found = []
    for entry in elf.search:
        for directory in entry.split(":"):
            if directory.startswith(("$ORIGIN", "${ORIGIN}")):
                rest = directory.split("}", 1)[-1] if directory.startswith("${") else directory[7:]
                found.append(os.path.normpath(os.path.join(origin, rest.lstrip("/"))))
    return found


def library_problems(
    elf: ElfFacts, bundle_files: set[str], library_dirs: Iterable[str]
) -> list[Problem]:
    """Every DT_NEEDED must be in the bundle, where the loader will look: glibc's own too."""
    problems = []
    dirs = [*expand_search(elf), *library_dirs]
    for name in elf.needed:
        if not any(os.path.normpath(os.path.join(d, name)) in bundle_files for d in dirs):
            problems.append(
                Problem(elf.path, f"loads {name} from the node: it is not in the bundle")
            )
    return problems


def loader_problems(target: Target, bundle_files: set[str], library_dir: str) -> list[Problem]:
    """The launcher runs the interpreter through ``<library_dir>/<target.loader>``."""
    loader = f"{library_dir}/{target.loader}"
    if loader in bundle_files:
        return []
    return [Problem(loader, "is missing: the launcher runs the interpreter through it")]


def check(
    facts: list[ElfFacts],
    target: Target,
    bundle_files: set[str],
    library_dirs: Iterable[str],
) -> list[Problem]:
    """All the reasons this bundle would not start, or would load something foreign, on a node."""
    dirs = list(library_dirs)
    glibc_defines = {name for elf in facts if _is_glibc(elf) for name in elf.defines}
    problems = []
    for elf in facts:
        if elf.machine != target.elf_machine:
            problems.append(Problem(elf.path, f"is {elf.machine}, not {target.elf_machine}"))
        problems += version_problems(elf, glibc_defines)
        problems += search_problems(elf)
        problems += library_problems(elf, bundle_files, dirs)
    return problems


# ---- reading the files ----------------------------------------------------------------------------


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == ELF_MAGIC
    except OSError:
        return False


def read_elf(path: Path, relative: str) -> ElfFacts:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection

    with path.open("rb") as handle:
        elf = ELFFile(handle)
        needed: list[str] = []
        search: list[str] = []
        versions: list[str] = []
        defines: list[str] = []
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                tag: Any  # pyelftools sets needed/runpath/rpath on tags of those kinds only
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        needed.append(tag.needed)
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        search.append(tag.runpath)
                    elif tag.entry.d_tag == "DT_RPATH":
                        search.append(tag.rpath)
            elif isinstance(section, GNUVerNeedSection):
                for _library, auxiliaries in section.iter_versions():
                    versions.extend(aux.name for aux in auxiliaries)
            elif isinstance(section, GNUVerDefSection):
                for _definition, auxiliaries in section.iter_versions():
                    defines.extend(aux.name for aux in auxiliaries)
        return ElfFacts(
            relative,
            str(elf["e_machine"]),
            tuple(needed),
            tuple(search),
            tuple(sorted(set(versions))),
            tuple(sorted(set(defines))),
        )


def bundle_files(root: Path) -> Iterator[tuple[Path, str]]:
    """Every regular file under ``root`` (links are not followed), with its relative path."""
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = Path(directory, name)
            if not path.is_symlink():
                yield path, os.path.relpath(path, root)


def scan(root: Path) -> tuple[list[ElfFacts], set[str]]:
    """The ELF facts of every file in the bundle at ``root``, and the set of all its file paths."""
    facts, files = [], set()
    for path, relative in bundle_files(root):
        files.add(relative)
        if is_elf(path):
            facts.append(read_elf(path, relative))
    return facts, files


def check_bundle(root: Path, target: Target, library_dir: str = "_internal") -> list[Problem]:
    facts, files = scan(root)
    if not facts:
        return [Problem(str(root), "holds no ELF file: is this a bundle?")]
    return check(facts, target, files, [library_dir]) + loader_problems(target, files, library_dir)


def summary(root: Path) -> str:
    facts, _files = scan(root)
    carried = newest_name({n for elf in facts if _is_glibc(elf) for n in elf.defines}, "GLIBC_")
    needed = newest([elf for elf in facts if not _is_glibc(elf)], "GLIBC_")
    text = f"{len(facts)} ELF files; glibc carried: {carried or 'none'}"
    if needed is not None:
        text += f"; newest glibc symbol needed outside it: GLIBC_{show(needed[0])} ({needed[1]})"
    return text


def main(argv: list[str]) -> int:
    from release.targets import target

    if len(argv) != 2:
        sys.stderr.write("usage: python -m release.elfcheck BUNDLE_DIR ARCH\n")
        return 2
    root, arch = Path(argv[0]), target(argv[1])
    problems = check_bundle(root, arch)
    for problem in problems:
        print(problem)
    print(summary(root))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The portability rules, on made-up facts and on real ELF files of this machine (which break them)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from release import elfcheck
from release.elfcheck import ElfFacts
from release.targets import TARGETS

AMD64 = TARGETS["amd64"]


def facts(path: str = "_internal/x.so", **kwargs: object) -> ElfFacts:
    defaults: dict[str, object] = {
        "machine": "EM_X86_64",
        "needed": (),
        "search": (),
        "versions": (),
    }
    defaults.update(kwargs)
    return ElfFacts(path, **defaults)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "prefix", "expected"),
    [
        ("GLIBC_2.17", "GLIBC_", (2, 17)),
        ("GLIBC_2.2.5", "GLIBC_", (2, 2, 5)),
        ("GLIBC_PRIVATE", "GLIBC_", None),
        ("GLIBCXX_3.4.25", "GLIBC_", None),
        ("GLIBCXX_3.4.25", "GLIBCXX_", (3, 4, 25)),
        ("CXXABI_1.3.11", "CXXABI_", (1, 3, 11)),
        ("GCC_3.0", "GLIBC_", None),
    ],
)
def test_parse_version(name: str, prefix: str, expected: tuple[int, ...] | None) -> None:
    assert elfcheck.parse_version(name, prefix) == expected


@pytest.mark.parametrize(
    ("versions", "problems"),
    [
        (("GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.28"), []),
        (("GLIBC_2.29",), ["needs GLIBC_2.29 from glibc; the limit is GLIBC_2.28"]),
        (("GLIBC_2.34", "GLIBC_2.35"), ["needs GLIBC_2.34", "needs GLIBC_2.35"]),
        (("GLIBCXX_3.4.25", "CXXABI_1.3.11"), []),
        (("GLIBCXX_3.4.26",), ["needs GLIBCXX_3.4.26 from libstdc++ (RHEL 8 has GLIBCXX_3.4.25)"]),
        (("CXXABI_1.3.12",), ["needs CXXABI_1.3.12 from libstdc++ (RHEL 8 has CXXABI_1.3.11)"]),
        (("GLIBC_PRIVATE", "GCC_4.2.0"), []),
    ],
)
def test_version_limits(versions: tuple[str, ...], problems: list[str]) -> None:
    found = [p.message for p in elfcheck.version_problems(facts(versions=versions))]
    assert len(found) == len(problems)
    for message, expected in zip(found, problems, strict=True):
        assert message.startswith(expected)


def test_a_lower_glibc_limit_is_enforced_too() -> None:
    elf = facts(versions=("GLIBC_2.17", "GLIBC_2.18"))
    assert elfcheck.version_problems(elf, (2, 28)) == []
    assert [p.message for p in elfcheck.version_problems(elf, (2, 17))] == [
        "needs GLIBC_2.18 from glibc; the limit is GLIBC_2.17"
    ]


@pytest.mark.parametrize(
    ("elf", "files", "missing"),
    [
        # glibc's own libraries come from the node
        (
            facts(needed=("libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1")),
            set(),
            [],
        ),
        # found in the bundle's library directory (the launcher's LD_LIBRARY_PATH)
        (facts(needed=("libssl.so.3",)), {"_internal/libssl.so.3"}, []),
        (facts(needed=("libssl.so.3",)), set(), ["libssl.so.3"]),
        (facts(needed=("libstdc++.so.6", "libz.so.1")), set(), ["libstdc++.so.6", "libz.so.1"]),
        # auditwheel's $ORIGIN runpath into <package>.libs/
        (
            facts(
                "_internal/cffi/_cffi_backend.so",
                needed=("libffi-abc.so.8",),
                search=("$ORIGIN/../cffi.libs",),
            ),
            {"_internal/cffi.libs/libffi-abc.so.8"},
            [],
        ),
        (
            facts("_internal/pkg/m.so", needed=("libq.so",), search=("${ORIGIN}/../pkg.libs",)),
            {"_internal/pkg.libs/libq.so"},
            [],
        ),
        # a file of the right name elsewhere in the bundle does not count
        (facts(needed=("libq.so",)), {"_internal/other/libq.so"}, ["libq.so"]),
    ],
)
def test_libraries_must_come_from_the_bundle(
    elf: ElfFacts, files: set[str], missing: list[str]
) -> None:
    problems = elfcheck.library_problems(elf, files, ["_internal"])
    assert [p.message for p in problems] == [
        f"loads {name} from the node: it is not in the bundle" for name in missing
    ]


def test_absolute_runpaths_are_refused() -> None:
    elf = facts(search=("/usr/lib/x86_64-linux-gnu:$ORIGIN",))
    assert [p.message for p in elfcheck.check([elf], AMD64, set(), ["_internal"])] == [
        "searches /usr/lib/x86_64-linux-gnu for libraries: only $ORIGIN-relative paths stay in the bundle"
    ]


def test_wrong_architecture_is_refused() -> None:
    problems = elfcheck.check([facts(machine="EM_AARCH64")], AMD64, set(), ["_internal"])
    assert [p.message for p in problems] == ["is EM_AARCH64, not EM_X86_64"]


def test_newest_names_the_file() -> None:
    found = elfcheck.newest(
        [facts("a", versions=("GLIBC_2.14",)), facts("b", versions=("GLIBC_2.17", "GLIBC_2.3"))],
        "GLIBC_",
    )
    assert found == ((2, 17), "b")


def test_this_machines_libraries_break_the_rules(tmp_path: Path) -> None:
    """Read real files: Debian 12's libgcc_s needs GLIBC_2.35, and a host-built program is caught."""
    gcc_s = next(Path("/").glob("usr/lib/*-linux-gnu/libgcc_s.so.1"), None) or next(
        Path("/").glob("lib/*-linux-gnu/libgcc_s.so.1")
    )
    bundle = tmp_path / "bundle"
    (bundle / "_internal").mkdir(parents=True)
    shutil.copy2(gcc_s, bundle / "_internal" / "libgcc_s.so.1")
    source = tmp_path / "p.cpp"
    source.write_text('#include <iostream>\nint main() { std::cout << "x" << std::endl; }\n')
    if shutil.which("g++"):
        subprocess.run(["g++", "-O1", "-o", str(bundle / "prog"), str(source)], check=True)
    problems = [str(p) for p in elfcheck.check_bundle(bundle, AMD64)]
    assert any(p.startswith("_internal/libgcc_s.so.1: needs GLIBC_2.3") for p in problems), problems
    if shutil.which("g++"):
        assert "prog: loads libstdc++.so.6 from the node: it is not in the bundle" in problems


def test_an_empty_directory_is_not_a_bundle(tmp_path: Path) -> None:
    assert [p.message for p in elfcheck.check_bundle(tmp_path, AMD64)] == [
        "holds no ELF file: is this a bundle?"
    ]

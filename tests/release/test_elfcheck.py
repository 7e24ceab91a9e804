"""The bundle's ELF rules, on made-up facts and on real ELF files of this machine (which break them)."""

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


GLIBC_236 = ("GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.34", "GLIBC_2.36", "GLIBC_PRIVATE")


@pytest.mark.parametrize(
    ("versions", "problems"),
    [
        (("GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.36"), []),
        (
            ("GLIBC_2.38",),
            [
                "needs GLIBC_2.38, which the bundle's glibc does not define (its newest is GLIBC_2.36)"
            ],
        ),
        # a version between two the bundle defines, which this glibc never had, is caught too
        (("GLIBC_2.18", "GLIBC_2.39"), ["needs GLIBC_2.18", "needs GLIBC_2.39"]),
        (("GLIBC_ABI_DT_RELR", "GCC_4.2.0"), []),
        (("GLIBCXX_3.4.25", "CXXABI_1.3.11"), []),
        (("GLIBCXX_3.4.26",), ["needs GLIBCXX_3.4.26 from libstdc++ (RHEL 8 has GLIBCXX_3.4.25)"]),
        (("CXXABI_1.3.12",), ["needs CXXABI_1.3.12 from libstdc++ (RHEL 8 has CXXABI_1.3.11)"]),
        # glibc's private interface binds a file to the one glibc build it came with
        (
            ("GLIBC_PRIVATE",),
            ["needs GLIBC_PRIVATE: it works only with the glibc it was built with"],
        ),
    ],
)
def test_version_rules(versions: tuple[str, ...], problems: list[str]) -> None:
    found = [p.message for p in elfcheck.version_problems(facts(versions=versions), GLIBC_236)]
    assert len(found) == len(problems), found
    for message, expected in zip(found, problems, strict=True):
        assert message.startswith(expected)


def test_glibcs_own_files_may_need_its_private_versions() -> None:
    libc = facts("_internal/libc.so.6", versions=("GLIBC_PRIVATE",), defines=GLIBC_236)
    assert elfcheck.version_problems(libc, GLIBC_236) == []


def test_without_a_glibc_in_the_bundle_every_glibc_version_is_a_problem() -> None:
    elf = facts(versions=("GLIBC_2.2.5",))
    assert [p.message for p in elfcheck.version_problems(elf, ())] == [
        "needs GLIBC_2.2.5, which the bundle's glibc does not define "
        "(its newest is none: no glibc in the bundle)"
    ]


def test_check_takes_the_versions_from_the_bundles_own_glibc() -> None:
    libc = facts("_internal/libc.so.6", defines=("GLIBC_2.2.5", "GLIBC_2.17", "libc.so.6"))
    program = facts("_internal/p", needed=("libc.so.6",), versions=("GLIBC_2.17", "GLIBC_2.28"))
    problems = elfcheck.check([libc, program], AMD64, {"_internal/libc.so.6"}, ["_internal"])
    assert [str(p) for p in problems] == [
        "_internal/p: needs GLIBC_2.28, which the bundle's glibc does not define "
        "(its newest is GLIBC_2.17)"
    ]


@pytest.mark.parametrize(
    ("elf", "files", "missing"),
    [
        # glibc's own libraries come from the bundle too: the node's are never used
        (facts(needed=("libc.so.6", "libm.so.6")), set(), ["libc.so.6", "libm.so.6"]),
        (
            facts(needed=("libc.so.6", "libm.so.6")),
            {"_internal/libc.so.6", "_internal/libm.so.6"},
            [],
        ),
        # found in the bundle's library directory (the loader's --library-path)
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


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_targets_loader_must_be_in_the_bundle(target: str) -> None:
    loader = TARGETS[target].loader
    assert elfcheck.loader_problems(TARGETS[target], {f"_internal/{loader}"}, "_internal") == []
    assert [str(p) for p in elfcheck.loader_problems(TARGETS[target], set(), "_internal")] == [
        f"_internal/{loader}: is missing: the launcher runs the interpreter through it"
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
    """Read real files: without a glibc of its own, a bundle holding this machine's libgcc_s (Debian
    12's needs GLIBC_2.35) is caught, as is a host-built program that loads libstdc++ from the node."""
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
    assert (
        "_internal/libgcc_s.so.1: loads libc.so.6 from the node: it is not in the bundle"
        in problems
    )
    assert (
        f"_internal/{AMD64.loader}: is missing: the launcher runs the interpreter through it"
        in problems
    )
    if shutil.which("g++"):
        assert "prog: loads libstdc++.so.6 from the node: it is not in the bundle" in problems


def test_an_empty_directory_is_not_a_bundle(tmp_path: Path) -> None:
    assert [p.message for p in elfcheck.check_bundle(tmp_path, AMD64)] == [
        "holds no ELF file: is this a bundle?"
    ]

"""Every ELF file of every built bundle, read with pyelftools: what a node needs to start it."""

from __future__ import annotations

from pathlib import Path

from release import elfcheck
from release.targets import GLIBC_FLOOR, Target


def test_no_file_needs_more_than_the_glibc_floor_or_a_library_from_the_node(
    bundle_dir: Path, target: Target
) -> None:
    facts, files = elfcheck.scan(bundle_dir)
    problems = elfcheck.check(facts, target, files, ["_internal"], glibc_limit=GLIBC_FLOOR)
    assert problems == [], "\n".join(map(str, problems))


def test_the_scan_saw_the_whole_bundle(bundle_dir: Path, target: Target) -> None:
    """Guard against a vacuous pass: the files that matter are there, and were read as ELF."""
    facts, _files = elfcheck.scan(bundle_dir)
    paths = {elf.path for elf in facts}
    for expected in (
        "credprovider",
        "_internal/credprovider-main",
        "_internal/libpython3.11.so.1.0",
        "_internal/libssl.so.3",
        "_internal/libcrypto.so.3",
    ):
        assert expected in paths
    assert any(p.startswith("_internal/cryptography/") for p in paths)
    assert len(facts) > 40
    assert {elf.machine for elf in facts} == {target.elf_machine}
    glibc = elfcheck.newest(facts, "GLIBC_")
    assert glibc is not None and glibc[0] >= (2, 2)  # glibc-linked files were read


def test_the_launcher_is_static(bundle_dir: Path) -> None:
    facts, _files = elfcheck.scan(bundle_dir)
    launcher = next(elf for elf in facts if elf.path == "credprovider")
    assert launcher.needed == () and launcher.versions == ()


def test_every_plugin_name_links_to_the_launcher(bundle_dir: Path) -> None:
    from credprovider.entry import PLUGIN_MODULES

    for name in PLUGIN_MODULES:
        assert (bundle_dir / name).is_symlink()
        assert (bundle_dir / name).readlink() == Path("credprovider")


def test_the_manifest_lists_every_file_of_internal_with_its_size(bundle_dir: Path) -> None:
    listed = {}
    for line in (bundle_dir / "_internal" / "credprovider.files").read_text().splitlines():
        size, relative = line.split(" ", 1)
        listed[relative] = int(size)
    actual = {
        relative: path.stat().st_size
        for path, relative in elfcheck.bundle_files(bundle_dir / "_internal")
        if relative != "credprovider.files"
    }
    assert listed == actual


def test_scanners_see_every_python_distribution(bundle_dir: Path) -> None:
    names = {p.name.split("-")[0].lower() for p in (bundle_dir / "_internal").glob("*.dist-info")}
    for expected in (
        "botocore",
        "urllib3",
        "requests",
        "google_auth",
        "azure_identity",
        "cryptography",
        "certifi",
    ):
        assert expected in names, sorted(names)
    assert "boto3" not in names  # left out of the bundle by build.spec

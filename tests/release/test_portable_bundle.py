"""Every ELF file of every built bundle, read with pyelftools: what a node needs to start it."""

from __future__ import annotations

import marshal
import subprocess
import types
from pathlib import Path

import pytest

from credprovider.runtime.bundlecheck import FILES_MANIFEST, START_MANIFEST
from release import elfcheck, glibc, layout
from release.bundle import REPO
from release.targets import GLIBC_FLOOR, Target, host_target


def test_nothing_loads_from_the_node_and_every_version_is_the_bundled_glibcs(
    bundle_dir: Path, target: Target
) -> None:
    problems = elfcheck.check_bundle(bundle_dir, target)
    assert problems == [], "\n".join(map(str, problems))


def test_the_bundle_carries_the_locked_glibc(bundle_dir: Path, target: Target) -> None:
    """Debian 12's libc6, as debs.lock.json pins it: every file of it the bundle needs, byte for
    byte, and the glibc version it defines is the lock's."""
    library_dir = glibc.library_dir(target)
    for name in target.glibc_files:
        carried = bundle_dir / "_internal" / name
        assert carried.read_bytes() == (library_dir / name).resolve().read_bytes(), name
    facts, _files = elfcheck.scan(bundle_dir)
    libc = next(elf for elf in facts if elf.path == "_internal/libc.so.6")
    assert elfcheck.newest_name(libc.defines, "GLIBC_") == f"GLIBC_{glibc.pin().upstream_version}"


def test_outside_glibc_nothing_needs_more_than_the_floor(bundle_dir: Path, target: Target) -> None:
    """The interpreter, its modules and the wheels' code are linked against glibc 2.17's symbols
    (release/targets.py): any glibc since would run them."""
    facts, _files = elfcheck.scan(bundle_dir)
    outside = [elf for elf in facts if not any(d.startswith("GLIBC_") for d in elf.defines)]
    assert len(outside) > 40
    newest = elfcheck.newest(outside, "GLIBC_")
    assert newest is not None and newest[0] <= GLIBC_FLOOR, newest


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
    for line in (bundle_dir / "_internal" / FILES_MANIFEST).read_text().splitlines():
        size, relative = line.split(" ", 1)
        listed[relative] = int(size)
    actual = {
        relative: path.stat().st_size
        for path, relative in elfcheck.bundle_files(bundle_dir / "_internal")
        if relative not in (FILES_MANIFEST, START_MANIFEST)
    }
    assert listed == actual
    start = {}
    for line in (bundle_dir / "_internal" / START_MANIFEST).read_text().splitlines():
        size, relative = line.split(" ", 1)
        start[relative] = int(size)
    # what the launcher checks on each exec: a few dozen files, each as the whole list has it
    assert len(start) < 60 and start.items() <= listed.items()
    assert {r for r in listed if "/" not in r} <= start.keys()


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


def test_modules_are_bytecode_only_compiled_at_build_time(bundle_dir: Path) -> None:
    """release/layout.py: no module sources (only the boot script), every .pyc hash-based and
    unchecked (valid whatever the file times after a copy), the standard library under the
    interpreter's prefix, where it finds its landmark."""
    contents = bundle_dir / "_internal"
    sources = [p.relative_to(contents).as_posix() for p in contents.rglob("*.py")]
    assert sources == ["credprovider-boot.py"]
    pycs = list(contents.rglob("*.pyc"))
    assert len(pycs) > 500
    for pyc in pycs:
        header = pyc.read_bytes()[:8]
        assert int.from_bytes(header[4:8], "little") == 0b01, pyc  # hash-based, not checked
    assert (contents / "lib" / "python3.11" / "os.pyc").is_file()
    assert (contents / "lib" / "python3.11" / "encodings" / "utf_8.pyc").is_file()
    assert not (contents / "credprovider" / "entry.pyc").exists()  # in the exec table
    assert (contents / "credprovider" / "tool" / "cli.pyc").is_file()
    assert not list(contents.rglob("__pycache__"))
    dynload = contents / "lib" / "python3.11" / "lib-dynload"
    assert any(p.name.startswith("_ssl.") for p in dynload.iterdir())


@pytest.mark.parametrize("name", ["ecr-credential-provider", "credprovider"])
def test_python_variables_do_not_reach_the_bundles_interpreter(
    bundle_dir: Path, target: Target, tmp_path: Path, name: str
) -> None:
    """The launcher runs the interpreter isolated (-I -S -B): a node's PYTHONPATH, PYTHONHOME,
    PYTHONINSPECT or PYTHONSTARTUP cannot replace a module, hang the kubelet on a prompt, or
    change what the plugin prints."""
    if target != host_target():
        pytest.skip("runs only this machine's bundle (test_old_userland runs the others)")
    evil = tmp_path / "evil"
    evil.mkdir()
    marker = tmp_path / "imported"
    for module in ("json", "credprovider"):
        (evil / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').write('{module}')\n")
    startup = tmp_path / "startup.py"
    startup.write_text(f"open({str(marker)!r}, 'w').write('startup')\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(evil),
        "PYTHONHOME": "/nonexistent",
        "PYTHONINSPECT": "1",
        "PYTHONSTARTUP": str(startup),
        "PYTHONVERBOSE": "1",
        "PYTHONWARNINGS": "error",
        "PYTHONUSERBASE": str(evil),
    }
    result = subprocess.run(
        [str(bundle_dir / name), "--version"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith(f"{name} version ")
    assert len(result.stdout.splitlines()) == 2
    assert not marker.exists()


# What the programs import on their SDK paths, plus the tool's: each from where release/layout.py put
# it (namespace packages such as azure and google from modules.zip, by their directory entries).
BUNDLED_IMPORTS = [
    "botocore.session", "azure.identity", "azure.core.pipeline", "msal", "google.auth.transport.requests",
    "google.oauth2.service_account", "requests", "urllib3", "cryptography.hazmat.bindings._rust",
    "pydantic", "yaml", "dateutil.tz", "jmespath", "certifi", "charset_normalizer", "ssl", "_hashlib",
]  # fmt: skip


def test_every_bundled_package_imports_from_its_place(bundle_dir: Path, target: Target) -> None:
    if target != host_target():
        pytest.skip("runs only this machine's bundle (test_old_userland runs the others)")
    contents = (bundle_dir / "_internal").resolve()
    # The same sys.path as release/boot.py makes, then each import and where it came from.
    code = (
        f"import sys; sys.path += [{str(contents)!r}, {str(contents / 'modules.zip')!r}]\n"
        f"import importlib\nfor name in {BUNDLED_IMPORTS!r}:\n"
        "    module = importlib.import_module(name)\n"
        "    print(name, getattr(module, '__file__', None) or 'builtin')\n"
    )
    # The launcher's own way: the bundle's loader, its glibc and libraries only (release/launcher.c).
    loader = [str(contents / target.loader), "--inhibit-cache", "--library-path", str(contents)]
    result = subprocess.run(
        [*loader, str(contents / "credprovider-main"), "-I", "-S", "-B", "-c", code],
        env={},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    where = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert sorted(where) == sorted(BUNDLED_IMPORTS)
    for name, path in where.items():
        assert path.startswith(str(contents)), (name, path)
    assert "modules.zip" in where["azure.identity"] and "modules.zip" in where["msal"]
    assert where["botocore.session"].endswith("botocore/session.pyc")  # its data beside it


def test_the_plugins_modules_are_one_table_of_every_module_but_the_tools(bundle_dir: Path) -> None:
    """release/layout.py: credprovider/ but its tool/ is in credprovider-exec.bin (what the boot
    script imports from, release/boot.py), each module once, as bytecode of its source, with the
    path its file would have had; the tool's modules stay files."""
    table = marshal.loads((bundle_dir / "_internal" / layout.EXEC_MODULES).read_bytes())
    expected = {"credprovider._buildinfo"}
    for source in (REPO / "credprovider").rglob("*.py"):
        parts = source.relative_to(REPO).with_suffix("").parts
        if parts[1] == "tool":
            continue
        is_package = parts[-1] == "__init__"
        expected.add(".".join(parts[:-1] if is_package else parts))
    # what the analysis finds no import of: the build's own helper, and `python -m credprovider`
    assert expected - set(table) == {"credprovider.aws.bundle", "credprovider.__main__"}
    assert set(table) <= expected
    for name, (is_package, path, code) in table.items():
        assert path == name.replace(".", "/") + ("/__init__.pyc" if is_package else ".pyc")
        assert not (bundle_dir / "_internal" / path).exists()
        assert isinstance(marshal.loads(code), types.CodeType)
    assert (bundle_dir / "_internal" / "credprovider" / "tool" / "cli.pyc").is_file()

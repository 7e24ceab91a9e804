"""A release does not depend on where it is built: no path of this machine in a bundle.

- The interpreter is built where the cache shows at one fixed path (release/native.py,
  ``FIXED_CACHE``), in a mount namespace without a chroot (release/chroot.py): the path compilers
  and configure bake into libpython, OpenSSL and the extension modules is the same on every machine.
- The console scripts pip writes into the bundle's site (whose RECORDs a bundle carries) get back
  the ``#!python`` of their wheels instead of the interpreter that ran pip (release/wheels.py).
- A built bundle names neither the cache, nor the checkout, nor its venv.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pip
import pytest

from release import bundle, chroot, native, wheels

BUNDLES = bundle.REPO / "dist" / "bundles"


def make_wheel(directory: Path) -> Path:
    """A wheel with one module and one console script, as a build backend writes it."""
    name = "demo_tool-1.0-py3-none-any.whl"
    info = "demo_tool-1.0.dist-info"
    files = {
        "demo_tool.py": b"def main():\n    print('hi')\n",
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: demo-tool\nVersion: 1.0\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": b"[console_scripts]\ndemo-tool = demo_tool:main\n",
    }
    rows = [[path, wheels._record_hash(data), str(len(data))] for path, data in files.items()] + [
        [f"{info}/RECORD", "", ""]
    ]
    record = "".join(",".join(row) + "\n" for row in rows).encode()
    path = directory / name
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in [*files.items(), (f"{info}/RECORD", record)]:
            archive.writestr(member, data)
    return path


def pip_install(python: Path, wheel: Path, site: Path) -> None:
    """pip (this venv's) run by ``python``, as release/wheels.py runs it, then the scripts unbound."""
    pip_home = Path(pip.__file__).parent.parent
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
         "--no-compile", "--target", str(site), str(wheel)],
        check=True,
        env={**os.environ, "PYTHONPATH": str(pip_home), "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )  # fmt: skip


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_sites_pip_writes_from_two_interpreters_at_two_paths_are_the_same(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    # A second interpreter at another path, as another checkout's venv would be.
    other = tmp_path / "elsewhere" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    sites: list[Path] = []
    for python in (Path(sys.executable), other / "bin" / "python"):
        site = tmp_path / f"site-{len(sites)}"
        pip_install(python, wheel, site)
        first_line = (site / "bin" / "demo-tool").read_bytes().split(b"\n")[0]
        assert first_line == b"#!" + str(python).encode()  # what pip wrote: the path of its python
        wheels._unbind_scripts(site)
        sites.append(site)
    first, second = tree(sites[0]), tree(sites[1])
    assert first == second
    assert first["bin/demo-tool"].startswith(b"#!python\n")
    assert b"elsewhere" not in b"".join(second.values())
    # The RECORD still tells the truth about every file, the rewritten script included.
    record = sites[0] / "demo_tool-1.0.dist-info" / "RECORD"
    assert record.read_bytes().count(b"\r\n") == len(record.read_bytes().splitlines())
    checked = []
    for path, digest, size in csv.reader(record.open(newline="")):
        if digest:
            # pip --target records paths from its scheme's lib/python: scripts are ../../bin/
            data_bytes = (sites[0] / path.removeprefix("../../")).read_bytes()
            expected = base64.urlsafe_b64encode(hashlib.sha256(data_bytes).digest()).rstrip(b"=")
            assert digest == "sha256=" + expected.decode() and size == str(len(data_bytes)), path
            checked.append(path)
    assert "../../bin/demo-tool" in checked and "demo_tool.py" in checked


def test_a_site_with_no_scripts_is_left_as_pip_wrote_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "pkg-1.dist-info").mkdir(parents=True)
    record = site / "pkg-1.dist-info" / "RECORD"
    record.write_bytes(b"pkg.py,sha256=abc,3\r\npkg-1.dist-info/RECORD,,\r\n")
    wheels._unbind_scripts(site)
    assert record.read_bytes() == b"pkg.py,sha256=abc,3\r\npkg-1.dist-info/RECORD,,\r\n"


needs_sandbox = pytest.mark.skipif(bool(chroot.supported()), reason=chroot.supported() or "")


@needs_sandbox
def test_the_fixed_path_namespace_shows_a_host_directory_there_and_nothing_else(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "a" / "cache path of this machine"
    cache.mkdir(parents=True)
    (cache / "input").write_text("from the host\n")
    host_mnt = sorted(os.listdir("/mnt"))
    script = (
        f"cat {native.FIXED_CACHE}/input; pwd > {native.FIXED_CACHE}/output; "
        f"ls /mnt >> {native.FIXED_CACHE}/output"
    )
    spec = chroot.Spec(
        "/",
        ["/bin/sh", "-c", script],
        env={"PATH": "/usr/bin:/bin"},
        cwd=str(tmp_path),
        binds=[chroot.Bind(str(cache), native.FIXED_CACHE)],
        overlay=False,
    )
    result = chroot.run(spec, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"from the host\n"
    lines = (cache / "output").read_text().splitlines()
    assert lines[0] == str(tmp_path)  # the host's tree, not a chroot
    assert "credprovider-build" in lines[1:]
    assert sorted(os.listdir("/mnt")) == host_mnt  # the namespace's tmpfs and mount point are gone


def test_a_sandbox_without_a_chroot_mounts_nothing_outside_its_own_tmpfs(tmp_path: Path) -> None:
    for spec in (
        chroot.Spec(
            "/", ["/bin/true"], binds=[chroot.Bind(str(tmp_path), "/opt/x")], overlay=False
        ),
        chroot.Spec("/", ["/bin/true"], binds=[chroot.Bind(str(tmp_path), "/mnt/x")], overlay=True),
    ):
        if chroot.supported():
            pytest.skip(chroot.supported())
        with pytest.raises(chroot.SandboxError, match="without a chroot binds only under /mnt"):
            chroot.run(spec, timeout=60)
    # Its program and working directory are the host's: the tmpfs on /mnt would hide them there.
    for argv, cwd in ((["/mnt/bin/python"], str(tmp_path)), (["/bin/true"], "/mnt/checkout")):
        hidden = chroot.Spec("/", argv, cwd=cwd, overlay=False)
        with pytest.raises(chroot.SandboxError, match="scratch space on /mnt"):
            chroot.run(hidden, timeout=60)


def machine_paths() -> dict[str, bytes]:
    """Paths a build on this machine could leak, that another machine would not have."""
    paths = {
        "the build cache": native.cache_root(),
        "the checkout": bundle.REPO,
        "the venv": Path(sys.prefix),
        "the home directory": Path.home() / ".cache",
    }
    return {what: str(path.resolve()).encode() for what, path in paths.items()}


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_no_file_of_a_built_bundle_names_a_path_of_this_machine(arch: str) -> None:
    root = BUNDLES / arch
    if not (root / "_internal").is_dir():
        pytest.skip(f"no {arch} bundle built (make build)")
    leaks = []
    fixed = 0
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        fixed += native.FIXED_CACHE.encode() in data
        leaks += [f"{path.relative_to(root)} names {what}"
                  for what, text in machine_paths().items() if text in data]  # fmt: skip
    assert leaks == []
    assert fixed > 0  # what the interpreter's files name instead (so the scan reads them)

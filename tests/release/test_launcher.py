"""The launcher: a copied executable or a damaged bundle says, in one line, what to install."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from credprovider.runtime.bundlecheck import FILES_MANIFEST, START_MANIFEST
from emulators.kubelet_exec import request_bytes
from release import bundle, layout
from release.targets import Target

VERSION = bundle.project_version()
HINT = f"install the whole credprovider-{VERSION}/ directory, not one file"


@dataclass
class Launcher:
    """Runs a bundle's launcher: directly, or for another architecture through qemu-user (the
    launcher is static, so qemu needs no root filesystem; it reports the guest program as
    /proc/self/exe, as the kernel would)."""

    target: Target
    bundle_dir: Path

    def run(
        self, executable: Path, *args: str, argv0: str | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        argv = [argv0 or str(executable), *args]
        if not self.target.is_native():
            qemu = shutil.which(self.target.qemu)
            if qemu is None:
                pytest.skip(f"{self.target.qemu} not installed")
            argv = [qemu, "-0", argv[0], str(executable), *args]
            executable = Path(qemu)
        return subprocess.run(
            argv,
            executable=executable,
            input=request_bytes("123456789012.dkr.ecr.us-west-2.amazonaws.com/app"),
            capture_output=True,
            timeout=60,
            env={"PATH": "/usr/bin:/bin"},
            check=False,
        )


@pytest.fixture
def launcher(bundle_dir: Path, target: Target) -> Launcher:
    return Launcher(target, bundle_dir)


@pytest.fixture
def native_launcher(launcher: Launcher) -> Launcher:
    """For tests that go on into the bundle's dynamically linked executable, which another
    architecture can run only through binfmt_misc: test_old_userland.py runs those in a sandbox."""
    if not launcher.target.is_native():
        pytest.skip(
            f"{launcher.target.arch}: runs the bundle, done under qemu in test_old_userland.py"
        )
    return launcher


def assert_one_line_failure(
    result: subprocess.CompletedProcess[bytes], name: str, *fragments: str
) -> str:
    assert result.returncode == 1
    assert result.stdout == b""
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{name}: ")
    assert HINT in lines[0] and "--image-credential-provider-bin-dir" in lines[0]
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def copy_bundle(bundle_dir: Path, into: Path) -> Path:
    copy = into / f"credprovider-{VERSION}"
    shutil.copytree(bundle_dir, copy, symlinks=True)
    return copy


def test_a_copied_executable_explains_itself(launcher: Launcher, tmp_path: Path) -> None:
    lone = tmp_path / "ecr-credential-provider"
    shutil.copy2(launcher.bundle_dir / "credprovider", lone)
    line = assert_one_line_failure(
        launcher.run(lone, "get-credentials"),
        "ecr-credential-provider",
        f"{tmp_path}/_internal is missing",
    )
    assert "PYI" not in line and "shared library" not in line


def test_a_hard_link_elsewhere_explains_itself(launcher: Launcher, tmp_path: Path) -> None:
    copy = copy_bundle(launcher.bundle_dir, tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.link(copy / "credprovider", bin_dir / "auth-provider-gcp")
    assert_one_line_failure(
        launcher.run(bin_dir / "auth-provider-gcp"),
        "auth-provider-gcp",
        f"{bin_dir}/_internal is missing",
    )


def test_symlinks_from_another_directory_work(native_launcher: Launcher, tmp_path: Path) -> None:
    copy = copy_bundle(native_launcher.bundle_dir, tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "acr-credential-provider").symlink_to(copy / "acr-credential-provider")
    result = native_launcher.run(bin_dir / "acr-credential-provider", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().startswith(
        f"acr-credential-provider version {VERSION} (credprovider)\n"
    )


@pytest.mark.parametrize(
    "victim",
    [
        "libpython3.11.so.1.0",
        "libssl.so.3",
        "lib/python3.11/os.pyc",
        "credprovider-main",
        "credprovider-boot.py",
        "libc.so.6",
        "LOADER",
    ],
)
def test_a_missing_file_is_named(launcher: Launcher, tmp_path: Path, victim: str) -> None:
    victim = launcher.target.loader if victim == "LOADER" else victim
    copy = copy_bundle(launcher.bundle_dir, tmp_path)
    (copy / "_internal" / victim).unlink()
    assert_one_line_failure(
        launcher.run(copy / "ecr-credential-provider"),
        "ecr-credential-provider",
        f"the bundle is damaged: {copy}/_internal/{victim} is missing",
    )


def test_a_truncated_file_is_named(launcher: Launcher, tmp_path: Path) -> None:
    copy = copy_bundle(launcher.bundle_dir, tmp_path)
    library = copy / "_internal" / "libcrypto.so.3"
    size = library.stat().st_size
    with library.open("r+b") as handle:
        handle.truncate(size // 2)
    assert_one_line_failure(
        launcher.run(copy / "credprovider", "--version"),
        "credprovider",
        f"{library} has {size // 2} bytes, not {size}",
    )


def test_a_missing_start_manifest_is_a_damaged_bundle(launcher: Launcher, tmp_path: Path) -> None:
    copy = copy_bundle(launcher.bundle_dir, tmp_path)
    (copy / "_internal" / START_MANIFEST).unlink()
    assert_one_line_failure(
        launcher.run(copy / "credprovider"), "credprovider", "the bundle is damaged: cannot read"
    )


@pytest.mark.parametrize(
    "victim",
    [
        "lib/python3.11/json/decoder.pyc",  # the stdlib, imported by every request
        "botocore/client.pyc",  # the cloud's SDK, imported on a miss
    ],
)
def test_a_file_past_start_up_is_named_when_the_request_fails(
    native_launcher: Launcher, tmp_path: Path, victim: str
) -> None:
    """The launcher checks only what start-up needs (credprovider.start); a file past it that is
    missing makes the request fail, and that failure is one line naming the file (the whole
    manifest checked then, credprovider/runtime/bundlecheck.py), never "No module named"."""
    copy = copy_bundle(native_launcher.bundle_dir, tmp_path)
    (copy / "_internal" / victim).unlink()
    line = assert_one_line_failure(
        native_launcher.run(copy / "ecr-credential-provider"),
        "ecr-credential-provider",
        f"the bundle is damaged: {copy}/_internal/{victim} is missing",
    )
    assert "No module named" not in line


def test_truncated_bytecode_past_start_up_is_named(
    native_launcher: Launcher, tmp_path: Path
) -> None:
    copy = copy_bundle(native_launcher.bundle_dir, tmp_path)
    module = copy / "_internal" / "botocore" / "credentials.pyc"
    size = module.stat().st_size
    with module.open("r+b") as handle:
        handle.truncate(100)
    assert_one_line_failure(
        native_launcher.run(copy / "ecr-credential-provider"),
        "ecr-credential-provider",
        f"{module} has 100 bytes, not {size}",
    )


@pytest.mark.parametrize("damage", ["missing", "cut short"])
def test_the_plugins_module_table_is_checked_on_each_exec(
    launcher: Launcher, tmp_path: Path, damage: str
) -> None:
    """The plugins' own modules are one file (release/layout.py), which start-up reads: the
    launcher checks it like the interpreter's own files."""
    copy = copy_bundle(launcher.bundle_dir, tmp_path)
    table = copy / "_internal" / layout.EXEC_MODULES
    size = table.stat().st_size
    if damage == "missing":
        table.unlink()
        expected = f"the bundle is damaged: {table} is missing"
    else:
        with table.open("r+b") as handle:
            handle.truncate(size - 1)
        expected = f"{table} has {size - 1} bytes, not {size}"
    assert_one_line_failure(
        launcher.run(copy / "ecr-credential-provider"), "ecr-credential-provider", expected
    )


def test_the_tool_names_a_missing_file_too(native_launcher: Launcher, tmp_path: Path) -> None:
    copy = copy_bundle(native_launcher.bundle_dir, tmp_path)
    victim = copy / "_internal" / "credprovider" / "tool" / "cli.pyc"
    victim.unlink()
    assert_one_line_failure(
        native_launcher.run(copy / "credprovider", "validate", "--help"),
        "credprovider",
        f"the bundle is damaged: {victim} is missing",
    )


@pytest.mark.parametrize(
    ("manifest", "why"),
    [
        ("missing", "No such file or directory"),
        ("a FIFO", "not a regular file"),  # was waited on until the kubelet's kill
        ("a directory", "not a regular file"),
        ("5 MiB", "larger than 4 MiB"),
    ],
)
def test_without_the_whole_manifest_a_failed_start_says_so(
    native_launcher: Launcher, tmp_path: Path, manifest: str, why: str
) -> None:
    """--version needs nothing past start-up; a start that fails reads the whole manifest, as a
    file on a node is read (never waited on, never past its cap), and says why it cannot."""
    copy = copy_bundle(native_launcher.bundle_dir, tmp_path)
    listing = copy / "_internal" / FILES_MANIFEST
    listing.unlink()
    if manifest == "a FIFO":
        os.mkfifo(listing)
    elif manifest == "a directory":
        listing.mkdir()
    elif manifest == "5 MiB":
        listing.write_bytes(b"1 x\n" * (5 << 18))
    assert native_launcher.run(copy / "credprovider", "--version").returncode == 0
    (copy / "_internal" / "botocore" / "client.pyc").unlink()
    assert_one_line_failure(
        native_launcher.run(copy / "ecr-credential-provider"),
        "ecr-credential-provider",
        f"the bundle is damaged: cannot read {listing} ({why})",
    )


def test_a_whole_bundle_fails_as_itself(native_launcher: Launcher, tmp_path: Path) -> None:
    """A failure that is not damage keeps its own line: the check finds nothing to blame."""
    result = native_launcher.run(native_launcher.bundle_dir / "ecr-credential-provider", "--bogus")
    assert result.returncode == 1
    assert "damaged" not in result.stderr.decode()
    assert "unrecognized arguments: --bogus" in result.stderr.decode()


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
def test_start_up_reads_only_what_the_launcher_checked(
    native_launcher: Launcher, tmp_path: Path
) -> None:
    """What the launcher checks on each exec is what start-up reads: ``--version`` traced opens
    no file of _internal/ that credprovider.start does not list (a new import on that path
    must join release/bundle.py's START_MODULES)."""
    contents = native_launcher.bundle_dir.resolve() / "_internal"
    trace = tmp_path / "trace"
    subprocess.run(
        [
            "strace",
            "-f",
            "-qq",
            "-e",
            "trace=open,openat",
            "-e",
            "status=successful",
            "-o",
            str(trace),
            str(native_launcher.bundle_dir / "ecr-credential-provider"),
            "--version",
        ],
        capture_output=True,
        check=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    listed = {
        line.split(" ", 1)[1] for line in (contents / START_MANIFEST).read_text().splitlines()
    }
    opened = set()
    for line in trace.read_text().splitlines():
        if '"' not in line:
            continue
        path = Path(line.split('"')[1])
        if path.is_relative_to(contents) and path.is_file():
            opened.add(str(path.relative_to(contents)))
    assert opened, trace.read_text()
    assert opened <= listed | {START_MANIFEST}, opened - listed


def test_the_launcher_passes_argv_and_stdin_through(native_launcher: Launcher) -> None:
    """The kubelet's argv[0] (a full path) picks the plugin; stdin reaches it; exit codes pass back."""
    result = native_launcher.run(
        native_launcher.bundle_dir / "credprovider",
        "--no-such-flag",
        argv0="/var/lib/kubelet/plugins/ecr-credential-provider",
    )
    assert result.returncode == 1 and result.stdout == b""
    assert result.stderr.decode().startswith("ecr-credential-provider:")
    assert "unrecognized arguments: --no-such-flag" in result.stderr.decode()


def test_the_plugin_runs_on_the_bundles_glibc_with_the_environment_it_was_given(
    native_launcher: Launcher, tmp_path: Path
) -> None:
    """The loader gets the bundle's library path as an argument: the running plugin maps libc and
    libpython from _internal/ only, even with a node's LD_LIBRARY_PATH naming another libc, and its
    environment (which anything it runs inherits) is the one it was given: no LD_LIBRARY_PATH into
    the bundle."""
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "libc.so.6").write_bytes(b"not a libc")
    contents = native_launcher.bundle_dir.resolve() / "_internal"
    for given in ({}, {"LD_LIBRARY_PATH": str(foreign)}):
        env = {"PATH": "/usr/bin:/bin", **given}
        with subprocess.Popen(
            [str(native_launcher.bundle_dir / "ecr-credential-provider")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        ) as plugin:
            proc = Path(f"/proc/{plugin.pid}")
            deadline = time.monotonic() + 30
            # Waiting for the request on stdin: by then the interpreter has started.
            while b"credprovider-boot.py" not in (proc / "cmdline").read_bytes():
                assert time.monotonic() < deadline and plugin.poll() is None
                time.sleep(0.02)
            while "libpython3.11" not in (proc / "maps").read_text():
                assert time.monotonic() < deadline and plugin.poll() is None
                time.sleep(0.02)
            maps = (proc / "maps").read_text()
            environ = (proc / "environ").read_bytes().split(b"\0")
            plugin.communicate(b"", timeout=60)
        mapped = {line.split()[-1] for line in maps.splitlines() if ".so" in line}
        for library in ("libc.so.6", native_launcher.target.loader, "libpython3.11.so.1.0"):
            assert {p for p in mapped if p.endswith("/" + library)} == {f"{contents}/{library}"}
        assert sorted(e.decode() for e in environ if e) == sorted(
            f"{k}={v}" for k, v in env.items()
        )

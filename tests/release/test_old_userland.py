"""The tarball on an older userland: unpacked into a Debian 11 (glibc 2.31) root filesystem and run there.

Inside a sandbox (release/sandbox.py: private user and mount namespaces, an overlay over the cached
root filesystem, arm64 through qemu-user and a private binfmt_misc), the root filesystem's own tar
unpacks the tarball under /opt, and every plugin answers the demo's requests against the loopback
emulators, which run in this process (the chroot shares the loopback network).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from demo import SCENARIO_SOURCES, Scenario
from emulators.kubelet_exec import request_bytes
from release import bundle, rootfs, sandbox
from release.targets import GLIBC_LIBRARIES, GLIBC_NSS_LIBRARIES, Target

pytestmark = pytest.mark.slow
VERSION = bundle.project_version()
INSTALL_DIR = f"/opt/credprovider-{VERSION}"
TMP = tempfile.gettempdir()


@dataclass
class OldNode:
    target: Target
    root: Path
    upper: Path  # the overlay's upper layer: the unpacked tarball stays there between runs

    def run(
        self, argv: list[str], stdin: bytes = b"", env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        spec = sandbox.spec_for(
            self.target,
            self.root,
            argv,
            env=sandbox.env_with_path(env),
            upper=str(self.upper),
            binds=[sandbox.Bind(TMP, TMP, read_only=True)],
        )
        return sandbox.run(spec, stdin=stdin, timeout=600)


@pytest.fixture
def old_node(target: Target, tarball: Path, tmp_path: Path) -> Iterator[OldNode]:
    why = sandbox.supported()
    if why:
        pytest.skip(f"sandbox: {why}")
    root = rootfs.ensure(target)
    upper = tmp_path / "layers"
    upper.mkdir()
    node = OldNode(target, root, upper)
    # The tarball reaches the node through the /tmp bind; its own tar unpacks it.
    with tempfile.TemporaryDirectory(dir=TMP) as staging:
        staged = Path(staging) / tarball.name
        shutil.copyfile(tarball, staged)
        result = node.run(["/bin/tar", "-xzf", str(staged), "-C", "/opt"])
    assert result.returncode == 0, result.stderr
    mounts_before = host_mounts()
    yield node
    # The sandboxes changed nothing on the host: no mount, no binfmt_misc registration.
    assert host_mounts() == mounts_before
    assert not Path("/proc/sys/fs/binfmt_misc/credprovider-qemu").exists()


def host_mounts() -> list[str]:
    """This machine's mount table, without the per-mount ids that change on remount."""
    return sorted(
        " ".join(line.split()[3:]) for line in Path("/proc/self/mountinfo").read_text().splitlines()
    )


def test_the_root_filesystem_is_debian_11(old_node: OldNode) -> None:
    result = old_node.run(["/usr/bin/ldd", "--version"])
    assert result.returncode == 0
    assert re.search(r"GLIBC 2\.31", result.stdout.decode()), result.stdout


def test_version_under_every_name(old_node: OldNode) -> None:
    for name in (
        "credprovider",
        "ecr-credential-provider",
        "acr-credential-provider",
        "auth-provider-gcp",
    ):
        result = old_node.run([f"{INSTALL_DIR}/{name}", "--version"])
        assert result.returncode == 0, result.stderr
        first, second = result.stdout.decode().splitlines()
        assert first == f"{name} version {VERSION} (credprovider)"
        assert re.fullmatch(
            rf"commit [0-9a-f]{{12}}(-dirty)?, built \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ, "
            rf"linux/{old_node.target.arch}, Python 3\.11\.\d+, OpenSSL 3\.\d+\.\d+ .*",
            second,
        ), second


@contextmanager
def demo_scenarios() -> Iterator[list[Scenario]]:
    """Every scenario of make demo, with its emulators running."""
    with ExitStack() as stack:
        found: list[Scenario] = []
        for source in SCENARIO_SOURCES.values():
            found += stack.enter_context(source())
        yield found


def test_every_plugin_answers_the_demo_requests(old_node: OldNode) -> None:
    with demo_scenarios() as found:
        assert len(found) >= 8
        for scenario in found:
            request = request_bytes(
                scenario.image, token=scenario.token, annotations=scenario.annotations
            )
            result = old_node.run(
                [f"{INSTALL_DIR}/{scenario.plugin}", *scenario.args], request, scenario.env
            )
            assert result.returncode == 0, f"{scenario.title}: {result.stderr.decode()}"
            response = json.loads(result.stdout)
            assert response["kind"] == "CredentialProviderResponse", scenario.title
            assert response["auth"], scenario.title
            for entry in response["auth"].values():
                assert entry["username"] and entry["password"], scenario.title


def loaded_objects(ld_debug: str) -> set[str]:
    """Every shared object the loader opened, from its LD_DEBUG=libs,files account: absolute paths it
    was given (dlopen of an extension module), and the file each library search ended on."""
    found: set[str] = set()
    last_try = ""
    for raw in ld_debug.splitlines():
        line = raw.split(":", 1)[1].strip() if re.match(r"^\s*\d+:", raw) else raw.strip()
        if line.startswith("trying file="):
            last_try = line.removeprefix("trying file=")
            continue
        if line.startswith("search path=") or line.startswith("search cache="):
            continue
        if last_try:
            found.add(last_try)  # the search ended on its last try
            last_try = ""
        absolute = re.match(r"file=(/\S+) \[\d+\];", line)
        if absolute:
            found.add(absolute.group(1))
    return found


def test_loaded_objects_parser() -> None:
    text = (
        "  7:\tfind library=libz.so.1 [0]; searching\n"
        "  7:\t search path=/opt/x/_internal\t\t(LD_LIBRARY_PATH)\n"
        "  7:\t  trying file=/opt/x/_internal/tls/libz.so.1\n"
        "  7:\t  trying file=/opt/x/_internal/libz.so.1\n"
        "  7:\t\n"
        "  7:\tfind library=libc.so.6 [0]; searching\n"
        "  7:\t  trying file=/opt/x/_internal/libc.so.6\n"
        "  7:\t search cache=/etc/ld.so.cache\n"
        "  7:\t  trying file=/lib/x86_64-linux-gnu/libc.so.6\n"
        "  7:\tfile=/opt/x/_internal/m.so [0];  dynamically loaded by /opt/x/_internal/libpython3.11.so.1.0 [0]\n"
    )
    assert loaded_objects(text) == {
        "/opt/x/_internal/libz.so.1",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/opt/x/_internal/m.so",
    }


def test_nothing_is_loaded_from_the_node_but_glibc(old_node: OldNode) -> None:
    """The loader's own account (LD_DEBUG) of a cache miss per cloud: every object it opened is the
    bundle's, or glibc's (including the name-service modules libc loads as nsswitch.conf says)."""
    seen: set[str] = set()
    with demo_scenarios() as found:
        firsts = {scenario.plugin: scenario for scenario in reversed(found)}
        for scenario in firsts.values():
            request = request_bytes(
                scenario.image, token=scenario.token, annotations=scenario.annotations
            )
            env = {**scenario.env, "LD_DEBUG": "libs,files"}
            result = old_node.run(
                [f"{INSTALL_DIR}/{scenario.plugin}", *scenario.args], request, env
            )
            assert result.returncode == 0, result.stderr.decode()[-2000:]
            loaded = loaded_objects(result.stderr.decode())
            seen |= loaded
            assert f"{INSTALL_DIR}/_internal/libpython3.11.so.1.0" in loaded, sorted(loaded)
            outside = {
                path
                for path in loaded
                if not path.startswith(f"{INSTALL_DIR}/_internal/")
                and os.path.basename(path) not in GLIBC_LIBRARIES | GLIBC_NSS_LIBRARIES
            }
            assert outside == set(), f"{scenario.plugin} loaded from the node: {sorted(outside)}"
    # OpenSSL is loaded only where a miss needs it (TLS, or SigV4's HMAC): by some scenario, and
    # then the bundle's copy. Plain-HTTP metadata calls load neither (credprovider/runtime/http.py).
    for expected in ("libssl.so.3", "libcrypto.so.3"):
        assert f"{INSTALL_DIR}/_internal/{expected}" in seen, sorted(seen)

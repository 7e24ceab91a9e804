"""The tarball on an older userland: unpacked into a Debian 11 (glibc 2.31) root filesystem and run there.

Inside a sandbox (release/chroot.py: private user and mount namespaces, an overlay over the cached
root filesystem, arm64 through qemu-user and a private binfmt_misc), the root filesystem's own tar
unpacks the tarball under /opt, and every plugin answers the demo's requests against the loopback
emulators, which run in this process (the chroot shares the loopback network).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from release import bundle, rootfs
from release.targets import Target
from tests.release.nodes import (
    Node,
    demo_scenarios,
    every_plugin_answers,
    host_unchanged,
    scenario_request,
    staged,
)

pytestmark = pytest.mark.slow
VERSION = bundle.project_version()
INSTALL_DIR = f"/opt/credprovider-{VERSION}"


@pytest.fixture
def old_node(target: Target, tarball: Path, tmp_path: Path) -> Iterator[Node]:
    upper = tmp_path / "layers"
    upper.mkdir()
    # The sandboxes change nothing on the host: no mount, no binfmt_misc registration.
    with host_unchanged(Node(target, rootfs.rootfs_dir(target), upper)) as node:
        rootfs.ensure(target)
        # The tarball reaches the node through the /tmp bind; its own tar unpacks it.
        with staged(tarball) as inside:
            result = node.run(["/bin/tar", "-xzf", inside, "-C", "/opt"])
        assert result.returncode == 0, result.stderr
        yield node


def test_the_root_filesystem_is_debian_11(old_node: Node) -> None:
    result = old_node.run(["/usr/bin/ldd", "--version"])
    assert result.returncode == 0
    assert re.search(r"GLIBC 2\.31", result.stdout.decode()), result.stdout


def test_version_under_every_name(old_node: Node) -> None:
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


def test_every_plugin_answers_the_demo_requests(old_node: Node) -> None:
    every_plugin_answers(old_node, INSTALL_DIR)


def loaded_objects(ld_debug: str) -> set[str]:
    """Every shared object the loader opened, from its LD_DEBUG=libs,files account: absolute paths it
    was given (dlopen of an extension module), and the file each library search ended on when the
    loader then maps it ("generating link map"; a search that found nothing maps nothing)."""
    found: set[str] = set()
    last_try = ""
    for raw in ld_debug.splitlines():
        line = raw.split(":", 1)[1].strip() if re.match(r"^\s*\d+:", raw) else raw.strip()
        if line.startswith("trying file="):
            last_try = line.removeprefix("trying file=")
            continue
        if not line or line.startswith("search path=") or line.startswith("search cache="):
            continue
        if last_try and re.match(r"file=\S+ \[\d+\];\s+generating link map", line):
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
        "  7:\tfile=libz.so.1 [0];  generating link map\n"
        "  7:\tfind library=libc.so.6 [0]; searching\n"
        "  7:\t  trying file=/opt/x/_internal/libc.so.6\n"
        "  7:\t search cache=/etc/ld.so.cache\n"
        "  7:\t  trying file=/lib/x86_64-linux-gnu/libc.so.6\n"
        "  7:\t\n"
        "  7:\tfile=libc.so.6 [0];  generating link map\n"
        "  7:\tfile=/opt/x/_internal/m.so [0];  dynamically loaded by /opt/x/_internal/libpython3.11.so.1.0 [0]\n"
        # a search that found nothing (libnss_compat asking for libnss_nis): nothing is mapped
        "  7:\tfind library=libnss_nis.so.2 [0]; searching\n"
        "  7:\t  trying file=/usr/lib/libnss_nis.so.2\n"
        "  7:\t\n"
        "  7:\tcalling fini:  [0]\n"
    )
    assert loaded_objects(text) == {
        "/opt/x/_internal/libz.so.1",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/opt/x/_internal/m.so",
    }


def test_nothing_is_loaded_from_the_node(old_node: Node) -> None:
    """The loader's own account (LD_DEBUG) of a cache miss per cloud: every object it opened is the
    bundle's, glibc and its name-service modules included (the node's glibc 2.31 is never used)."""
    seen: set[str] = set()
    with demo_scenarios() as found:
        firsts = {scenario.plugin: scenario for scenario in reversed(found)}
        for scenario in firsts.values():
            env = {**scenario.env, "LD_DEBUG": "libs,files"}
            result = old_node.run(
                [f"{INSTALL_DIR}/{scenario.plugin}", *scenario.args],
                scenario_request(scenario),
                env,
            )
            assert result.returncode == 0, result.stderr.decode()[-2000:]
            loaded = loaded_objects(result.stderr.decode())
            seen |= loaded
            for inside in ("libpython3.11.so.1.0", "libc.so.6"):
                assert f"{INSTALL_DIR}/_internal/{inside}" in loaded, sorted(loaded)
            outside = {path for path in loaded if not path.startswith(f"{INSTALL_DIR}/_internal/")}
            assert outside == set(), f"{scenario.plugin} loaded from the node: {sorted(outside)}"
    # OpenSSL is loaded only where a miss needs it (TLS, or SigV4's HMAC): by some scenario, and
    # then the bundle's copy. Plain-HTTP metadata calls load neither (credprovider/runtime/http.py).
    for expected in ("libssl.so.3", "libcrypto.so.3"):
        assert f"{INSTALL_DIR}/_internal/{expected}" in seen, sorted(seen)

"""The tarball where the node has no libc at all: a root filesystem holding nothing but Debian's
static busybox (as Talos, Alpine-based and distroless roots have no glibc). busybox's tar unpacks
the tarball; the launcher (static, musl) and the interpreter (on the bundle's own glibc and loader)
start, and every plugin answers the demo's requests; arm64 under qemu-user.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from release import bundle, elfcheck
from release.targets import Target
from tests.release.nodes import Node, busybox_root, every_plugin_answers, host_unchanged, staged
from tests.release.test_old_userland import loaded_objects

pytestmark = pytest.mark.slow
VERSION = bundle.project_version()
INSTALL_DIR = f"/opt/credprovider-{VERSION}"
# Made by the sandbox as mount points, or by the test: never holding a file of their own.
MOUNT_POINTS = {"proc", "dev", "tmp"}


@pytest.fixture
def bare_node(target: Target, tarball: Path, tmp_path: Path) -> Iterator[Node]:
    root = busybox_root(target, tmp_path / "root")
    (root / "opt").mkdir()
    with host_unchanged(Node(target, root)) as node:
        with staged(tarball) as inside:
            result = node.run(["/bin/busybox", "tar", "-xzf", inside, "-C", "/opt"])
        assert result.returncode == 0, result.stderr
        yield node


def test_the_root_holds_a_static_shell_and_the_bundle_only(bare_node: Node) -> None:
    """Guard against a vacuous pass: no libc, no loader, no /etc outside the bundle."""
    outside = []
    for directory, dirs, files in os.walk(bare_node.root):
        relative = Path(directory).relative_to(bare_node.root)
        if relative == Path("."):
            dirs[:] = [d for d in dirs if d not in MOUNT_POINTS]
        if relative.parts[:2] == ("opt", f"credprovider-{VERSION}"):
            dirs[:] = []
            continue
        outside += [(relative / name).as_posix() for name in files]
    assert sorted(outside) == ["bin/busybox", "bin/sh"]
    shell = elfcheck.read_elf(bare_node.root / "bin" / "busybox", "bin/busybox")
    assert shell.needed == () and shell.machine == bare_node.target.elf_machine
    result = bare_node.run(["/bin/busybox", "ls", "/lib", "/lib64", "/usr", "/etc"])
    assert result.returncode != 0 and result.stdout == b""


def test_every_plugin_answers_without_a_libc_on_the_node(bare_node: Node) -> None:
    for name in ("credprovider", "ecr-credential-provider", "acr-credential-provider"):
        result = bare_node.run([f"{INSTALL_DIR}/{name}", "--version"])
        assert result.returncode == 0, result.stderr
        assert result.stdout.decode().startswith(f"{name} version {VERSION} (credprovider)\n")
        assert re.search(rf"linux/{bare_node.target.arch}, Python 3\.11", result.stdout.decode())
    every_plugin_answers(bare_node, INSTALL_DIR)


NAMES = "import socket, pwd; print(socket.gethostbyname('emulators.node.test'), pwd.getpwuid(0).pw_name)"


def test_names_and_users_resolve_through_the_bundles_glibc(bare_node: Node) -> None:
    """/etc/hosts through the bundle's glibc ("files" is inside libc.so.6), and a "passwd: compat"
    line through the bundle's own libnss_compat: no name-service module from the node."""
    etc = bare_node.root / "etc"
    etc.mkdir()
    (etc / "hosts").write_text("127.0.0.1 emulators.node.test\n")
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (etc / "nsswitch.conf").write_text("passwd: compat\nhosts: files dns\n")
    contents = f"{INSTALL_DIR}/_internal"
    loader = [
        f"{contents}/{bare_node.target.loader}",
        "--inhibit-cache",
        "--library-path",
        contents,
    ]
    result = bare_node.run(
        [*loader, f"{contents}/credprovider-main", "-I", "-S", "-B", "-c", NAMES],
        env={"LD_DEBUG": "libs,files"},
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert result.stdout == b"127.0.0.1 root\n"
    loaded = loaded_objects(result.stderr.decode())
    assert f"{contents}/libnss_compat.so.2" in loaded, sorted(loaded)
    assert [p for p in loaded if not p.startswith(f"{contents}/")] == [], sorted(loaded)

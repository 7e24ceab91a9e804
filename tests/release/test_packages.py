"""The .deb and the .rpm, installed, upgraded and removed as an operator does.

The .deb with dpkg inside the Debian 11 root filesystem; the .rpm with rpm --root into a root that
holds nothing but Debian's static busybox (its removal script needs a /bin/sh), which the plugin then
answers in: no libc there either. Each starts from a package of an earlier version, built from the
same tarball by the same code (release/distpackages.py), and after each step checks the package's bin
dir, the links ``credprovider install`` made in the kubelet's own bin dir, and the operator's config.
arm64 runs under qemu-user.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from credprovider.entry import PLUGIN_MODULES, TOOL_NAME
from credprovider.paths import (
    PACKAGE_BIN_DIR,
    PACKAGE_DOC_DIR,
    PACKAGE_LIB_DIR,
    PACKAGE_LINKS_FILE,
    PACKAGE_TOOL_LINK,
)
from release import bundle, distpackages, rootfs
from release.targets import Target
from tests.release.conftest import missing
from tests.release.nodes import Node, busybox_root, every_plugin_answers, host_unchanged, staged

pytestmark = pytest.mark.slow
VERSION = bundle.project_version()
EARLIER = "0.0.1"
NAMES = (TOOL_NAME, *PLUGIN_MODULES)  # every program name the bundle answers to
KUBELET_BIN_DIR = "/etc/kubernetes/image-credential-provider"
OPERATOR_CONFIG = "/etc/kubernetes/image-credential-provider-config.yaml"
OPERATOR_TEXT = "# the operator's own config: no package may touch it\n"


def release_of(version: str, arch: str) -> distpackages.Release:
    return distpackages.Release(version, arch, 1700000000, distpackages.readme_text(version))


@pytest.fixture
def built(target: Target) -> dict[str, Path]:
    """The release's .deb and .rpm for ``target``."""
    out = bundle.REPO / "dist" / "release"
    release = release_of(VERSION, target.arch)
    found = {
        "deb": out / distpackages.deb_name(release),
        "rpm": out / distpackages.rpm_name(release),
    }
    for path in found.values():
        if not path.exists():
            missing(f"the package {path.name}", target.arch)
    return found


@pytest.fixture
def earlier(target: Target, tarball: Path, tmp_path: Path) -> dict[str, Path]:
    """Packages of an earlier version: the same tarball's tree, packaged as EARLIER."""
    tree = tmp_path / "tree"
    tree.mkdir()
    with tarfile.open(tarball) as tar:
        tar.extractall(tree, filter="tar")
    out = tmp_path / "earlier"
    out.mkdir()
    made = distpackages.build(
        tree / f"credprovider-{VERSION}", release_of(EARLIER, target.arch), out, 0
    )
    return {path.suffix.lstrip("."): path for path in made}


def test_package_metadata(built: dict[str, Path], target: Target) -> None:
    fields = dpkg_fields(built["deb"])
    assert fields["Package"] == "credprovider" and fields["Version"] == VERSION
    assert fields["Architecture"] == target.arch
    assert fields["License"] == distpackages.LICENSE and fields["Homepage"] == distpackages.HOMEPAGE
    assert fields["Description"].startswith(distpackages.SUMMARY)
    assert "Depends" not in fields and "Pre-Depends" not in fields
    info = subprocess.run(["rpm", "-qip", str(built["rpm"])], capture_output=True, text=True)
    assert info.returncode == 0, info.stderr
    rpm = dict(re.findall(r"^(\w[\w ]*?)\s*: (.*)$", info.stdout, re.M))
    assert (rpm["Name"], rpm["Version"], rpm["Release"]) == ("credprovider", VERSION, "1")
    assert rpm["Architecture"] == distpackages.RPM_ARCH[target.arch]
    assert rpm["License"] == distpackages.LICENSE and rpm["URL"] == distpackages.HOMEPAGE
    assert rpm["Summary"] == distpackages.SUMMARY
    requires = rpm_query(built["rpm"], "-R")
    assert [r for r in requires if not r.startswith("rpmlib(")] == ["/bin/sh"]  # its %preun


def test_both_packages_install_the_same_files_and_nothing_else(built: dict[str, Path]) -> None:
    listing = subprocess.run(
        ["dpkg-deb", "--fsys-tarfile", str(built["deb"])], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(listing)) as tar:
        deb_files = {"/" + m.name.removeprefix("./").rstrip("/") for m in tar.getmembers()}
    deb_files -= {"/", "/.", "/usr", "/usr/bin", "/usr/lib", "/usr/share", "/usr/share/doc"}
    rpm_files = set(rpm_query(built["rpm"], "-l"))
    assert deb_files == rpm_files
    owned = (PACKAGE_LIB_DIR, PACKAGE_TOOL_LINK, PACKAGE_DOC_DIR)
    outside = [p for p in rpm_files if not any(p == o or p.startswith(o + "/") for o in owned)]
    assert outside == []
    assert {f"{PACKAGE_BIN_DIR}/{name}" for name in NAMES} <= rpm_files
    assert f"{PACKAGE_LIB_DIR}/{VERSION}/_internal/credprovider.files" in rpm_files
    assert f"{PACKAGE_DOC_DIR}/config/aws.yaml" in rpm_files


def test_each_package_has_an_sbom_and_a_checksum(built: dict[str, Path], target: Target) -> None:
    sums = (built["deb"].parent / "SHA256SUMS").read_text()
    for kind, path in built.items():
        document = json.loads(path.with_name(path.name + ".cdx.json").read_text())
        root = document["metadata"]["component"]
        assert root["purl"] == distpackages.purl(path, release_of(VERSION, target.arch)), kind
        assert root["purl"].startswith(f"pkg:{kind}/credprovider@{VERSION}")
        names = {component["name"] for component in document["components"]}
        assert {"glibc", "openssl", "botocore"} <= names, names
        for listed in (path, path.with_name(path.name + ".cdx.json")):
            assert re.search(rf"^[0-9a-f]{{64}}  {re.escape(listed.name)}$", sums, re.M), listed


def dpkg_fields(deb: Path) -> dict[str, str]:
    text = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, check=True)
    return dict(re.findall(r"^(\S+): (.*)$", text.stdout, re.M))


def rpm_query(rpm: Path, what: str) -> list[str]:
    result = subprocess.run(["rpm", "-qp", what, str(rpm)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("\n")[:-1]


# ---- installed on a node ------------------------------------------------------------------------

STATE = f"""
for dir in {PACKAGE_BIN_DIR} {KUBELET_BIN_DIR}; do
  for link in "$dir"/*; do
    [ -L "$link" ] || continue
    if [ -e "$link" ]; then echo "link $link $(readlink "$link")"; else echo "dangling $link"; fi
  done
done
ls -1 {PACKAGE_LIB_DIR} 2>/dev/null | sed 's/^/version /'
[ -e {PACKAGE_TOOL_LINK} ] && echo "tool"
[ -f {PACKAGE_LINKS_FILE} ] && sed 's/^/recorded /' {PACKAGE_LINKS_FILE}
cat {OPERATOR_CONFIG}
"""


def state(node: Node) -> list[str]:
    """What the node's bin dirs, package directory and operator config are now."""
    result = node.run(["/bin/sh", "-c", STATE])
    return result.stdout.decode().splitlines()


def installed(version: str, linked: bool) -> list[str]:
    """The state of a node with ``version`` installed (and install's links, when ``linked``)."""
    lines = [f"link {PACKAGE_BIN_DIR}/{n} ../{version}/{n}" for n in sorted(NAMES)]
    if linked:
        lines += [
            f"link {KUBELET_BIN_DIR}/{n} {PACKAGE_BIN_DIR}/credprovider"
            for n in ("ecr-credential-provider",)
        ]
    lines += [f"version {version}", "version bin", "tool"]
    if linked:
        lines.append(f"recorded {KUBELET_BIN_DIR}/ecr-credential-provider")
    return [*lines, OPERATOR_TEXT.rstrip("\n")]


REMOVED = [OPERATOR_TEXT.rstrip("\n")]


def install_links(node: Node) -> subprocess.CompletedProcess[bytes]:
    """credprovider install from the package: the ECR plugin linked into the kubelet's bin dir."""
    return node.run(
        [
            PACKAGE_TOOL_LINK, "install", "--providers", "aws", "--bin-dir", KUBELET_BIN_DIR,
            "--config-out", "/etc/kubernetes/credprovider-ecr.yaml",
        ]
    )  # fmt: skip


@pytest.fixture
def debian_node(target: Target, tmp_path: Path) -> Iterator[Node]:
    upper = tmp_path / "layers"
    upper.mkdir()
    with host_unchanged(Node(target, rootfs.rootfs_dir(target), upper)) as node:
        rootfs.ensure(target)
        with_operator_config(node)
        yield node


def with_operator_config(node: Node) -> None:
    config = node.path(OPERATOR_CONFIG)
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(OPERATOR_TEXT)


FORCE = "CREDPROVIDER_FORCE_REMOVE"
KUBEADM_FLAGS = "/var/lib/kubelet/kubeadm-flags.env"
# the kubelet found through kubeadm's layout (its flags files; no kubelet runs here)
REFUSED = (
    "credprovider: not removed: the kubelet's config /etc/kubernetes/credprovider-ecr.yaml (layout "
    f"kubeadm (kubelet flags in its flag files)) names plugins this package holds ({KUBELET_BIN_DIR}"
    "/ecr-credential-provider, in /usr/lib/credprovider): without them the kubelet does not start; "
)


@contextlib.contextmanager
def kubelet_using_the_package(node: Node) -> Iterator[None]:
    """kubeadm's flags file naming install's bin dir (links into the package) and its config."""
    flags = node.path(KUBEADM_FLAGS)
    flags.parent.mkdir(parents=True, exist_ok=True)
    flags.write_text(
        f'KUBELET_KUBEADM_ARGS="--image-credential-provider-bin-dir={KUBELET_BIN_DIR} '
        '--image-credential-provider-config=/etc/kubernetes/credprovider-ecr.yaml"\n'
    )
    try:
        yield
    finally:
        flags.unlink()


def test_deb_install_upgrade_and_removal_on_debian_11(
    debian_node: Node, built: dict[str, Path], earlier: dict[str, Path]
) -> None:
    node = debian_node
    with staged(earlier["deb"]) as old, staged(built["deb"]) as new:
        result = node.run(["/usr/bin/dpkg", "-i", old])
        assert result.returncode == 0, result.stderr.decode()
        assert install_links(node).returncode == 0
        assert state(node) == installed(EARLIER, linked=True)
        result = node.run(["/usr/bin/dpkg", "-i", new])
        assert result.returncode == 0, result.stderr.decode()
    # The upgrade re-pointed the package's links; install's link follows them.
    assert state(node) == installed(VERSION, linked=True)
    status = node.run(["/usr/bin/dpkg-query", "-W", "-f", "${Version} ${Status}", "credprovider"])
    assert status.stdout.decode() == f"{VERSION} install ok installed"
    every_plugin_answers(node, PACKAGE_BIN_DIR)
    result = node.run(["/bin/sh", "-c", f"{KUBELET_BIN_DIR}/ecr-credential-provider --version"])
    assert result.stdout.decode().startswith(f"ecr-credential-provider version {VERSION} ")
    # while the kubelet's flags name the plugins: the removal stops, changing nothing
    with kubelet_using_the_package(node):
        result = node.run(["/usr/bin/dpkg", "-r", "credprovider"])
        assert result.returncode != 0
        assert REFUSED in result.stderr.decode(), result.stderr.decode()
        assert state(node) == installed(VERSION, linked=True)
        status = node.run(["/usr/bin/dpkg-query", "-W", "-f", "${Status}", "credprovider"])
        # still installed (dpkg marks it wanted for removal: the next apt run says why again)
        assert status.stdout.decode() == "deinstall ok installed"
        result = node.run(["/usr/bin/dpkg", "-r", "credprovider"], env={FORCE: "1"})
    assert result.returncode == 0, result.stderr.decode()
    assert f"credprovider: removing anyway ({FORCE}=1): " in result.stderr.decode()
    assert (
        f"credprovider: removed {KUBELET_BIN_DIR}/ecr-credential-provider, a link to this package"
        in result.stderr.decode()
    )
    assert state(node) == REMOVED


@pytest.fixture
def empty_root(target: Target, tmp_path: Path) -> Iterator[Node]:
    applets = ("sh", "readlink", "rm", "rmdir", "dirname", "ls", "sed", "cat")
    with host_unchanged(Node(target, busybox_root(target, tmp_path / "root", applets))) as node:
        with_operator_config(node)
        yield node


# The flags each kind of change takes here (queries take none).
RPM_CHANGE_FLAGS = {
    "-i": ("--nodeps", "--ignorearch"),
    "-U": ("--nodeps", "--ignorearch"),
    "-e": ("--nodeps",),
}


def rpm(
    node: Node, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """rpm on this machine, into the node's root: its database inside it; --nodeps, as the root has
    no package providing /bin/sh (busybox's is there, unpackaged); --ignorearch for arm64 on amd64.

    rpm runs a scriptlet by chrooting into the root and executing its /bin/sh, which for another
    architecture only the sandbox's private binfmt_misc can run (registering qemu on the host is not
    ours to do). There rpm is told --noscripts, and the package's own %preun, read back from the
    database, runs inside the node as rpm would run it, before an erase ($1 = 0); before an upgrade
    it is skipped ($1 = 1 does nothing: the native run proves it)."""
    changes = list(RPM_CHANGE_FLAGS.get(args[0], ()))
    scriptlet = ""
    if changes and not node.target.is_native():
        changes.append("--noscripts")
        if args[0] == "-e":
            preun = rpm(node, "-q", "--qf", "%{PREUN}", args[1]).stdout
            assert 'if [ "$1" = 0 ]' in preun, preun
            ran = node.run(["/bin/sh", "-c", preun, "preun", "0"], env=env)
            if ran.returncode != 0:  # as rpm: the erase stops there
                return subprocess.CompletedProcess(args, ran.returncode, "", ran.stderr.decode())
            scriptlet = ran.stderr.decode()
    argv = ["rpm", "--root", str(node.root), "--dbpath", "/var/lib/rpm", *changes, *args]
    result = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **(env or {})})
    result.stderr = scriptlet + result.stderr
    return result


def test_rpm_install_upgrade_and_removal_into_a_root_without_libc(
    empty_root: Node, built: dict[str, Path], earlier: dict[str, Path]
) -> None:
    node, root = empty_root, empty_root.root
    assert rpm(node, "--initdb").returncode == 0
    result = rpm(node, "-i", str(earlier["rpm"]))
    assert result.returncode == 0, result.stderr
    assert install_links(node).returncode == 0
    assert state(node) == installed(EARLIER, linked=True)
    result = rpm(node, "-U", str(built["rpm"]))
    assert result.returncode == 0, result.stderr
    assert state(node) == installed(VERSION, linked=True)
    assert (
        rpm(node, "-q", "credprovider").stdout
        == f"credprovider-{VERSION}-1.{distpackages.RPM_ARCH[node.target.arch]}\n"
    )
    every_plugin_answers(node, PACKAGE_BIN_DIR)
    with kubelet_using_the_package(node):
        result = rpm(node, "-e", "credprovider")
        assert result.returncode != 0
        assert REFUSED in result.stderr, result.stderr
        assert state(node) == installed(VERSION, linked=True)
        result = rpm(node, "-e", "credprovider", env={FORCE: "1"})
    assert result.returncode == 0, result.stderr
    assert f"credprovider: removing anyway ({FORCE}=1): " in result.stderr
    assert (
        f"credprovider: removed {KUBELET_BIN_DIR}/ecr-credential-provider, a link to this "
        "package" in result.stderr
    )
    assert state(node) == REMOVED
    left = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if not p.is_dir())
    # besides busybox, rpm's database, the sandbox's mount points (dev/null ...) and the node's
    # lock install took (in /run, a tmpfs on a node; a directory here)
    # the operator's config stays, with the record of the install that wrote it (for undo)
    assert [p for p in left if not p.startswith(("bin/", "var/lib/rpm/", "dev/", "run/"))] == [
        "etc/kubernetes/.credprovider-ecr.yaml.credprovider-undo",
        "etc/kubernetes/credprovider-ecr.yaml",
        OPERATOR_CONFIG.lstrip("/"),
    ]

"""release/host-tools.sh: what make installs from Debian before it builds, or the one line saying why
it cannot. The script runs as it is; dpkg-query and apt-get are stand-ins on its PATH that answer
from a list and record what they were asked (nothing is installed on this machine)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from release import bundle

SCRIPT = bundle.REPO / "release" / "host-tools.sh"
FAKE_DPKG_QUERY = """#!/bin/sh
# dpkg-query -W -f='${Status}' NAME: installed when NAME is in $INSTALLED_LIST
name=$(eval echo \\${$#})
grep -qx "$name" "$INSTALLED_LIST" || { echo "dpkg-query: no packages found matching $name" >&2; exit 1; }
printf 'install ok installed'
"""
FAKE_APT_GET = """#!/bin/sh
echo "apt-get $*" >> "$APT_LOG"
"""


def profile(name: str) -> list[str]:
    """A profile's package list, as the script spells it."""
    text = SCRIPT.read_text()
    lists = {
        key: re.search(rf"^{key}=\(([^)]*)\)", text, re.M).group(1).split()  # type: ignore[union-attr]
        for key in ("build", "release", "test")
    }
    order = ["build", "release", "test"]
    return [p for key in order[: order.index(name) + 1] for p in lists[key]]


@pytest.fixture
def fake_bin() -> Iterator[Path]:
    """A PATH holding only the stand-ins and the few real tools the script uses (in a directory
    another user can read: one test runs the script as nobody)."""
    place = Path(tempfile.mkdtemp(prefix="host-tools-", dir="/tmp"))
    place.chmod(0o755)
    bin_dir = place / "bin"
    bin_dir.mkdir()
    for name, text in (("dpkg-query", FAKE_DPKG_QUERY), ("apt-get", FAKE_APT_GET)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    for tool in ("id", "grep", "sh"):
        real = shutil.which(tool)
        assert real is not None
        (bin_dir / tool).symlink_to(real)
    yield bin_dir
    shutil.rmtree(place)


def run(
    fake_bin: Path, installed: list[str], *args: str, as_user: int | None = None
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    listing = fake_bin.parent / "installed"
    listing.write_text("".join(f"{name}\n" for name in installed))
    log = fake_bin.parent / "apt.log"
    log.write_text("")
    log.chmod(0o666)
    prefix = []
    if as_user is not None:
        prefix = [
            shutil.which("setpriv") or "setpriv",
            f"--reuid={as_user}",
            f"--regid={as_user}",
            "--clear-groups",
        ]
    result = subprocess.run(
        [*prefix, "/bin/bash", str(SCRIPT), *args],
        env={"PATH": str(fake_bin), "INSTALLED_LIST": str(listing), "APT_LOG": str(log)},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=bundle.REPO,
    )
    return result, log.read_text().splitlines()


@pytest.mark.parametrize("name", ["build", "release", "test"])
def test_nothing_is_said_or_installed_when_everything_is_there(fake_bin: Path, name: str) -> None:
    result, apt = run(fake_bin, profile(name), name)
    assert (result.returncode, result.stdout, result.stderr, apt) == (0, "", "", [])


def test_each_profile_adds_to_the_one_before() -> None:
    build, release, test = profile("build"), profile("release"), profile("test")
    assert build == release[: len(build)] and release == test[: len(release)]
    assert {"debootstrap", "cmake", "python3-venv"} <= set(build)
    assert {"qemu-user-static", "rpm"} <= set(release) - set(build)
    assert "iproute2" in set(test) - set(release)


def test_as_root_it_installs_exactly_what_is_missing(fake_bin: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    have = [p for p in profile("test") if p not in ("cmake", "rpm")]
    result, apt = run(fake_bin, have, "test")
    assert result.returncode == 0, result.stderr
    assert result.stderr == "[host-tools] installing cmake rpm (apt-get; once per machine)\n"
    assert apt == ["apt-get update -qq", "apt-get install -y -qq --no-install-recommends cmake rpm"]


def test_the_demo_needs_no_qemu_and_no_rpm(fake_bin: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    result, apt = run(fake_bin, profile("build"), "build")
    assert (result.returncode, apt) == (0, [])
    result, apt = run(fake_bin, profile("build"), "release")
    assert apt[-1] == (
        "apt-get install -y -qq --no-install-recommends qemu-user-static rpm gpgv gnupg createrepo-c"
    )


def test_not_root_is_one_line_and_nothing_installed(fake_bin: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    result, apt = run(fake_bin, [], "build", as_user=65534)
    missing = " ".join(profile("build"))
    assert result.returncode == 1 and apt == []
    assert result.stderr == (
        f"release/host-tools.sh: missing Debian packages {missing}; run make as root (the build "
        f"also needs root for its namespaces), or first: sudo apt-get install {missing}\n"
    )


def test_without_apt_it_is_one_line(fake_bin: Path) -> None:
    (fake_bin / "apt-get").unlink()
    result, _apt = run(fake_bin, ["cmake"], "build")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        "release/host-tools.sh: this machine has no apt-get; install the equivalents of "
        "Debian's debootstrap debian-archive-keyring binutils patch python3-venv"
    )


def test_usage(fake_bin: Path) -> None:
    result, apt = run(fake_bin, [], "demo")
    assert (result.returncode, result.stderr, apt) == (
        2,
        "usage: release/host-tools.sh build|release|test\n",
        [],
    )


def test_make_and_ci_use_it() -> None:
    """make runs it before each kind of build; .ci/run installs nothing itself, make test does."""
    makefile = (bundle.REPO / "Makefile").read_text()
    for kind in ("build", "release", "test"):
        assert f"release/host-tools.sh {kind}" in makefile or kind == "build", kind
    assert "release/host-tools.sh build" in makefile
    assert "$(if $(filter $*,$(HOST_ARCH)),build,release)" in makefile
    ci = (bundle.REPO / ".ci" / "run").read_text()
    assert "apt-get" not in ci and "make test" in ci

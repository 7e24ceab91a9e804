"""Nodes for the release tests: a root filesystem in a sandbox (release/chroot.py: private user and
mount namespaces, arm64 through qemu-user and a private binfmt_misc), and the demo's requests to ask
an installed plugin. The emulators run in the test process; the chroot shares its loopback network.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from demo import SCENARIO_SOURCES, Scenario
from emulators.kubelet_exec import request_bytes
from release import chroot, debs
from release.targets import Target

TMP = tempfile.gettempdir()


@dataclass
class Node:
    target: Target
    root: Path
    # The overlay's upper layer, kept between runs (what is installed stays); None: no overlay,
    # the root itself is written (a root filesystem the test made).
    upper: Path | None = None

    def run(
        self, argv: list[str], stdin: bytes = b"", env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        spec = chroot.spec_for(
            self.target,
            self.root,
            argv,
            env=chroot.env_with_path(env),
            overlay=self.upper is not None,
            upper=str(self.upper or ""),
            binds=[chroot.Bind(TMP, TMP, read_only=True)],
        )
        return chroot.run(spec, stdin=stdin, timeout=600)

    def path(self, inside: str) -> Path:
        """Where a path inside the node lies on the host (its upper layer, if it has one)."""
        base = self.upper / "upper" if self.upper is not None else self.root
        return base / inside.lstrip("/")


@contextmanager
def demo_scenarios() -> Iterator[list[Scenario]]:
    """Every scenario of make demo, with its emulators running."""
    with ExitStack() as stack:
        found: list[Scenario] = []
        for source in SCENARIO_SOURCES.values():
            found += stack.enter_context(source())
        yield found


def scenario_request(scenario: Scenario) -> bytes:
    return request_bytes(scenario.image, token=scenario.token, annotations=scenario.annotations)


def assert_answers(
    result: subprocess.CompletedProcess[bytes], scenario: Scenario
) -> dict[str, object]:
    """One CredentialProviderResponse with a username and password for every entry."""
    assert result.returncode == 0, f"{scenario.title}: {result.stderr.decode()[-2000:]}"
    response = json.loads(result.stdout)
    assert response["kind"] == "CredentialProviderResponse", scenario.title
    assert response["auth"], scenario.title
    for entry in response["auth"].values():
        assert entry["username"] and entry["password"], scenario.title
    return dict(response)


def every_plugin_answers(node: Node, bin_dir: str) -> int:
    """Every demo scenario, asked of the plugins in ``bin_dir`` inside ``node``; how many."""
    with demo_scenarios() as found:
        assert len(found) >= 8
        for scenario in found:
            result = node.run(
                [f"{bin_dir}/{scenario.plugin}", *scenario.args],
                scenario_request(scenario),
                scenario.env,
            )
            assert_answers(result, scenario)
        return len(found)


@contextmanager
def staged(file: Path) -> Iterator[str]:
    """``file``, copied where every node sees it (the /tmp bind): its path there."""
    with tempfile.TemporaryDirectory(dir=TMP) as staging:
        copy = Path(staging) / file.name
        shutil.copyfile(file, copy)
        yield str(copy)


def host_mounts() -> list[str]:
    """This machine's mount table, without the per-mount ids that change on remount."""
    return sorted(
        " ".join(line.split()[3:]) for line in Path("/proc/self/mountinfo").read_text().splitlines()
    )


def binfmt_untouched() -> bool:
    return not Path("/proc/sys/fs/binfmt_misc/credprovider-qemu").exists()


@contextmanager
def host_unchanged(node: Node) -> Iterator[Node]:
    """``node``, skipped where the sandbox cannot run; after the test, the host's mounts and
    binfmt_misc are as they were."""
    why = chroot.supported()
    if why:
        import pytest

        pytest.skip(f"sandbox: {why}")
    mounts_before = host_mounts()
    yield node
    assert host_mounts() == mounts_before
    assert binfmt_untouched()


def busybox(target: Target) -> Path:
    """Debian's static busybox for ``target`` (fetched by make test: tests never download)."""
    return debs.unpacked("busybox-static", target, fetch=False) / "bin" / "busybox"


def busybox_root(target: Target, root: Path, applets: tuple[str, ...] = ("sh",)) -> Path:
    """A root filesystem holding nothing but busybox in /bin, with ``applets`` linked to it."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "busybox").write_bytes(busybox(target).read_bytes())
    (root / "bin" / "busybox").chmod(0o755)
    for applet in applets:
        (root / "bin" / applet).symlink_to("busybox")
    return root

"""The crash-point suites run the tool forked from a server that has it imported
(tests/forkrun.py). A forked run must be the run ``run_cli`` makes: the same status, stdout and
stderr; a kill point reported as a killed run; nothing of one run (its environment, its kill-point
count) left for the next; its own pid namespace and ``/run``, as ``unshare`` gives."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from credprovider.tool.change.failpoint import FAILPOINT_ENV
from emulators.http import FakeResponse, serve
from tests.forkrun import Server, run_cli_forked
from tests.helpers import run_cli
from tests.integration.cli.conftest import fake_bundle
from tests.unit.tool.test_agent_apply import kubeadm, tree


@pytest.fixture(scope="module")
def healthz() -> Iterator[str]:
    with serve(lambda request: FakeResponse.text("ok")) as kubelet:
        yield f"{kubelet.url}/healthz"


def test_a_forked_run_is_the_run_a_new_interpreter_makes(tmp_path: Path) -> None:
    root = kubeadm(tmp_path / "node")
    for argv in (
        ("--version",),
        ("no-such-command",),
        ("agent", "plan", "--root", root, "--providers", "aws"),
        ("doctor", "--root", root, "--offline", "--json"),
        ("agent", "uninstall", "--root", str(tmp_path / "missing")),
    ):
        fresh, forked = run_cli(*argv), run_cli_forked(*argv)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            fresh.returncode,
            fresh.stdout,
            fresh.stderr,
        ), argv


def test_a_forked_change_leaves_the_node_a_new_interpreter_leaves(
    tmp_path: Path, healthz: str
) -> None:
    first = kubeadm(tmp_path / "first")
    second = str(tmp_path / "second")
    shutil.copytree(first, second, symlinks=True)
    bundle = str(fake_bundle(tmp_path / "bundle", "0.1.0").parent)
    common = ["--bundle", bundle, "--providers", "aws", "--restart-command", "true {unit}",
              "--healthz", healthz, "--health-timeout", "5"]  # fmt: skip
    done = run_cli("agent", "apply", "--root", first, *common)
    again = run_cli_forked("agent", "apply", "--root", second, *common)
    assert done.returncode == 0, done.stderr
    assert (again.returncode, again.stdout) == (done.returncode, done.stdout)
    assert tree(first) == tree(second)


def test_each_run_starts_afresh_and_a_kill_point_kills_it(tmp_path: Path, healthz: str) -> None:
    root = kubeadm(tmp_path / "node")
    bundle = str(fake_bundle(tmp_path / "bundle", "0.1.0").parent)
    apply = ("agent", "apply", "--root", root, "--bundle", bundle, "--providers", "aws",
             "--restart-command", "true {unit}", "--healthz", healthz, "--health-timeout", "5")  # fmt: skip
    for _ in range(2):  # the kill-point count is the run's own: point 1 again is the first call
        killed = run_cli_forked(*apply, env={FAILPOINT_ENV: "1"})
        assert killed.returncode in (-9, 137) and killed.stdout == "", killed
    assert FAILPOINT_ENV not in os.environ  # nothing of a run's environment reaches the next
    finished = run_cli_forked(*apply)
    assert finished.returncode == 0, finished.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")
def test_a_forked_run_has_its_own_pid_namespace_and_run() -> None:
    """As under ``unshare --pid --fork --mount-proc`` with a tmpfs on ``/run``: the run is pid 1
    of a namespace that holds nothing else, and its ``/run`` is its own."""
    status, out, _ = Server.run([], dict(os.environ), 60, probe=True)
    seen = json.loads(out)
    assert status == 0
    assert (seen["pid"], seen["pids"]) == (1, [1])
    assert seen["run"] == ["tmpfs"]

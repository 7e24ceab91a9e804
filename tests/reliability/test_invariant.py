"""The invariant of issue #46, as a table: no command leaves a node whose kubelet would not start,
and none reports success when it did. Each row is a command run the way an operator's node walks
into it (a hand edit before uninstall, a restart that fails, a kubelet that does not come back
after uninstall, a directory given as --config-out, migrate on a node without the plugins); after
it, either the kubelet's verdict over the node (``doctor --root``, which checks the flags, config
and bin dir the kubelet will read as the kubelet checks them) is that it would start, or the
command exited non-zero having changed nothing. Package removal while the kubelet runs the
package's plugins is the same row in tests/release/test_packages.py (dpkg and rpm)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from emulators.http import FakeResponse, serve
from tests.helpers import run_cli
from tests.integration.cli.conftest import fake_bundle
from tests.unit.tool.test_agent_apply import kubeadm, tree

FLAGS = "etc/default/kubelet"


class Kubelet:
    """/healthz: healthy until told otherwise."""

    def __init__(self) -> None:
        self.healthy = True

    def answer(self, request: object) -> FakeResponse:
        return FakeResponse.text(
            "ok" if self.healthy else "down", status=200 if self.healthy else 500
        )


@pytest.fixture
def kubelet() -> Iterator[tuple[Kubelet, str]]:
    stand_in = Kubelet()
    with serve(stand_in.answer) as server:
        yield stand_in, f"{server.url}/healthz"


@dataclass
class Case:
    node: str
    tmp: Path
    healthz: str
    kubelet: Kubelet

    def agent(self, action: str, *more: str, restart: str = "true {unit}") -> tuple[int, str]:
        bundle = [] if action == "uninstall" else [
            "--bundle", str(fake_bundle(self.tmp / f"bundle-{action}", "0.1.0").parent),
            "--providers", "aws",
        ]  # fmt: skip
        done = run_cli(
            "agent", action, "--root", self.node, *bundle, "--restart-command", restart,
            "--healthz", self.healthz, "--health-timeout", "2", *more,
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, done.stdout + done.stderr


def would_start(root: str) -> str:
    """The kubelet's verdict over the node under ``root``: '' if it would start, else why not."""
    done = run_cli("doctor", "--root", root, "--offline", "--json")
    found = json.loads(done.stdout)
    said = [c["message"] for c in found["checks"] if "would not start" in c["message"].lower()]
    return "; ".join(said)


def hand_edit_then_uninstall(case: Case) -> tuple[int, str]:
    assert case.agent("apply")[0] == 0
    flags = Path(case.node, FLAGS)
    flags.write_text(flags.read_text().replace("--v=2", "--v=2 --max-pods=200"))
    done = case.agent("uninstall")
    assert "--max-pods=200" in flags.read_text()  # the operator's edit kept
    assert "image-credential-provider" not in flags.read_text()  # the agent's flags gone
    return done


def restart_fails(case: Case) -> tuple[int, str]:
    return case.agent("apply", restart="/bin/false {unit}")


def uninstall_kubelet_does_not_come_back(case: Case) -> tuple[int, str]:
    assert case.agent("apply")[0] == 0
    case.kubelet.healthy = False
    return case.agent("uninstall")


def config_out_is_a_directory(case: Case) -> tuple[int, str]:
    out = Path(case.node, "etc/kubernetes/cpd")
    done = run_cli(
        "install", "--providers", "aws", "--bin-dir", f"{case.node}/opt/bin",
        "--config-out", str(out), "--force",
        "--target", str(fake_bundle(case.tmp / "target", "0.2.0")),
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def migrate_without_plugins(case: Case) -> tuple[int, str]:
    flags = Path(case.node, IN_TREE_FLAGS)
    done = run_cli(
        "migrate", "--kubelet-flags-file", str(flags), "--bin-dir", f"{case.node}/opt/empty",
        "--config-out", f"{case.node}/etc/kubernetes/config.yaml", "--write",
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def undo_of_the_config_the_flags_name(case: Case) -> tuple[int, str]:
    """#63: an operator's first install (a copy, in the kubelet's own bin dir) whose config the
    kubelet's flags already name; undoing it would remove that config: refused, nothing changed
    (run as on the node itself, so that the paths it writes and reads are the node's)."""
    import os

    from tests.reliability.test_crash_points_by_hand import as_the_host

    if os.geteuid() != 0:
        pytest.skip("the node's /etc mounted over this one's needs root")
    root = Path(case.node)
    config, bin_dir = "/etc/kubernetes/by-hand.yaml", "/etc/kubernetes/by-hand-bin"
    Path(root, FLAGS).write_text(
        f'KUBELET_EXTRA_ARGS="--v=2 --image-credential-provider-config={config} '
        f'--image-credential-provider-bin-dir={bin_dir}"\n'
    )
    target = fake_bundle(case.tmp / "by-hand", "0.2.0")
    installed = as_the_host(root, ["install", "--providers", "aws", "--copy", "--bin-dir",
                                   bin_dir, "--config-out", config, "--target", str(target)])  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    after_install = tree(case.node)
    done = as_the_host(root, ["undo", "--config", config])
    assert tree(case.node) == after_install  # refused: nothing changed
    assert f"--image-credential-provider-config={config}, which the undo removes" in done.stderr
    return done.returncode, done.stdout + done.stderr


# The in-tree cloud flag migrate is given, in a flags file of its own: on the kubelet's own flags
# the agent would refuse the node (agent/plan.py), and its rows would prove nothing.
IN_TREE_FLAGS = "etc/kubernetes/old-kubelet-flags.env"


def prepare(node: str) -> None:
    """What the rows find there besides kubeadm's files: a directory where one names a config,
    a flags file with an in-tree cloud flag, an empty bin dir."""
    Path(node, "etc/kubernetes/cpd").mkdir(parents=True)
    Path(node, IN_TREE_FLAGS).write_text(
        'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 --cloud-provider=aws"\n'
    )
    Path(node, "opt/empty").mkdir(parents=True)


ROWS: dict[str, tuple[Callable[[Case], tuple[int, str]], int]] = {
    # name: (what happens, the exit status the command must give)
    "agent uninstall over a hand-edited flags file": (hand_edit_then_uninstall, 0),
    "agent apply whose kubelet restart fails": (restart_fails, 1),
    "agent uninstall with a kubelet that does not come back": (
        uninstall_kubelet_does_not_come_back,
        1,
    ),
    "install --force with a directory as --config-out": (config_out_is_a_directory, 1),
    "migrate --write on a node without the plugins": (migrate_without_plugins, 1),
    "undo of an install whose config the kubelet's flags name": (
        undo_of_the_config_the_flags_name,
        1,
    ),
}


@pytest.mark.parametrize("row", list(ROWS))
def test_no_command_leaves_a_kubelet_that_would_not_start(
    tmp_path: Path, kubelet: tuple[Kubelet, str], row: str
) -> None:
    stand_in, healthz = kubelet
    case = Case(kubeadm(tmp_path), tmp_path, healthz, stand_in)
    prepare(case.node)
    before = tree(case.node)
    run, status = ROWS[row]
    code, said = run(case)
    assert code == status, said
    verdict = would_start(case.node)
    assert verdict == "", f"{row}: {verdict}"
    if code != 0 and row.startswith(("install", "migrate")):
        assert tree(case.node) == before, row  # refused: nothing changed
    if code != 0 and row.startswith("agent"):
        assert "rolled back" in said, said  # said, and undone

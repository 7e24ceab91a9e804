"""One lock per node (issue #46, ``credprovider/tool/change/lock.py``): ``credprovider install``,
``migrate --write`` and the agent serialize on it; the second run waits, says so, and reads the
node as the first left it.

The runs here are the real commands in a mount namespace of their own whose ``/run`` is a fresh
tmpfs (tests/helpers.py ``private``); the node under ``--root`` has that ``/run`` bind-mounted as
its own, as the chart mounts the host's ``/run/credprovider`` into the agent's ``/host``."""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from credprovider.paths import LOCK_PATH
from credprovider.tool.change.lock import NodeBusy, node_lock
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.root import NodeRoot
from emulators.http import FakeResponse, serve
from tests.helpers import REPO, node_script
from tests.integration.cli.conftest import fake_bundle
from tests.reliability.test_crash_points import Node
from tests.unit.tool.test_agent_apply import tree

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")
TOOL = f"{shlex.quote(sys.executable)} -m credprovider credprovider"


@pytest.fixture(scope="module")
def healthz() -> Iterator[str]:
    with serve(lambda request: FakeResponse.text("ok")) as kubelet:
        yield f"{kubelet.url}/healthz"


def together(node: Node, tmp: Path, first: str, second: str) -> dict[str, str]:
    """``first`` started, then ``second`` once ``first`` holds the node's lock, both in one
    namespace whose ``/run`` is the node's: each one's exit code, stdout and stderr."""
    out = tmp / "out"
    out.mkdir()
    script = f"""
mkdir -p {node.root}/run && mount --bind /run {node.root}/run
{first} >{out}/first.out 2>{out}/first.err &
pid=$!
until grep -qs credprovider {LOCK_PATH}; do sleep 0.05; done
{second} >{out}/second.out 2>{out}/second.err
echo $? >{out}/second.rc
wait $pid
echo $? >{out}/first.rc
"""
    done = node_script(script)
    assert done.returncode == 0, done.stderr
    return {path.name: path.read_text() for path in out.iterdir()}


def test_an_agent_apply_and_an_install_by_hand_take_turns(tmp_path: Path, healthz: str) -> None:
    node = Node(tmp_path, healthz, "node")
    original = tree(node.root)
    # the restart takes 2 s and says when it ended: the agent holds the lock through it and its
    # health check
    restarted = tmp_path / "restarted"
    agent = (
        f"{TOOL} agent apply --bundle {node.bundle} --providers aws --root {node.root} "
        f"--restart-command \"sh -c 'sleep 2; date +%s.%N >{restarted}' {{unit}}\" "
        f"--healthz {healthz} --health-timeout 5"
    )
    by_hand = (
        f"{TOOL} install --providers aws --bin-dir {node.root}/opt/by-hand/bin "
        f"--config-out {node.root}/etc/kubernetes/by-hand.yaml "
        f"--target {fake_bundle(tmp_path / 'target', '0.2.0')}"
    )
    said = together(node, tmp_path, agent, by_hand)
    assert (said["first.rc"], said["second.rc"]) == ("0\n", "0\n"), said
    assert said["first.out"].startswith("installed"), said
    waiting, waited = said["second.err"].splitlines()[:2]
    assert waiting.startswith("waiting for another change on this node to end (pid ")
    assert waiting.endswith(": credprovider agent apply)")
    assert waited.startswith("waited ") and "s for another change on this node" in waited
    # it changed nothing until the agent's restart was over (the order, not a duration: a busy
    # machine may take most of the 2 s to start the install)
    written = Path(node.root) / "etc/kubernetes/by-hand.yaml"
    assert written.stat().st_mtime >= float(restarted.read_text()), waited
    # the agent's own change is whole: uninstall takes it off, the install's files stay
    assert node.uninstall() == 0
    after = tree(node.root)
    by_hand = {p for p in after if p.startswith(("/opt", "/etc/kubernetes/by-hand.yaml"))}
    by_hand.add("/etc/kubernetes/.by-hand.yaml.credprovider-undo")  # its record, for undo
    by_hand |= {"/etc/kubernetes"} - set(original)  # the install's file is in it
    assert {p: v for p, v in after.items() if p not in by_hand} == original


def test_two_agents_at_once_the_second_finds_the_change_made(tmp_path: Path, healthz: str) -> None:
    node = Node(tmp_path, healthz, "node")
    original = tree(node.root)
    apply = (
        f"{TOOL} agent apply --bundle {node.bundle} --providers aws --root {node.root} "
        f"--restart-command \"sh -c 'sleep 1' {{unit}}\" --healthz {healthz} --health-timeout 5"
    )
    said = together(node, tmp_path, apply, apply)
    assert (said["first.rc"], said["second.rc"]) == ("0\n", "0\n"), said
    assert said["first.out"].startswith("installed")
    assert said["second.out"].startswith("unchanged"), said  # it read the node the first left
    assert "waited" in said["second.err"]
    assert node.uninstall() == 0
    assert tree(node.root) == original


# --- the lock itself ---------------------------------------------------------------------------


def held(root: Path) -> int:
    """The node's lock taken by another open file (as another process would)."""
    path = root / LOCK_PATH.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    os.write(descriptor, b"pid 4242: credprovider install\n")
    return descriptor


def test_a_run_that_waits_too_long_changes_nothing_and_says_who_held_it(tmp_path: Path) -> None:
    descriptor = held(tmp_path)
    lines: list[str] = []
    entered = False
    try:
        with (
            pytest.raises(NodeBusy) as raised,
            node_lock(NodeRoot.at(tmp_path), wait=0.5, say=lines.append),
        ):
            entered = True
    finally:
        os.close(descriptor)
    assert not entered
    assert lines == [
        "waiting for another change on this node to end (pid 4242: credprovider install)"
    ]
    assert "held /run/credprovider/node.lock for more than 0s: nothing was changed" in str(
        raised.value
    )
    with node_lock(NodeRoot.at(tmp_path), "credprovider agent apply", say=lines.append):  # released
        text = (tmp_path / LOCK_PATH.lstrip("/")).read_text()
        assert text == f"pid {os.getpid()}: credprovider agent apply\n"
    assert len(lines) == 1


def test_a_planted_lock_is_refused(tmp_path: Path) -> None:
    lock = tmp_path / LOCK_PATH.lstrip("/")
    lock.parent.mkdir(parents=True)
    lock.symlink_to(tmp_path / "elsewhere")
    with (
        pytest.raises(NodeChangeError, match="is a symbolic link"),
        node_lock(NodeRoot.at(tmp_path)),
    ):
        pass
    assert not (tmp_path / "elsewhere").exists()
    lock.unlink()
    lock.write_text("")
    os.chown(lock, 65534, 65534)
    with (
        pytest.raises(NodeChangeError, match="not a regular file of uid 0"),
        node_lock(NodeRoot.at(tmp_path)),
    ):
        pass


def test_a_user_who_cannot_make_the_lock_goes_on_without_it(tmp_path: Path) -> None:
    """Not root: the lock guards root's files, which this user cannot change anyway."""
    os.chmod(tmp_path, 0o755)
    program = (
        "from credprovider.tool.change.lock import node_lock\n"
        "from credprovider.tool.node.root import NodeRoot\n"
        f"with node_lock(NodeRoot.at({str(tmp_path)!r})):\n    print('in')\n"
    )
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
         program],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, "in\n", "")
    assert not (tmp_path / "run").exists()

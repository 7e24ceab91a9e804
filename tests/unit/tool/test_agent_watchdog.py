"""The node's own rollback (``credprovider/tool/agent/watchdog.py``), over the stand-in systemd's
private socket (D-Bus as systemd speaks it), with the agent's real apply and state. The whole
path, the bundle's agent killed in its health wait, is tests/reliability/test_commit_confirmed.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from credprovider.paths import AGENT_EXEC_HOME
from credprovider.tool.agent.apply import apply, load_state
from credprovider.tool.agent.plan import plan_node
from credprovider.tool.agent.state import STATE, AgentState, Armed, Healed, save
from credprovider.tool.agent.watchdog import Watchdog, rollback
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.root import NodeRoot
from emulators.systemd import StandInSystemd, standin_systemd
from tests.platformnodes import gke
from tests.unit.tool.test_agent_apply import Service, bundle, kubeadm, run, tree

FLAGS = "/etc/default/kubelet"


@pytest.fixture
def systemd(tmp_path: Path) -> StandInSystemd:
    with standin_systemd(tmp_path / "private", lambda unit: "done") as server:
        yield server  # type: ignore[misc]


def test_armed_before_the_restart_and_stopped_once_healthy(
    tmp_path: Path, systemd: StandInSystemd
) -> None:
    root = kubeadm(tmp_path)
    service = Service()
    seen: list[object] = []

    def restart(unit: str) -> None:  # what the state says while the kubelet restarts
        seen.append(load_state(NodeRoot.at(root)).watchdog)
        service.restart(unit)

    watch = Watchdog(str(tmp_path / "private"), 65.0)
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    done = apply(
        NodeRoot.at(root), plan, bundle(tmp_path, "0.1.0"), "0.1.0", restart, service.healthy, watch
    )
    assert done.result == "installed" and done.notes == []
    [(unit, argv)] = systemd.started
    assert seen == [Armed(unit, seen[0].at)]  # type: ignore[attr-defined]
    assert argv == [
        "/var/lib/credprovider/agent/versions/0.1.0/credprovider", "agent", "rollback",
        "--root", "/", "--armed-as", unit, "--after", "65",
        "--systemd-socket", "/run/systemd/private",
    ]  # fmt: skip
    calls = [name for name, _ in systemd.calls if name != "Subscribe"]
    assert calls == ["StartTransientUnit", "StopUnit"]  # the restart between: seen above
    assert load_state(NodeRoot.at(root)).watchdog is None


def test_on_cos_the_armed_rollback_runs_the_bundle_from_the_exec_mount(
    tmp_path: Path, systemd: StandInSystemd
) -> None:
    """systemd runs the rollback on the host: from where the bundle is, on COS the exec mount
    (its /var is noexec: from the agent's home the unit would fail with EACCES)."""
    root = str(gke().build(tmp_path / "node"))
    service = Service()
    watch = Watchdog(str(tmp_path / "private"), 65.0)
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    done = apply(NodeRoot.at(root), plan, bundle(tmp_path, "0.1.0"), "0.1.0", service.restart, service.healthy,
                 watch)  # fmt: skip
    assert done.result == "installed", done.detail
    [(_, argv)] = systemd.started
    assert argv[0] == f"{AGENT_EXEC_HOME}/versions/0.1.0/credprovider"


def test_a_rollback_that_fires_for_a_confirmed_change_does_nothing(tmp_path: Path) -> None:
    root = kubeadm(tmp_path)
    service = Service()
    run(root, tmp_path, "0.1.0", service)
    before = tree(root)
    said = rollback(
        NodeRoot.at(root), "credprovider-rollback-0123456789ab.service", 0, service.restart
    )
    assert said.startswith("nothing to do")
    assert tree(root) == before and service.restarts == ["kubelet"]


def test_an_unconfirmed_change_is_put_back_and_the_kubelet_restarted(tmp_path: Path) -> None:
    root = kubeadm(tmp_path)
    original = (Path(root) / FLAGS.lstrip("/")).read_text()
    killed = Service()

    def die(unit: str) -> None:  # the agent is killed during the restart
        raise SystemExit("killed")

    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    with pytest.raises(SystemExit):
        apply(NodeRoot.at(root), plan, bundle(tmp_path, "0.1.0"), "0.1.0", die, killed.healthy)
    state = load_state(NodeRoot.at(root))
    assert (
        state.restart_due == "kubelet"
        and "--image-credential" in (Path(root) / FLAGS.lstrip("/")).read_text()
    )
    unit = "credprovider-rollback-0123456789ab.service"
    state.watchdog = Armed(unit, "2026-11-26T12:00:00Z")
    save(NodeRoot.at(root), state)
    # another unit's rollback is not this change's
    assert rollback(NodeRoot.at(root), unit.replace("0123", "9999"), 0, killed.restart).startswith(
        "nothing"
    )
    slept: list[float] = []
    said = rollback(NodeRoot.at(root), unit, 12, killed.restart, sleep=slept.append)
    assert slept == [12] and killed.restarts == ["kubelet"]
    assert said == (
        "the agent did not confirm the kubelet's restart: its config and flags were put back as "
        "the change found them and kubelet restarted"
    )
    assert (Path(root) / FLAGS.lstrip("/")).read_text() == original
    state = load_state(NodeRoot.at(root))
    assert (state.restart_due, state.before, state.watchdog) == ("", None, None)
    assert state.healed is not None
    assert state.healed.detail.startswith("its config and flags were put back")


def test_a_forged_unit_name_is_not_the_agents_state(tmp_path: Path) -> None:
    """A state naming kubelet.service as the rollback would have the agent stop the kubelet."""
    root = kubeadm(tmp_path)
    service = Service()
    run(root, tmp_path, "0.1.0", service)
    path = Path(root) / STATE.lstrip("/")
    state = json.loads(path.read_text())
    state["watchdog"] = {"unit": "kubelet.service", "armed": "now"}
    path.write_text(json.dumps(state))
    with pytest.raises(NodeChangeError, match="is not the agent's state"):
        load_state(NodeRoot.at(root))


def test_a_rollback_that_cannot_be_armed_is_said_and_the_restart_still_checked(
    tmp_path: Path,
) -> None:
    root = kubeadm(tmp_path)
    service = Service()
    watch = Watchdog(str(tmp_path / "nothing-here"), 65.0)
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    done = apply(NodeRoot.at(root), plan, bundle(tmp_path, "0.1.0"), "0.1.0", service.restart, service.healthy,
                 watch)  # fmt: skip
    assert done.result == "installed" and service.restarts == ["kubelet"]
    [note] = done.notes
    assert note.startswith("the node's own rollback could not be armed (starting ")
    assert load_state(NodeRoot.at(root)).watchdog is None


def test_an_uninstall_has_the_host_remove_the_directory_the_pods_mount_made(
    tmp_path: Path, systemd: StandInSystemd
) -> None:
    """The pod has /var/lib/credprovider mounted (the kubelet made it for the hostPath), so it
    cannot remove it: once the agent's home is gone, a transient service does, with rmdir,
    which leaves it if it holds anything (the packages' links file, say)."""
    from credprovider.tool.agent.uninstall import NOTHING_THERE, uninstall

    root = kubeadm(tmp_path)
    service = Service()
    watch = Watchdog(str(tmp_path / "private"), 65.0)
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    apply(
        NodeRoot.at(root),
        plan,
        bundle(tmp_path, "0.1.0"),
        "0.1.0",
        service.restart,
        service.healthy,
        watch,
    )
    done = uninstall(NodeRoot.at(root), "kubelet", service.restart, service.healthy, watch)
    assert done.result == "uninstalled" and done.notes == []
    tidy = [(unit, argv) for unit, argv in systemd.started if unit.startswith("credprovider-tidy-")]
    [(_, argv)] = tidy
    assert argv[:2] == ["/bin/sh", "-c"] and argv[3:] == [
        "credprovider-tidy",
        "/var/lib/credprovider",
    ]
    # with nothing of the agent's on the node (a pod of action=uninstall restarted), again
    again = uninstall(NodeRoot.at(root), "kubelet", service.restart, service.healthy, watch)
    assert (again.result, again.detail, again.changed) == ("uninstalled", NOTHING_THERE, [])
    assert sum(unit.startswith("credprovider-tidy-") for unit, _ in systemd.started) == 2
    # no systemd to ask: said, and the uninstall still done
    gone = Watchdog(str(tmp_path / "nothing-here"), 65.0)
    said = uninstall(NodeRoot.at(root), "kubelet", service.restart, service.healthy, gone)
    assert said.result == "uninstalled"
    assert [note.split(":")[0] for note in said.notes] == [
        "/var/lib/credprovider was left on the node"
    ]


def test_the_tidy_removes_what_is_empty_again_and_keeps_what_holds_anything(tmp_path: Path) -> None:
    """The tidy's own script, run as the host runs it: an empty directory made again (as a
    kubelet restart makes it for a pod still running) is removed again; one holding a file is
    kept and not waited for."""
    import subprocess
    import threading
    import time

    from credprovider.tool.agent.watchdog import TIDY_SCRIPT

    empty, kept = tmp_path / "empty", tmp_path / "kept"
    empty.mkdir()
    kept.mkdir()
    (kept / "package-links").write_text("")

    def make_again() -> None:  # the restarted kubelet's SetUp of the pod's hostPath
        time.sleep(4)
        empty.mkdir()

    again = threading.Thread(target=make_again)
    again.start()
    started = time.monotonic()
    subprocess.run(["sh", "-c", TIDY_SCRIPT, "tidy", str(empty), str(kept)], timeout=90, check=True)
    again.join()
    assert not empty.exists() and (kept / "package-links").exists()
    assert 27 <= time.monotonic() - started < 60  # it settled: gone (or kept) for 30 s


def test_the_state_records_the_rollback_typed_in_the_earlier_versions_json() -> None:
    """The armed rollback and what it did are typed (Armed, Healed) and written as every earlier
    version wrote them; one of another shape is not the agent's."""
    unit = "credprovider-rollback-0123456789ab.service"
    data = {
        "version": "0.1.0", "originals": {}, "written": {}, "made_dirs": [],
        "restart_due": "kubelet", "watchdog": {"unit": unit, "armed": "2026-11-26T12:00:00Z"},
        "healed": {"at": "2026-11-26T11:00:00Z", "detail": "its config and flags were put back"},
    }  # fmt: skip
    state = AgentState.parse(data)
    assert state is not None
    assert state.watchdog == Armed(unit, "2026-11-26T12:00:00Z")
    assert state.healed == Healed("2026-11-26T11:00:00Z", "its config and flags were put back")
    assert state.as_json() == data
    for key, forged in [("healed", {"at": 1}), ("healed", ["x"]), ("watchdog", {"unit": unit})]:
        assert AgentState.parse({**data, key: forged}) is None, (key, forged)

"""Restarting a unit over systemd's private socket (credprovider/tool/agent/systemd.py), against a
stand-in that speaks D-Bus as systemd does (emulators/systemd.py): the calls systemctl makes, the
job's result, systemd's errors, and peers that answer nothing, garbage or too much."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from credprovider.tool.agent.systemd import SystemdError, reachable, restart_unit
from emulators.systemd import NoSuchUnit, standin_systemd


def test_a_restart_is_subscribe_then_restart_unit_then_its_job_done(tmp_path: Path) -> None:
    restarted: list[str] = []
    path = tmp_path / "private"

    def restart(unit: str) -> str:
        restarted.append(unit)
        return "done"

    with standin_systemd(path, restart) as systemd:
        assert reachable(str(path))
        restart_unit("kubelet", str(path), timeout=5)
        assert restarted == ["kubelet"]
        assert systemd.calls == [("Subscribe", ()), ("RestartUnit", ("kubelet", "replace"))]


@pytest.mark.parametrize(
    ("outcome", "said"),
    [
        ("failed", "the job ended 'failed' (journalctl -u k3s-agent says why)"),
        ("timeout", "the job ended 'timeout' (journalctl -u k3s-agent says why)"),
        (None, "org.freedesktop.systemd1.NoSuchUnit: Unit k3s-agent not found."),
    ],
)
def test_a_restart_that_did_not_happen_says_why(
    tmp_path: Path, outcome: str | None, said: str
) -> None:
    path = tmp_path / "private"

    def restart(unit: str) -> str:
        if outcome is None:
            raise NoSuchUnit(unit)
        return outcome

    with standin_systemd(path, restart), pytest.raises(SystemdError) as raised:
        restart_unit("k3s-agent", str(path), timeout=5)
    assert str(raised.value) == f"restarting k3s-agent through {path}: {said}"
    # what a caller decides on is data, not the text (#63)
    assert raised.value.job_result == (outcome or "")
    assert raised.value.refused_as == ("" if outcome else "org.freedesktop.systemd1.NoSuchUnit")


def test_stopping_a_unit_that_is_gone_is_stopped_by_its_error_name(tmp_path: Path) -> None:
    """stop_unit takes systemd's NoSuchUnit, by its D-Bus error name, as stopped; any other
    refusal is raised, its data kept through the sentence it is given."""
    from credprovider.tool.agent.systemd import start_service, stop_unit

    path = tmp_path / "private"
    unit = "credprovider-rollback-0123456789ab.service"
    with standin_systemd(path, lambda unit: "done"):
        stop_unit(unit, str(path), timeout=5)  # never started: gone already
        start_service(unit, ["/bin/sleep", "30"], "a rollback", str(path), timeout=5)
        with pytest.raises(SystemdError) as raised:  # started twice: UnitExists
            start_service(unit, ["/bin/sleep", "30"], "a rollback", str(path), timeout=5)
        stop_unit(unit, str(path), timeout=5)
    assert raised.value.refused_as == "org.freedesktop.systemd1.UnitExists"
    assert str(raised.value).startswith(f"starting {unit} through {path}: ")


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[tuple[Path, list[bytes]]]:
    """A socket that takes the handshake, then sends what the test puts in the list."""
    path = tmp_path / "private"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    sends: list[bytes] = []

    def serve() -> None:
        try:
            peer, _ = server.accept()
        except OSError:
            return
        with peer:
            data = b""
            while b"BEGIN\r\n" not in data:
                chunk = peer.recv(4096)
                if not chunk:
                    return
                data += chunk
                if b"AUTH" in data and b"OK" not in data:
                    peer.sendall(b"OK " + b"0" * 32 + b"\r\n")
                    data += b"OK"
            try:
                for chunk in sends:
                    peer.sendall(chunk)
                while peer.recv(1 << 20):  # reads what it is sent, answers nothing more
                    pass
            except OSError:
                return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, sends
    server.close()


@pytest.mark.parametrize(
    ("sent", "said"),
    [
        ([], "no answer"),  # silent: the timeout ends it
        ([b"l\x01\x00\x01" + b"\xff" * 64], ""),  # not D-Bus
        ([b"x" * 65536] * 20, ""),  # endless
    ],
)
def test_a_peer_that_is_not_systemd_ends_in_one_error(
    hostile: tuple[Path, list[bytes]], sent: list[bytes], said: str
) -> None:
    path, sends = hostile
    sends.extend(sent)
    with pytest.raises(SystemdError) as raised:
        restart_unit("kubelet", str(path), timeout=2)
    assert str(raised.value).startswith(f"restarting kubelet through {path}: ")
    assert said in str(raised.value)


def test_nothing_listening_is_one_error(tmp_path: Path) -> None:
    assert not reachable(str(tmp_path / "missing"))
    with pytest.raises(SystemdError) as raised:
        restart_unit("kubelet", str(tmp_path / "missing"), timeout=2)
    assert str(raised.value).startswith(f"restarting kubelet through {tmp_path}/missing: ")


def test_systemd_says_which_units_it_has_loaded_from_its_whole_load_path(tmp_path: Path) -> None:
    """ListUnitsByNames, as ``systemctl list-units NAME...`` asks: a unit in any directory of the
    load path is loaded (RKE2's tarball puts its units in /usr/local/lib/systemd/system, which a
    pod under the chart's auto cannot see), a masked one or none at all is not."""
    from credprovider.tool.agent.restart import units_loaded
    from credprovider.tool.agent.systemd import loaded_units

    node = tmp_path / "node"
    (node / "usr/local/lib/systemd/system").mkdir(parents=True)
    (node / "usr/local/lib/systemd/system/rke2-agent.service").write_text("[Service]\n")
    (node / "etc/systemd/system").mkdir(parents=True)
    (node / "etc/systemd/system/k3s.service").symlink_to("/dev/null")  # masked
    path = tmp_path / "private"
    names = ("k3s.service", "rke2-agent.service", "kubelet.service")
    with standin_systemd(path, lambda unit: "done", root=node) as systemd:
        assert loaded_units(names, str(path), timeout=5) == {"rke2-agent.service"}
        assert systemd.calls == [("ListUnitsByNames", (list(names),))]
        assert units_loaded(str(path)) == {"rke2-agent.service"}
    assert units_loaded("") is None  # not asked: the unit files tell


@pytest.mark.parametrize(
    "sent",
    [
        [],  # silent: the timeout ends it
        [b"l\x01\x00\x01" + b"\xff" * 64],  # not D-Bus
        [b"x" * 65536] * 20,  # endless
    ],
)
def test_a_peer_asked_for_units_that_is_not_systemd_is_one_error(
    hostile: tuple[Path, list[bytes]], sent: list[bytes]
) -> None:
    from credprovider.tool.agent.systemd import loaded_units

    path, sends = hostile
    sends.extend(sent)
    with pytest.raises(SystemdError) as raised:
        loaded_units(("kubelet.service",), str(path), timeout=2)
    assert str(raised.value).startswith(f"asking systemd through {path} which units it has: ")


def test_an_answer_that_is_not_a_list_of_units_is_refused(tmp_path: Path) -> None:
    """systemd older than 227 has no ListUnitsByNames (UnknownMethod), and an answer of another
    shape is not read as units: either is one error, and the agent then reads the unit files."""
    from jeepney import new_method_return

    from credprovider.tool.agent.restart import units_loaded
    from credprovider.tool.agent.systemd import loaded_units

    path = tmp_path / "private"
    with standin_systemd(path, lambda unit: "done", root=tmp_path) as systemd:
        systemd.answers["ListUnitsByNames"] = lambda call: new_method_return(
            call, "as", (["kubelet.service"],)
        )
        with pytest.raises(SystemdError, match=r"which units it has: not a list of units$"):
            loaded_units(("kubelet.service",), str(path), timeout=5)
        del systemd.answers["ListUnitsByNames"]
        systemd.unknown |= {"ListUnitsByNames", "LoadUnit"}
        with pytest.raises(SystemdError) as raised:
            loaded_units(("kubelet.service",), str(path), timeout=5)
        assert raised.value.refused_as == "org.freedesktop.DBus.Error.UnknownMethod"
        assert units_loaded(str(path)) is None


def test_systemd_older_than_227_is_asked_unit_by_unit(tmp_path: Path) -> None:
    """Amazon Linux 2 and RHEL 7 run systemd 219, which has no ListUnitsByNames: each unit is
    loaded (LoadUnit) and its LoadState read, with the same answer."""
    from credprovider.tool.agent.systemd import loaded_units

    node = tmp_path / "node"
    (node / "etc/systemd/system").mkdir(parents=True)
    (node / "etc/systemd/system/k3s-agent.service").write_text("[Service]\n")
    (node / "etc/systemd/system/k3s.service").symlink_to("/dev/null")  # masked
    path = tmp_path / "private"
    names = ("k3s.service", "k3s-agent.service", "kubelet.service")
    with standin_systemd(path, lambda unit: "done", root=node) as systemd:
        systemd.unknown.add("ListUnitsByNames")
        assert loaded_units(names, str(path), timeout=5) == {"k3s-agent.service"}
        assert [call for call, _ in systemd.calls].count("LoadUnit") == 3

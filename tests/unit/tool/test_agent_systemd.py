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

"""A stand-in for systemd's private socket (``/run/systemd/private``): the D-Bus handshake
(``AUTH EXTERNAL``, ``BEGIN``), then the manager's ``Subscribe`` and ``RestartUnit(unit, mode)``
answered as systemd answers them (a job path, then a ``JobRemoved`` signal with the job's result).
``restart(unit)`` does the restart and returns the job's result (``done``, ``failed``) or raises
:class:`NoSuchUnit`. ``ListUnitsByNames`` loads each unit as systemd does, from the first file of
its name on the unit load path (systemd.unit(5)) under ``root`` (a link to /dev/null: masked), or
a transient service still running; any other is ``not-found`` (so is every one without a
``root``); ``LoadUnit`` and its object's ``LoadState`` property say the same, as systemd older
than 227 is asked (``unknown`` holds the methods it lacks). ``StartTransientUnit`` of a service
records it, and with ``run_services`` (a test whose "/" is its node's) runs its ``ExecStart`` as a
process (its output appended to ``journal``, as the node's journal keeps a unit's) until it ends
or ``StopUnit`` stops it; a unit that has ended is gone (``CollectMode=inactive-or-failed``).
Messages are read and written with jeepney, the library the agent uses, so the wire format is the
D-Bus specification's, not ours.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from jeepney import DBusAddress, Message, MessageType, new_error, new_method_return, new_signal
from jeepney.low_level import HeaderFields, Parser

MANAGER = "org.freedesktop.systemd1.Manager"
# systemd.unit(5): the system unit load path, highest priority first (Debian's /lib last)
LOAD_PATH = (
    "etc/systemd/system",
    "run/systemd/system",
    "usr/local/lib/systemd/system",
    "usr/lib/systemd/system",
    "lib/systemd/system",
)


class NoSuchUnit(Exception):
    """The unit does not exist (systemd's org.freedesktop.systemd1.NoSuchUnit)."""


class _Recorded:
    """A transient service started but not run (``run_services`` off): live until stopped."""

    pid = 0

    def poll(self) -> int | None:
        return None

    def wait(self, timeout: float | None = None) -> int:
        return 0


class StandInSystemd:
    def __init__(
        self,
        path: Path,
        restart: Callable[[str], str],
        journal: Path | None = None,
        run_services: bool = False,
        root: Path | None = None,
    ) -> None:
        self.path = path
        self.root = root
        self.restart = restart
        self.journal = journal
        # a service's command names the host's paths (/bin/rmdir /var/lib/credprovider): run only
        # where "/" is the test's node (a mount namespace whose /var/lib and /etc are its own)
        self.run_services = run_services
        self.services: dict[str, subprocess.Popen[bytes] | _Recorded] = {}
        self.started: list[tuple[str, list[str]]] = []
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        # a test's own answer to a method, and the methods an older systemd has not
        self.answers: dict[str, Callable[[Message], Message]] = {}
        self.unknown: set[str] = set()
        self.objects: dict[str, str] = {}  # a loaded unit's object path: its name
        self.jobs = 0
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(str(path))
        os.chmod(path, 0o777)
        self.server.listen(8)
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                peer, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(peer,), daemon=True).start()

    def _handshake(self, peer: socket.socket) -> bytes:
        data = b""
        while b"BEGIN\r\n" not in data:
            chunk = peer.recv(4096)
            if not chunk:
                raise ConnectionError("closed during the handshake")
            data += chunk
            if data.lstrip(b"\0").startswith(b"AUTH") and b"\r\n" in data and b"OK" not in data:
                peer.sendall(b"OK " + b"0" * 32 + b"\r\n")
                data += b"OK"  # answered once
            if b"NEGOTIATE_UNIX_FD\r\n" in data and b"AGREE" not in data:
                peer.sendall(b"AGREE_UNIX_FD\r\n")
                data += b"AGREE"
        return data.split(b"BEGIN\r\n", 1)[1]

    def _serve(self, peer: socket.socket) -> None:
        with peer:
            try:
                rest = self._handshake(peer)
            except OSError:
                return
            parser = Parser()
            parser.add_data(rest)
            serial = 1000
            while True:
                message = parser.get_next_message()
                if message is None:
                    chunk = peer.recv(65536)
                    if not chunk:
                        return
                    parser.add_data(chunk)
                    continue
                if message.header.message_type != MessageType.method_call:
                    continue
                member = message.header.fields.get(HeaderFields.member)
                self.calls.append((member, tuple(message.body)))
                manager = DBusAddress(
                    "/org/freedesktop/systemd1",
                    bus_name="org.freedesktop.systemd1",
                    interface=MANAGER,
                )
                outgoing = []
                if member in self.answers and member not in self.unknown:
                    outgoing.append(self.answers[member](message))
                elif member == "Subscribe":
                    outgoing.append(new_method_return(message))
                elif member == "RestartUnit":
                    unit = message.body[0]
                    try:
                        result = self.restart(unit)
                    except NoSuchUnit:
                        outgoing.append(
                            new_error(message, "org.freedesktop.systemd1.NoSuchUnit", "s",
                                      (f"Unit {unit} not found.",))
                        )  # fmt: skip
                    else:
                        outgoing += self._job(message, manager, unit, result)
                elif member == "ListUnitsByNames" and member not in self.unknown:
                    rows = [self._unit_row(name) for name in message.body[0]]
                    outgoing.append(new_method_return(message, "a(ssssssouso)", (rows,)))
                elif member == "LoadUnit" and member not in self.unknown:  # a stub: not-found
                    path = self._unit_row(message.body[0])[6]
                    self.objects[str(path)] = message.body[0]
                    outgoing.append(new_method_return(message, "o", (path,)))
                elif member == "Get" and message.body[1] == "LoadState":
                    unit = self.objects[message.header.fields[HeaderFields.path]]
                    state = ("s", self._load_state(unit))
                    outgoing.append(new_method_return(message, "v", (state,)))
                elif member in ("StartTransientUnit", "StopUnit"):
                    unit = message.body[0]
                    try:
                        if member == "StartTransientUnit":
                            self._start(unit, dict(message.body[2]))
                        else:
                            self._stop(unit)
                    except NoSuchUnit:
                        outgoing.append(
                            new_error(message, "org.freedesktop.systemd1.NoSuchUnit", "s",
                                      (f"Unit {unit} not loaded.",))
                        )  # fmt: skip
                    except FileExistsError:
                        outgoing.append(
                            new_error(message, "org.freedesktop.systemd1.UnitExists", "s",
                                      (f"Unit {unit} was already loaded or has a fragment "
                                       "file.",))
                        )  # fmt: skip
                    else:
                        outgoing += self._job(message, manager, unit, "done")
                else:
                    outgoing.append(
                        new_error(message, "org.freedesktop.DBus.Error.UnknownMethod", "s",
                                  (f"Unknown method {member}.",))
                    )  # fmt: skip
                for answer in outgoing:
                    serial += 1
                    peer.sendall(answer.serialise(serial=serial))

    def _job(self, call: Message, manager: DBusAddress, unit: str, result: str) -> list[Message]:
        """A queued job's path as the call's answer, then its JobRemoved signal."""
        self.jobs += 1
        job = f"/org/freedesktop/systemd1/job/{self.jobs}"
        return [
            new_method_return(call, "o", (job,)),
            new_signal(manager, "JobRemoved", "uoss", (self.jobs, job, unit, result)),
        ]

    def _load_state(self, unit: str) -> str:
        if self._live(unit):
            return "loaded"
        root = self.root
        for path in [root / directory / unit for directory in LOAD_PATH] if root else []:
            if os.path.lexists(path):
                masked = path.is_symlink() and os.readlink(path) == os.devnull
                return "masked" if masked else "loaded"
        return "not-found"

    def _unit_row(self, unit: str) -> tuple[object, ...]:
        """ListUnitsByNames' row: name, description, load, active and sub state, followed, the
        unit's object, and its job (none)."""
        state = self._load_state(unit)
        active = ("active", "running") if state == "loaded" else ("inactive", "dead")
        escaped = "".join(c if c.isalnum() else f"_{ord(c):02x}" for c in unit)
        return (
            unit, unit, state, *active, "",
            f"/org/freedesktop/systemd1/unit/{escaped}", 0, "", "/",
        )  # fmt: skip

    def _live(self, unit: str) -> bool:
        found = self.services.get(unit)
        if found is not None and found.poll() is not None:
            del self.services[unit]  # ended: collected
            return False
        return found is not None

    def _start(self, unit: str, properties: dict[str, tuple[str, object]]) -> None:
        if self._live(unit):
            raise FileExistsError(unit)
        signature, value = properties["ExecStart"]
        assert signature == "a(sasb)", signature
        [(path, argv, _ignore_failure)] = value  # type: ignore[misc]
        self.started.append((unit, list(argv)))
        if not self.run_services:
            self.services[unit] = _Recorded()
            return
        with (self.journal or Path(os.devnull)).open("ab") as log:
            log.write(f"{unit}: started {' '.join(argv)}\n".encode())
            log.flush()
            try:
                self.services[unit] = subprocess.Popen(
                    [path, *argv[1:]], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            except OSError as exc:  # as systemd: the start job is done, the unit then fails
                log.write(f"{unit}: Failed to execute {path}: {exc.strerror}\n".encode())

    def _stop(self, unit: str) -> None:
        if not self._live(unit):
            raise NoSuchUnit(unit)
        process = self.services.pop(unit)
        if isinstance(process, _Recorded):
            return
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)

    def live(self) -> list[str]:
        """The transient services still running."""
        return [unit for unit in list(self.services) if self._live(unit)]

    def wait_services(self, timeout: float) -> None:
        """Until every transient service has ended."""
        for process in list(self.services.values()):
            process.wait(timeout=timeout)

    def close(self) -> None:
        self.stopped = True
        self.server.close()
        for process in self.services.values():
            if not isinstance(process, _Recorded) and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@contextmanager
def standin_systemd(
    path: Path,
    restart: Callable[[str], str],
    journal: Path | None = None,
    run_services: bool = False,
    root: Path | None = None,
) -> Iterator[StandInSystemd]:
    server = StandInSystemd(path, restart, journal, run_services, root)
    try:
        yield server
    finally:
        server.close()

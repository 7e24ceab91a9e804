"""A stand-in for systemd's private socket (``/run/systemd/private``): the D-Bus handshake
(``AUTH EXTERNAL``, ``BEGIN``), then the manager's ``Subscribe`` and ``RestartUnit(unit, mode)``
answered as systemd answers them (a job path, then a ``JobRemoved`` signal with the job's result).
``restart(unit)`` does the restart and returns the job's result (``done``, ``failed``) or raises
:class:`NoSuchUnit`. Messages are read and written with jeepney, the library the agent uses, so the
wire format is the D-Bus specification's, not ours.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from jeepney import DBusAddress, MessageType, new_error, new_method_return, new_signal
from jeepney.low_level import HeaderFields, Parser

MANAGER = "org.freedesktop.systemd1.Manager"


class NoSuchUnit(Exception):
    """The unit does not exist (systemd's org.freedesktop.systemd1.NoSuchUnit)."""


class StandInSystemd:
    def __init__(self, path: Path, restart: Callable[[str], str]) -> None:
        self.path = path
        self.restart = restart
        self.calls: list[tuple[str, tuple[object, ...]]] = []
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
                if member == "Subscribe":
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
                        self.jobs += 1
                        job = f"/org/freedesktop/systemd1/job/{self.jobs}"
                        outgoing.append(new_method_return(message, "o", (job,)))
                        outgoing.append(
                            new_signal(
                                manager, "JobRemoved", "uoss", (self.jobs, job, unit, result)
                            )
                        )
                else:
                    outgoing.append(
                        new_error(message, "org.freedesktop.DBus.Error.UnknownMethod", "s",
                                  (f"Unknown method {member}.",))
                    )  # fmt: skip
                for answer in outgoing:
                    serial += 1
                    peer.sendall(answer.serialise(serial=serial))

    def close(self) -> None:
        self.stopped = True
        self.server.close()


@contextmanager
def standin_systemd(path: Path, restart: Callable[[str], str]) -> Iterator[StandInSystemd]:
    server = StandInSystemd(path, restart)
    try:
        yield server
    finally:
        server.close()

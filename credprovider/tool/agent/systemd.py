"""Restarting a systemd unit the way ``systemctl restart`` does, without systemctl: over systemd's
private socket (``/run/systemd/private``, which answers root only), speaking D-Bus through jeepney.

The agent's pod mounts the host's ``/run/systemd`` and needs neither hostPID nor a capability (its
image has no nsenter and no systemctl). As systemctl does, it subscribes to the manager's signals,
queues a ``RestartUnit(unit, "replace")`` job, and waits for that job's ``JobRemoved`` signal: the
unit has restarted when its result is ``done``.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from credprovider.tool.errors import NodeChangeError

if TYPE_CHECKING:
    from jeepney import Message

PRIVATE_SOCKET: Final = "/run/systemd/private"
MANAGER: Final = "org.freedesktop.systemd1.Manager"
# What systemd may send before the job ends; more is not a restart's.
MAX_BYTES: Final = 1 << 20


NO_SUCH_UNIT: Final = "org.freedesktop.systemd1.NoSuchUnit"
UNKNOWN_METHOD: Final = "org.freedesktop.DBus.Error.UnknownMethod"


class SystemdError(NodeChangeError):
    """systemd could not be reached, refused the restart, or the restart failed. What a caller
    decides on is data, never the text: ``refused_as`` (the D-Bus error systemd answered with)
    and ``job_result`` (how the job ended, when it ended otherwise than ``done``)."""

    def __init__(self, message: str, refused_as: str = "", job_result: str = "") -> None:
        super().__init__(message)
        self.refused_as, self.job_result = refused_as, job_result

    def said(self, what: str) -> SystemdError:
        """The same error, its sentence headed by ``what`` was being done."""
        text = str(self) if str(self).startswith(what) else f"{what}: {self}"
        return SystemdError(text, self.refused_as, self.job_result)


class _Connection:
    """One authenticated peer-to-peer D-Bus connection (no bus: no Hello)."""

    def __init__(self, path: str, deadline: float) -> None:
        from jeepney.io.blocking import prep_socket
        from jeepney.low_level import Parser

        self.deadline = deadline
        self.sock = prep_socket(path, timeout=max(deadline - time.monotonic(), 0.1))
        self.parser = Parser()
        self.serial = 0
        self.read = 0

    def send(self, message: Message) -> int:
        self.serial += 1
        self.sock.settimeout(max(self.deadline - time.monotonic(), 0.1))
        self.sock.sendall(message.serialise(serial=self.serial))
        return self.serial

    def receive(self) -> Message:
        while True:
            try:
                found = self.parser.get_next_message()
            except (KeyError, IndexError, TypeError, ValueError, struct.error) as exc:
                raise ConnectionError(
                    f"not a D-Bus message ({type(exc).__name__}: {exc})"
                ) from None
            if found is not None:
                return found
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer")
            self.sock.settimeout(left)
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("systemd closed the connection")
            self.read += len(data)
            if self.read > MAX_BYTES:
                raise ConnectionError(f"more than {MAX_BYTES} bytes without an answer")
            self.parser.add_data(data)

    def call(self, message: Message, signals: list[Message]) -> Message:
        """The reply to ``message``; signals that arrive first are kept in ``signals``."""
        from jeepney import MessageType
        from jeepney.low_level import HeaderFields

        serial = self.send(message)
        while True:
            answer = self.receive()
            kind = answer.header.message_type
            if kind == MessageType.signal:
                signals.append(answer)
                continue
            if answer.header.fields.get(HeaderFields.reply_serial) != serial:
                continue
            if kind == MessageType.error:
                name = answer.header.fields.get(HeaderFields.error_name, "an error")
                said = answer.body[0] if answer.body and isinstance(answer.body[0], str) else ""
                raise SystemdError(f"{name}: {said}".rstrip(": "), refused_as=str(name))
            return answer


def _manager() -> Any:
    from jeepney import DBusAddress

    return DBusAddress(
        "/org/freedesktop/systemd1", bus_name="org.freedesktop.systemd1", interface=MANAGER
    )


@contextmanager
def _talking(what: str, socket_path: str, timeout: float) -> Iterator[_Connection]:
    """A connection to systemd for ``what``, closed after; whatever fails on it is one
    :class:`SystemdError` headed by ``what``."""
    from jeepney.auth import AuthenticationError

    try:
        connection = _Connection(socket_path, time.monotonic() + timeout)
    except (OSError, AuthenticationError) as exc:
        raise SystemdError(f"{what}: {exc}") from exc
    try:
        yield connection
    except SystemdError as exc:
        raise exc.said(what) from None
    except TimeoutError:
        raise SystemdError(f"{what}: no answer within {timeout:.0f}s") from None
    except (OSError, ValueError) as exc:  # ValueError: jeepney's parser on a malformed message
        raise SystemdError(f"{what}: {exc}") from exc
    finally:
        connection.sock.close()


def _job(
    what: str, method: str, signature: str, body: tuple[Any, ...], socket_path: str, timeout: float
) -> None:
    """Call the manager's ``method`` (one that queues a job) and wait for that job to end
    ``done``, as systemctl does; :class:`SystemdError` (``what`` failed) otherwise."""
    from jeepney import MessageType, new_method_call
    from jeepney.low_level import HeaderFields

    with _talking(what, socket_path, timeout) as connection:
        signals: list[Message] = []
        connection.call(new_method_call(_manager(), "Subscribe"), signals)
        reply = connection.call(new_method_call(_manager(), method, signature, body), signals)
        job = reply.body[0] if reply.body else ""
        while True:
            for signal in signals:
                found = signal.body
                if (
                    signal.header.fields.get(HeaderFields.member) == "JobRemoved"
                    and len(found) == 4
                    and found[1] == job
                ):
                    if found[3] != "done":
                        raise SystemdError(
                            f"{what}: the job ended {found[3]!r}", job_result=str(found[3])
                        )
                    return
            signals.clear()
            answer = connection.receive()
            if answer.header.message_type == MessageType.signal:
                signals.append(answer)


def restart_unit(unit: str, socket_path: str = PRIVATE_SOCKET, timeout: float = 120.0) -> None:
    """``systemctl restart unit``: returns once the job is done, else :class:`SystemdError`."""
    try:
        _job(
            f"restarting {unit} through {socket_path}",
            "RestartUnit", "ss", (unit, "replace"), socket_path, timeout,
        )  # fmt: skip
    except SystemdError as exc:
        if not exc.job_result:
            raise
        raise SystemdError(
            f"{exc} (journalctl -u {unit} says why)", job_result=exc.job_result
        ) from None


def start_service(
    unit: str,
    argv: list[str],
    description: str,
    socket_path: str = PRIVATE_SOCKET,
    timeout: float = 30.0,
) -> None:
    """A transient service ``unit`` running ``argv`` (``systemd-run --unit``): started now, gone
    once it ends; its output goes to the node's journal."""
    properties = [
        ("Description", ("s", description)),
        ("ExecStart", ("a(sasb)", [(argv[0], argv, False)])),
        # gone once it has ended, even if it failed (its journal stays)
        ("CollectMode", ("s", "inactive-or-failed")),
    ]
    _job(
        f"starting {unit} through {socket_path}",
        "StartTransientUnit", "ssa(sv)a(sa(sv))", (unit, "fail", properties, []),
        socket_path, timeout,
    )  # fmt: skip


def stop_unit(unit: str, socket_path: str = PRIVATE_SOCKET, timeout: float = 30.0) -> None:
    """``systemctl stop unit``; a unit that is gone already is stopped."""
    try:
        _job(
            f"stopping {unit} through {socket_path}",
            "StopUnit", "ss", (unit, "replace"), socket_path, timeout,
        )  # fmt: skip
    except SystemdError as exc:
        if exc.refused_as != NO_SUCH_UNIT:
            raise


def loaded_units(
    names: tuple[str, ...], socket_path: str = PRIVATE_SOCKET, timeout: float = 10.0
) -> frozenset[str]:
    """Which of the units ``names`` systemd has loaded (``ListUnitsByNames``, as ``systemctl
    list-units NAME...`` asks: systemd loads each from its load path, or says ``not-found``):
    what a restart of one would find, whatever of its unit files the caller can see. systemd
    older than 227 (Amazon Linux 2, RHEL 7) has no such method: each unit is loaded and its
    ``LoadState`` read instead, as ``systemctl show -p LoadState`` does there.
    :class:`SystemdError` when systemd cannot be asked or answers otherwise."""
    from jeepney import new_method_call

    what = f"asking systemd through {socket_path} which units it has"
    with _talking(what, socket_path, timeout) as connection:
        call = new_method_call(_manager(), "ListUnitsByNames", "as", (list(names),))
        try:
            reply = connection.call(call, [])
        except SystemdError as exc:
            if exc.refused_as != UNKNOWN_METHOD:
                raise
            return frozenset(name for name in names if _load_state(connection, name) == "loaded")
        rows = reply.body[0] if reply.body and isinstance(reply.body[0], list) else None
        if rows is None or not all(isinstance(row, tuple) and len(row) == 10 for row in rows):
            raise SystemdError("not a list of units")
        return frozenset(row[0] for row in rows if row[0] in names and row[2] == "loaded")


def _load_state(connection: _Connection, name: str) -> str:
    """``LoadUnit(name)``, then its object's ``LoadState`` property."""
    from jeepney import DBusAddress, new_method_call

    reply = connection.call(new_method_call(_manager(), "LoadUnit", "s", (name,)), [])
    path = reply.body[0] if reply.body and isinstance(reply.body[0], str) else ""
    if not path.startswith("/org/freedesktop/systemd1/unit/"):
        raise SystemdError(f"not a unit's object: {path[:80]!r}")
    properties = DBusAddress(path, "org.freedesktop.systemd1", "org.freedesktop.DBus.Properties")
    get = new_method_call(properties, "Get", "ss", ("org.freedesktop.systemd1.Unit", "LoadState"))
    found = connection.call(get, []).body
    value = found[0] if found and isinstance(found[0], tuple) and len(found[0]) == 2 else None
    if value is None or not isinstance(value[1], str):
        raise SystemdError("not a unit's LoadState")
    return value[1]


def reachable(socket_path: str) -> bool:
    """Whether something listens at ``socket_path`` (checked before the first change)."""
    probe = socket.socket(socket.AF_UNIX)
    probe.settimeout(2)
    try:
        probe.connect(socket_path)
        return True
    except OSError:
        return False
    finally:
        probe.close()

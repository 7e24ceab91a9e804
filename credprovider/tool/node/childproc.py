"""Run a program the operator's config names, and never hang or fill memory doing it.

Used by the tool's checks (``validate``'s start check, ``get``'s exec of a plugin), never by a
plugin. The program is untrusted in the ways that matter here: it may write without end, never
read its stdin, never exit, or start a descendant that leaves its process group (``setsid``) and
keeps the pipes open. So the program runs in its own session (no controlling terminal; the whole
group is killed on time-out), its request is written as far as it reads it, each stream keeps at
most ``cap`` bytes (the rest is read and dropped), and the pipes are given up a moment after the
group is killed.

Not on the exec path.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Final

# How long a killed group's pipes are still read before they are closed: a descendant that left the
# group may hold them for ever.
DRAIN_SECONDS: Final = 2.0
_CHUNK: Final = 64 * 1024


@dataclass(frozen=True)
class Finished:
    """``code``: the exit status (negative: the signal), ``None`` when the time ran out and the
    group was killed. ``stdout_cut``/``stderr_cut``: more was written than was kept."""

    code: int | None
    stdout: bytes
    stderr: bytes
    stdout_cut: bool = False
    stderr_cut: bool = False

    @property
    def timed_out(self) -> bool:
        return self.code is None


def run_bounded(
    command: Sequence[str],
    env: Mapping[str, str],
    request: bytes,
    timeout: float,
    cap: int,
    executable: str | None = None,
) -> Finished:
    """Run ``command`` with ``request`` on its stdin (then closed); ``executable``: the file to
    run, when it is not ``command[0]`` (which is then only its argv[0]). Raises what ``Popen``
    raises when the program cannot be started (``OSError``; ``ValueError`` for a NUL in an
    argument)."""
    proc = subprocess.Popen(
        list(command),
        executable=executable,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    kept = {out_fd: bytearray(), err_fd: bytearray()}
    cut = {out_fd: False, err_fd: False}
    deadline = time.monotonic() + timeout
    killed = False
    with selectors.DefaultSelector() as selector:
        _start(selector, proc.stdin, request)
        pending = request
        for fd in kept:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        give_up = deadline
        while selector.get_map():
            left = give_up - time.monotonic()
            if left <= 0:
                if killed:
                    break  # a descendant outside the group holds the pipes: give them up
                _kill_group(proc.pid)
                killed = True
                give_up = time.monotonic() + DRAIN_SECONDS
                continue
            for key, _ in selector.select(left):
                if key.fileobj is proc.stdin:
                    pending = _feed(selector, proc.stdin, pending)
                    continue
                try:
                    chunk = os.read(key.fd, _CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                room = max(cap - len(kept[key.fd]), 0)
                kept[key.fd] += chunk[:room]
                cut[key.fd] = cut[key.fd] or len(chunk) > room
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            stream.close()
    if killed:
        _wait_killed(proc)
    return Finished(
        code=None if killed else _reap(proc, deadline),
        stdout=bytes(kept[out_fd]),
        stderr=bytes(kept[err_fd]),
        stdout_cut=cut[out_fd],
        stderr_cut=cut[err_fd],
    )


def _start(selector: selectors.BaseSelector, stdin: IO[bytes], request: bytes) -> None:
    """Watch stdin for room while there is request left; an empty request closes it at once."""
    if not request:
        with contextlib.suppress(OSError):
            stdin.close()
        return
    os.set_blocking(stdin.fileno(), False)
    selector.register(stdin, selectors.EVENT_WRITE)


def _feed(selector: selectors.BaseSelector, stdin: IO[bytes], pending: bytes) -> bytes:
    """Write what the pipe takes; close stdin when all is written or the reader has gone."""
    try:
        written = os.write(stdin.fileno(), pending[:_CHUNK])
    except BlockingIOError:
        return pending
    except OSError:  # EPIPE: the program closed its stdin, as a plugin that ignores it may
        written = len(pending)
    pending = pending[written:]
    if not pending:
        selector.unregister(stdin)
        with contextlib.suppress(OSError):
            stdin.close()
    return pending


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _reap(proc: subprocess.Popen[bytes], deadline: float) -> int | None:
    """The exit status, or ``None`` when the program closed its pipes but did not end by the
    deadline (its group is then killed)."""
    try:
        return proc.wait(timeout=max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        pass
    _kill_group(proc.pid)
    _wait_killed(proc)
    return None


def _wait_killed(proc: subprocess.Popen[bytes]) -> None:
    """Reap the killed program, so no zombie is left; one stuck in the kernel is not waited for."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=DRAIN_SECONDS)

"""Run a program that credprovider does not control, and never hang or fill memory doing it.

The one runner for every such program: a credential helper an SDK would run for a plugin (a
profile's ``credential_process``, a Workload Identity Federation executable: the SDKs run them with
no limit on the output and no time limit, or one past the plugin's deadline, and at the deadline
the helper was left running after the plugin exited), and the programs the tool runs from an
operator's config (``validate``'s start check, ``get``'s exec of a plugin, doctor's ``crictl`` and
``journalctl``).

The program is untrusted in the ways that matter here: it may write without end, never read its
stdin, never exit, or start a descendant that leaves its process group (``setsid``) and keeps the
pipes open. So it runs without a shell, in its own session (no controlling terminal; the whole
group is killed at the time-out), its request is written as far as it reads it, each stream keeps
at most ``cap`` bytes (the rest read and dropped, or, with ``stop_at_cap``, the group stopped at
once), and the pipes are given up ``drain`` seconds after the group is killed. Nothing of it is
left running that stayed in its group, and the leader is reaped after the group is signalled, so
its id cannot have been reused.

On the exec path only on a route whose SDK runs helpers (botocore, google-auth's executable source),
which has loaded subprocess, selectors and signal already: they are imported here lazily.
"""

from __future__ import annotations

import os
import time

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    import selectors
    import subprocess
    from collections.abc import Callable, Mapping, Sequence
    from typing import IO

# How long a killed group's pipes are still read before they are closed: a descendant that left the
# group may hold them for ever.
DRAIN_SECONDS: Final = 2.0
_CHUNK: Final = 64 * 1024
# A plugin's credential helper: its answer is a few KiB of JSON; it is stopped this long before
# the deadline, so that its line, not the deadline's, is printed; and its pipes are not waited on
# past the margin.
MAX_ANSWER_BYTES: Final = 1 << 20
MARGIN_SECONDS: Final = 0.5
HELPER_DRAIN_SECONDS: Final = 0.1


# The process groups :func:`run_bounded` started and has not yet reaped: what :func:`kill_running`
# stops when the tool itself is being ended (SIGTERM, SIGHUP: tool/cli.py).
_RUNNING: set[int] = set()


def kill_running() -> None:
    """Kill every program :func:`run_bounded` is running, with its group: a program in a session
    of its own outlives the process that started it otherwise."""
    for pid in list(_RUNNING):
        _kill_group(pid)


class ChildFailed(CredproviderError):
    """A plugin's helper gave no answer: ``said`` completes "the helper ..." ("cannot be run:
    ...")."""

    def __init__(self, said: str) -> None:
        super().__init__(said)
        self.said = said


class TooSlow(ChildFailed):
    """It had not finished when its time was up (stopped); ``by_deadline``: the plugin's deadline
    was the bound, not the helper's own time-out."""

    def __init__(self, said: str, by_deadline: bool) -> None:
        super().__init__(said)
        self.by_deadline = by_deadline


class Finished(NamedTuple):
    """``code``: the exit status (negative: the signal), ``None`` when the group was killed (the
    time ran out, or, with ``stop_at_cap``, a stream passed its cap). ``stdout_cut`` /
    ``stderr_cut``: more was written than was kept."""

    code: int | None
    stdout: bytes
    stderr: bytes
    stdout_cut: bool = False
    stderr_cut: bool = False

    @property
    def timed_out(self) -> bool:
        return self.code is None

    def complaint(self) -> str:
        """Its first non-blank line on stderr (stdout when merged), as one scrubbed line."""
        from credprovider.runtime.provider import one_line

        text = (self.stderr or self.stdout).decode("utf-8", "replace")
        first = next((line for line in text.splitlines() if line.strip()), "")
        return one_line(first) if first else ""


def run_bounded(
    command: Sequence[str],
    env: Mapping[str, str] | None,
    request: bytes,
    timeout: float,
    cap: int,
    executable: str | None = None,
    *,
    merge_stderr: bool = False,
    stop_at_cap: bool = False,
    drain: float = DRAIN_SECONDS,
    relay: Callable[[bytes], None] | None = None,
    cwd: str | None = None,
) -> Finished:
    """Run ``command`` with ``request`` on its stdin (then closed) within ``timeout`` seconds;
    ``env`` ``None``: this process's. ``executable``: the file to run, when it is not
    ``command[0]`` (then only its argv[0]). ``merge_stderr``: stderr into stdout, as one stream.
    ``cwd``: the directory it runs in (``None``: this process's).
    ``relay``: given what is kept of stderr as it arrives (a prompt a person must see while the
    program waits). Raises what ``Popen`` raises when the program cannot be started
    (``OSError``; ``ValueError`` for a NUL in an argument)."""
    import subprocess

    proc = subprocess.Popen(
        list(command),
        executable=executable,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        env=None if env is None else dict(env),
        start_new_session=True,
        cwd=cwd,
    )
    _RUNNING.add(proc.pid)
    try:
        return _exchange(proc, request, timeout, cap, stop_at_cap, drain, relay)
    finally:
        _RUNNING.discard(proc.pid)


def _exchange(
    proc: subprocess.Popen[bytes],
    request: bytes,
    timeout: float,
    cap: int,
    stop_at_cap: bool,
    drain: float,
    relay: Callable[[bytes], None] | None,
) -> Finished:
    """:func:`run_bounded`'s exchange with the program it started."""
    import selectors

    assert proc.stdin is not None and proc.stdout is not None
    streams = [proc.stdout] if proc.stderr is None else [proc.stdout, proc.stderr]
    fds = [stream.fileno() for stream in streams]
    kept = {fd: bytearray() for fd in fds}
    cut = dict.fromkeys(fds, False)
    deadline = time.monotonic() + max(timeout, 0.0)
    killed = False
    try:
        with selectors.DefaultSelector() as selector:
            _start(selector, proc.stdin, request)
            pending = request
            for fd in fds:
                os.set_blocking(fd, False)
                selector.register(fd, selectors.EVENT_READ)
            give_up = deadline
            while selector.get_map():
                left = give_up - time.monotonic()
                if left <= 0 or (stop_at_cap and any(cut.values()) and not killed):
                    if killed:
                        break  # a descendant outside the group holds the pipes: give them up
                    _kill_group(proc.pid)
                    killed = True
                    give_up = time.monotonic() + drain
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
                    if relay is not None and key.fd != fds[0] and chunk[:room]:
                        relay(chunk[:room])
                    cut[key.fd] = cut[key.fd] or len(chunk) > room
    except BaseException:
        # interrupted (Ctrl-C in the tool, a relay that raised): the program, in a session of its
        # own, gets no signal of the terminal's; it and its group must not outlive this
        _kill_group(proc.pid)
        _close_pipes(proc)
        _wait_killed(proc, drain)
        raise
    _close_pipes(proc)
    if killed:
        _wait_killed(proc, drain)
    return Finished(
        code=None if killed else _reap(proc, deadline, drain),
        stdout=bytes(kept[fds[0]]),
        stderr=bytes(kept[fds[1]]) if len(fds) > 1 else b"",
        stdout_cut=cut[fds[0]],
        stderr_cut=len(fds) > 1 and cut[fds[1]],
    )


def run_helper(
    argv: Sequence[str],
    time_left: float,
    *,
    limit: float | None = None,
    env: Mapping[str, str] | None = None,
    merge_stderr: bool = False,
) -> Finished:
    """A plugin's credential helper run to its end, stdin closed: stopped :data:`MARGIN_SECONDS`
    before the deadline (``time_left``: the fetch's time left), or at ``limit`` (the helper's own
    time-out) when that comes first, and at once past :data:`MAX_ANSWER_BYTES` on a stream.
    :class:`ChildFailed` if it cannot be run or writes past the cap, :class:`TooSlow` if it has
    not finished in time; else how it ended."""
    by_deadline = time_left - MARGIN_SECONDS
    seconds = by_deadline if limit is None else min(limit, by_deadline)
    if not argv or not argv[0]:
        raise ChildFailed("is empty")
    try:
        done = run_bounded(argv, env, b"", seconds, MAX_ANSWER_BYTES, merge_stderr=merge_stderr,
                           stop_at_cap=True, drain=HELPER_DRAIN_SECONDS)  # fmt: skip
    except (OSError, ValueError) as exc:
        from credprovider.runtime.nodefile import reason

        raise ChildFailed(f"cannot be run: {reason(exc)}") from None
    for where, over in (("stdout", done.stdout_cut), ("stderr", done.stderr_cut)):
        if over:
            raise ChildFailed(f"wrote more than {MAX_ANSWER_BYTES >> 10} KiB on {where}: stopped")
    if done.timed_out:
        raise TooSlow("did not answer in time: stopped", limit is None or by_deadline < limit)
    return done


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            _close(stream)


def _close(stream: IO[bytes]) -> None:
    import contextlib

    with contextlib.suppress(OSError):
        stream.close()


def _start(selector: selectors.BaseSelector, stdin: IO[bytes], request: bytes) -> None:
    """Watch stdin for room while there is request left; an empty request closes it at once."""
    import selectors

    if not request:
        _close(stdin)
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
        _close(stdin)
    return pending


def _kill_group(pid: int) -> None:
    import contextlib
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _reap(proc: subprocess.Popen[bytes], deadline: float, drain: float) -> int | None:
    """The exit status, or ``None`` when the program closed its pipes but did not end by the
    deadline (its group is then killed)."""
    import subprocess

    try:
        return proc.wait(timeout=max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        pass
    _kill_group(proc.pid)
    _wait_killed(proc, drain)
    return None


def _wait_killed(proc: subprocess.Popen[bytes], drain: float) -> None:
    """Reap the killed program, so no zombie is left; one stuck in the kernel is not waited for."""
    import contextlib
    import subprocess

    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=drain)

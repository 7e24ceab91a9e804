"""A helper program an SDK would run for a credential (a profile's ``credential_process``, a
Workload Identity Federation executable), run instead under the plugin's bounds.

The SDKs run them with ``Popen(...).communicate()`` or ``subprocess.run``: no limit on the output,
no time limit or one past the plugin's deadline, and at the deadline the helper was left running
after the plugin exited (one more process on the node at each pull). Here the helper runs without
a shell, in a session of its own, its stdin closed, and is stopped with its whole process group
when it outlasts its time or writes past a cap; after any fault nothing of it is left running.
"""

from __future__ import annotations

import os
import time

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping, Sequence

# A helper's answer is a few KiB of JSON; its complaints a few lines.
MAX_ANSWER_BYTES: Final = 1 << 20
MAX_STDERR_BYTES: Final = 64 << 10
# A helper is stopped this long before the deadline, so that its line, not the deadline's, is
# printed.
MARGIN_SECONDS: Final = 0.5


class ChildFailed(CredproviderError):
    """The helper gave no answer: ``said`` completes "the helper ..." ("cannot be run: ...")."""

    def __init__(self, said: str) -> None:
        super().__init__(said)
        self.said = said


class TooSlow(ChildFailed):
    """It had not finished when its time was up (stopped)."""


class Finished(NamedTuple):
    returncode: int
    stdout: bytes
    stderr: bytes  # empty when merged into stdout

    def complaint(self) -> str:
        """Its first non-blank line on stderr (stdout when merged), for a failure's line."""
        from credprovider.runtime.provider import one_line

        text = (self.stderr or self.stdout).decode("utf-8", "replace")
        first = next((line for line in text.splitlines() if line.strip()), "")
        return one_line(first) if first else ""


def run_bounded(
    argv: Sequence[str],
    seconds: float,
    *,
    env: Mapping[str, str] | None = None,
    merge_stderr: bool = False,
) -> Finished:
    """``argv`` run to its end within ``seconds``: :class:`ChildFailed` if it cannot be run or
    writes past a cap, :class:`TooSlow` if it has not finished in time. (subprocess, selectors
    and signal are imported only here: the SDKs that run helpers have loaded them already.)"""
    import subprocess

    if not argv or not argv[0]:
        raise ChildFailed("is empty")
    until = time.monotonic() + max(0.0, seconds)
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            env=None if env is None else dict(env),
            start_new_session=True,  # its own process group: stopped whole
        )
    except (OSError, ValueError) as exc:
        from credprovider.runtime.nodefile import reason

        raise ChildFailed(f"cannot be run: {reason(exc)}") from None
    finished = False
    try:
        out, err = _collect(process, until)
        code = process.wait(timeout=max(0.0, until - time.monotonic()))
        finished = True
    except subprocess.TimeoutExpired:
        raise TooSlow("did not answer in time: stopped") from None
    finally:
        _stop(process, whole_group=not finished)
    return Finished(code, out, err)


def _collect(process: subprocess.Popen[bytes], until: float) -> tuple[bytes, bytes]:
    """stdout and stderr until both close, by ``until`` and within the caps."""
    import selectors

    pipes = {pipe.fileno(): name for pipe, name in ((process.stdout, "stdout"),
             (process.stderr, "stderr")) if pipe is not None}  # fmt: skip
    caps = {"stdout": MAX_ANSWER_BYTES, "stderr": MAX_STDERR_BYTES}
    read: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
    sizes = dict.fromkeys(caps, 0)
    with selectors.DefaultSelector() as selector:
        for fd in pipes:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = until - time.monotonic()
            if left <= 0:
                raise TooSlow("did not answer in time: stopped")
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                where = pipes[key.fd]
                read[where].append(chunk)
                sizes[where] += len(chunk)
                if sizes[where] > caps[where]:
                    raise ChildFailed(
                        f"wrote more than {caps[where] >> 10} KiB on {where}: stopped"
                    )
    return b"".join(read["stdout"]), b"".join(read["stderr"])


def _stop(process: subprocess.Popen[bytes], whole_group: bool) -> None:
    """Its pipes closed; the helper stopped if it still runs and, after a fault, every process of
    its group (a child it left holding the pipes). The leader is reaped only after the group is
    signalled, so its id cannot have been reused."""
    import contextlib
    import signal

    if whole_group or process.poll() is None:
        with contextlib.suppress(OSError):  # the group may be gone already
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()

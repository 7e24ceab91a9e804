"""Kill and failure points for the crash tests: every call that changes a node goes through
:func:`reached` first (``durable``). With ``CREDPROVIDER_FAILPOINT=N`` in the environment the
process kills itself (SIGKILL, as an OOM kill, an eviction or a power cut ends it) at the Nth
such call; the tests arm 1, 2, ... until a run ends by itself, so a new write in the engine is a
new kill point with no new test. ``fail:N`` makes the Nth call fail instead (an ``OSError``, EIO,
as a full disk or an immutable file fails it: the run goes on to handle it), and ``fail-from:N``
that call and every one after it (so does whatever the run then does to handle it);
``interrupt:N`` sends the process SIGINT there, as an operator's Ctrl-C does. Unset, it costs a
dictionary lookup."""

from __future__ import annotations

import errno
import os
import signal
from typing import Final

FAILPOINT_ENV: Final = "CREDPROVIDER_FAILPOINT"
KILLED_STATUS: Final = 128 + signal.SIGKILL  # what a shell reports for a process SIGKILL ended
FAIL: Final = "fail:"
FAIL_FROM: Final = "fail-from:"
INTERRUPT: Final = "interrupt:"
_reached = 0


def reached(what: str) -> None:
    """One more node-changing call (``what``, for a debugger, its last word the path it changes);
    die here, or fail, if this is the armed one."""
    global _reached
    armed = os.environ.get(FAILPOINT_ENV, "")
    mode, _, number = armed.rpartition(":")
    if not (number.isascii() and number.isdigit() and len(number) <= 9):
        return
    _reached += 1
    armed_as = f"{mode}:" if mode else ""  # "" for a kill
    if not (_reached == int(number) or (armed_as == FAIL_FROM and _reached > int(number))):
        return
    if armed_as in (FAIL, FAIL_FROM):
        raise OSError(errno.EIO, os.strerror(errno.EIO), what.rpartition(" ")[2])
    if armed_as == INTERRUPT:
        signal.raise_signal(signal.SIGINT)
    elif not armed_as:
        os.kill(os.getpid(), signal.SIGKILL)
        os._exit(KILLED_STATUS)  # the first process of a pid namespace ignores its own SIGKILL

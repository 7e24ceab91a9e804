"""Kill points for the crash tests: every call that changes a node goes through
:func:`reached` first (``durable``). With ``CREDPROVIDER_FAILPOINT=N`` in the environment the
process kills itself (SIGKILL, as an OOM kill, an eviction or a power cut ends it) at the Nth
such call; the tests arm 1, 2, ... until a run ends by itself, so a new write in the engine is a
new kill point with no new test. Unset, it costs a dictionary lookup."""

from __future__ import annotations

import os
import signal
from typing import Final

FAILPOINT_ENV: Final = "CREDPROVIDER_FAILPOINT"
KILLED_STATUS: Final = 128 + signal.SIGKILL  # what a shell reports for a process SIGKILL ended
_reached = 0


def reached(what: str) -> None:
    """One more node-changing call (``what``, for a debugger); die here if this is the armed one."""
    global _reached
    armed = os.environ.get(FAILPOINT_ENV, "")
    if not (armed.isascii() and armed.isdigit() and len(armed) <= 9):
        return
    _reached += 1
    if _reached == int(armed):
        os.kill(os.getpid(), signal.SIGKILL)
        os._exit(KILLED_STATUS)  # the first process of a pid namespace ignores its own SIGKILL

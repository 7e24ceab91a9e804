"""The plugin's own deadline: counted from exec, shorter than the kubelet's fixed 60 s kill."""

from __future__ import annotations

import time

from credprovider.errors import UsageError
from credprovider.runtime import _os
from credprovider.runtime._typing import TYPE_CHECKING, Final
from credprovider.runtime.excerpt import clip
from credprovider.runtime.goformat import DurationError, parse_seconds

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

DEFAULT_DEADLINE_SECONDS: Final = 50.0


DEADLINE_ENV: Final = "CREDPROVIDER_DEADLINE"


KUBELET_TIMEOUT_SECONDS: Final = 60.0


# A longer --deadline is refused: it could only be a typo (and would overflow the thread join).
MAX_DEADLINE_SECONDS: Final = 3600.0


def seconds_since_exec() -> float:
    """How long this process has run (interpreter start-up included); 0 where it cannot be read.

    The kubelet's 60 s start at exec, so the plugin's deadline does too.
    """
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as handle:
            uptime = float(handle.read().split()[0])
        started = int(fields[19]) / _os.sysconf("SC_CLK_TCK")  # field 22: starttime, in clock ticks
        return max(0.0, min(uptime - started, 5.0))
    except (OSError, ValueError, IndexError):
        return 0.0


class Deadline:
    """The time the plugin has left; providers size their timeouts and retries with it."""

    def __init__(
        self,
        seconds: float,
        clock: Callable[[], float] = time.monotonic,
        already_spent: float = 0.0,
    ) -> None:
        self.seconds = seconds
        self._clock = clock
        self._end = clock() + seconds - already_spent
        self.phase = "starting"

    def remaining(self) -> float:
        return max(0.0, self._end - self._clock())

    def timeout(self, cap: float, floor: float = 0.05) -> float:
        """A per-call timeout: at most ``cap`` and never past the deadline."""
        return max(floor, min(cap, self.remaining()))


def configured_deadline(given: float | None, environ: Mapping[str, str]) -> float | None:
    """The deadline a plugin is given: ``--deadline``'s seconds (``given``), else
    ``CREDPROVIDER_DEADLINE``'s in ``environ`` (a bad one: :class:`UsageError`); ``None`` for
    neither, when the default applies."""
    if given is None and environ.get(DEADLINE_ENV):
        return parse_deadline(environ[DEADLINE_ENV], DEADLINE_ENV)
    return given


def parse_deadline(value: str, source: str) -> float:
    """A deadline as a Go duration (``30s``) or plain seconds (``30``); must be positive."""
    try:
        seconds = parse_seconds(value)
    except DurationError:
        raise UsageError(f"{source}: {value!r} is not a duration like 30s") from None
    if not 0 < seconds <= MAX_DEADLINE_SECONDS:
        raise UsageError(
            f"{source}: the deadline must be more than 0 and at most "
            f"{MAX_DEADLINE_SECONDS:.0f}s (the kubelet kills a plugin after "
            f"{KUBELET_TIMEOUT_SECONDS:.0f}s), got {clip(value, 40)!r}"
        )
    return seconds

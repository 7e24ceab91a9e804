"""Bounded retries with full-jitter exponential backoff that never sleep past the deadline.

Used for the HTTP calls the plugins make themselves; SDK calls use the SDK's own retry settings,
sized from the same deadline.
"""

from __future__ import annotations

import time

from credprovider.runtime._typing import TYPE_CHECKING, Final, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

    from credprovider.runtime.provider import Context

T = TypeVar("T")

DEFAULT_ATTEMPTS: Final = 3
BASE_DELAY_SECONDS: Final = 0.4
MAX_DELAY_SECONDS: Final = 4.0
RETRYABLE_STATUSES: Final = frozenset({408, 429, 500, 502, 503, 504})


def backoff_delay(attempt: int, rng: Callable[[], float] | None = None) -> float:
    """Full jitter: uniform in [0, min(MAX, BASE * 2**attempt)] for the ``attempt``-th retry."""
    if rng is None:
        import random  # only a retry needs it, and most execs never retry

        rng = random.random
    return rng() * min(MAX_DELAY_SECONDS, BASE_DELAY_SECONDS * (1 << attempt))


def call_with_retries(
    call: Callable[[], T],
    *,
    ctx: Context,
    what: str,
    retry_result: Callable[[T], bool] = lambda _: False,
    retry_error: Callable[[Exception], bool] = lambda _: True,
    attempts: int = DEFAULT_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``call`` up to ``attempts`` times; return the last result or raise the last error.

    A result for which ``retry_result`` is true, or an exception for which ``retry_error`` is true,
    is retried while attempts and deadline remain (keeping a second in reserve to report).
    """
    attempt = 0
    while True:
        try:
            result, error = call(), None
        except Exception as exc:  # noqa: BLE001 - classified by retry_error, re-raised below
            result, error = None, exc
        final = attempt + 1 >= attempts
        if error is not None:
            if final or not retry_error(error):
                raise error
            detail = " ".join(str(error).split())[:200]
            reason = f"{type(error).__name__} ({detail})" if detail else type(error).__name__
        else:
            if final or not retry_result(result):  # type: ignore[arg-type]
                return result  # type: ignore[return-value]
            reason = "a retryable answer"
        delay = backoff_delay(attempt)
        if ctx.deadline.remaining() - delay < 1.0:
            ctx.log.v(2, f"{what}: no time left to retry after {reason}")
            if error is not None:
                raise error
            return result  # type: ignore[return-value]
        ctx.log.v(2, f"{what}: attempt {attempt + 1} got {reason}; retrying in {delay:.2f}s")
        sleep(delay)
        attempt += 1

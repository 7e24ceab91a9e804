"""Retries that never sleep past the deadline: bounded for a failure, spread over the deadline
for throttling.

A failed call (refused, reset, a 5xx) is retried at most :data:`DEFAULT_ATTEMPTS` times in all,
with full-jitter exponential backoff. A call the service throttles (it said "slow down": HTTP
429, ECR's ``ThrottlingException``, a ``Retry-After``) is retried for as long as the deadline
allows: once soon (a blip), then after a random share of the time that is left
(:func:`throttled_delay`), never before the service's ``Retry-After``. In a scale-out storm, where
every new node asks at once and the service serves a few a second, the calls then spread over the
kubelet's minute instead of giving up in the first seconds, without multiplying them.

Used for the HTTP calls the plugins make themselves and around the SDK calls that throttle.
"""

from __future__ import annotations

import time

from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

    from credprovider.runtime.provider import Context

T = TypeVar("T")

DEFAULT_ATTEMPTS: Final = 3
BASE_DELAY_SECONDS: Final = 0.4
MAX_DELAY_SECONDS: Final = 4.0
RETRYABLE_STATUSES: Final = frozenset({408, 429, 500, 502, 503, 504})
# Kept to report, whatever a retry would need.
RESERVE_SECONDS: Final = 1.0
# Throttled: the first retry within this (a blip passes), each later one after this share of the
# time left (uniform between the two), so that a storm's calls spread to the deadline: simulated
# on a token bucket (tests/unit/runtime/test_retry.py), 200 execs at once against 4 calls a second
# with a burst of 40 are all answered, with about 3 calls each.
THROTTLED_FIRST_SECONDS: Final = 0.4
THROTTLED_SHARE: Final = (0.2, 0.4)
# No retry into less than this: the call itself needs time.
THROTTLED_MIN_WAIT: Final = 0.5
# What an error line adds when the service still throttled at the deadline.
THROTTLED_TO_THE_END: Final = (
    "still throttled when the plugin's time ran out, the kubelet retries on the next pull"
)


class Throttle(NamedTuple):
    """The service said "slow down"; ``retry_after``: the seconds it asked to wait, if it did."""

    retry_after: float | None = None


def retry_after_seconds(value: str) -> float | None:
    """A ``Retry-After`` header's delay in seconds (its delta-seconds form), or None."""
    text = value.strip()
    if not text or len(text) > 12:
        return None
    try:
        seconds = float(text)
    except ValueError:
        return None  # an HTTP-date: the schedule decides
    return seconds if seconds >= 0 and seconds == seconds else None


def throttle_of(status: int | None, retry_after: str | None) -> Throttle | None:
    """How a service says "slow down" over HTTP: a 429, or a 503 with ``Retry-After`` (its value,
    the header's text or ``None``); ``None`` for any other answer."""
    if status == 429 or (status == 503 and retry_after):
        return Throttle(retry_after_seconds(retry_after) if retry_after else None)
    return None


def throttled_delay(
    retry: int, remaining: float, rng: Callable[[], float], retry_after: float | None = None
) -> float | None:
    """How long to wait before the ``retry``-th retry (0: the first) of a throttled call with
    ``remaining`` seconds left; None: no time for one (or the service asks for more than there
    is)."""
    budget = remaining - RESERVE_SECONDS
    if budget < THROTTLED_MIN_WAIT:
        return None
    low, high = THROTTLED_SHARE
    delay = rng() * THROTTLED_FIRST_SECONDS if retry == 0 else budget * (low + (high - low) * rng())
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay if delay + THROTTLED_MIN_WAIT <= budget else None


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
    throttled_result: Callable[[T], Throttle | None] | None = None,
    throttled_error: Callable[[Exception], Throttle | None] | None = None,
    rng: Callable[[], float] | None = None,
) -> T:
    """Run ``call`` until it succeeds or may not be retried; return the last result or raise the
    last error.

    A result or exception that ``throttled_result`` / ``throttled_error`` calls throttling is
    retried as the module says, for as long as the deadline allows. Otherwise one for which
    ``retry_result`` / ``retry_error`` is true is retried while ``attempts`` and the deadline
    remain (keeping :data:`RESERVE_SECONDS` to report).
    """
    failures = throttles = 0
    waited = 0.0
    while True:
        try:
            result, error = call(), None
        except Exception as exc:  # noqa: BLE001 - classified below, re-raised when final
            result, error = None, exc
        if error is not None:
            throttle = throttled_error(error) if throttled_error is not None else None
        else:
            throttle = throttled_result(result) if throttled_result is not None else None  # type: ignore[arg-type]
        if throttle is not None:
            if rng is None:
                import random  # only a retry needs it, and most execs never retry

                draw = random.random
            else:
                draw = rng
            delay = throttled_delay(throttles, ctx.deadline.remaining(), draw, throttle.retry_after)
            asked = (
                "" if throttle.retry_after is None else f" (Retry-After {throttle.retry_after:g}s)"
            )
            if delay is None:
                ctx.log.v(
                    1,
                    f"{what}: throttled{asked} {throttles + 1} time(s) over {waited:.1f}s, "
                    "and no time is left to wait for the service",
                )
                if error is not None:
                    raise error
                return result  # type: ignore[return-value]
            ctx.log.v(2, f"{what}: throttled{asked}; retrying in {delay:.2f}s")
            throttles += 1
            waited += delay
            sleep(delay)
            continue
        final = failures + 1 >= attempts
        if error is not None:
            if final or not retry_error(error):
                raise error
            detail = " ".join(str(error).split())[:200]
            reason = f"{type(error).__name__} ({detail})" if detail else type(error).__name__
        else:
            if final or not retry_result(result):  # type: ignore[arg-type]
                if throttles:
                    ctx.log.v(1, f"{what}: throttled {throttles} time(s), waited {waited:.1f}s")
                return result  # type: ignore[return-value]
            reason = "a retryable answer"
        delay = backoff_delay(failures) if rng is None else backoff_delay(failures, rng)
        if ctx.deadline.remaining() - delay < RESERVE_SECONDS:
            ctx.log.v(2, f"{what}: no time left to retry after {reason}")
            if error is not None:
                raise error
            return result  # type: ignore[return-value]
        ctx.log.v(2, f"{what}: attempt {failures + 1} got {reason}; retrying in {delay:.2f}s")
        sleep(delay)
        failures += 1

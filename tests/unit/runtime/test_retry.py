from __future__ import annotations

import io

import pytest

from credprovider.runtime.deadline import Deadline
from credprovider.runtime.log import Logger
from credprovider.runtime.provider import Context
from credprovider.runtime.retry import (
    BASE_DELAY_SECONDS,
    MAX_DELAY_SECONDS,
    THROTTLED_FIRST_SECONDS,
    THROTTLED_SHARE,
    Throttle,
    backoff_delay,
    call_with_retries,
    retry_after_seconds,
    throttle_of,
    throttled_delay,
)


def make_ctx(seconds: float = 30.0) -> Context:
    return Context(deadline=Deadline(seconds), log=Logger("t", 2, io.StringIO()), environ={})


def test_backoff_is_full_jitter_and_capped() -> None:
    assert backoff_delay(0, rng=lambda: 1.0) == BASE_DELAY_SECONDS
    assert backoff_delay(2, rng=lambda: 1.0) == BASE_DELAY_SECONDS * 4
    assert backoff_delay(30, rng=lambda: 1.0) == MAX_DELAY_SECONDS
    assert backoff_delay(3, rng=lambda: 0.0) == 0.0


def test_retries_retryable_results_then_returns_the_last() -> None:
    answers = iter([503, 503, 503, 200])
    sleeps: list[float] = []
    result = call_with_retries(
        lambda: next(answers),
        ctx=make_ctx(),
        what="x",
        retry_result=lambda r: r == 503,
        sleep=sleeps.append,
    )
    assert result == 503 and len(sleeps) == 2


def test_stops_retrying_on_success() -> None:
    answers = iter([503, 200])
    result = call_with_retries(
        lambda: next(answers),
        ctx=make_ctx(),
        what="x",
        retry_result=lambda r: r == 503,
        sleep=lambda _: None,
    )
    assert result == 200


def test_non_retryable_errors_raise_at_once() -> None:
    calls = []

    def fail() -> int:
        calls.append(1)
        raise KeyError("no")

    with pytest.raises(KeyError):
        call_with_retries(
            fail, ctx=make_ctx(), what="x", retry_error=lambda e: False, sleep=lambda _: None
        )
    assert len(calls) == 1


def test_retryable_errors_are_retried_then_raised() -> None:
    calls = []

    def fail() -> int:
        calls.append(1)
        raise ConnectionError("refused")

    with pytest.raises(ConnectionError):
        call_with_retries(fail, ctx=make_ctx(), what="x", sleep=lambda _: None)
    assert len(calls) == 3


def test_no_retry_when_the_deadline_is_near() -> None:
    calls = []

    def fail() -> int:
        calls.append(1)
        raise ConnectionError("refused")

    with pytest.raises(ConnectionError):
        call_with_retries(fail, ctx=make_ctx(seconds=0.5), what="x", sleep=lambda _: None)
    assert len(calls) == 1


# --- throttling: the schedule as a table, then a storm on a simulated token bucket ----------------


@pytest.mark.parametrize(
    ("retry", "remaining", "draw", "retry_after", "delay"),
    [
        (0, 50.0, 1.0, None, THROTTLED_FIRST_SECONDS),  # a blip: once, soon
        (0, 50.0, 0.0, None, 0.0),
        (1, 50.0, 0.0, None, 49.0 * THROTTLED_SHARE[0]),  # then a share of what is left
        (1, 50.0, 1.0, None, 49.0 * THROTTLED_SHARE[1]),
        (5, 11.0, 0.5, None, 10.0 * sum(THROTTLED_SHARE) / 2),
        (1, 50.0, 0.0, 30.0, 30.0),  # never before the service's Retry-After
        (0, 50.0, 1.0, 2.0, 2.0),
        (0, 50.0, 1.0, 48.6, None),  # it asks for more than there is: give up now
        (3, 1.4, 0.5, None, None),  # no time for the call itself
        (0, 1.9, 0.0, None, 0.0),
    ],
)  # fmt: skip
def test_the_throttled_schedule(
    retry: int, remaining: float, draw: float, retry_after: float | None, delay: float | None
) -> None:
    found = throttled_delay(retry, remaining, lambda: draw, retry_after)
    assert found == (None if delay is None else pytest.approx(delay))


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("3", 3.0), (" 120 ", 120.0), ("0.5", 0.5), ("-1", None), ("nan", None), ("", None),
     ("Wed, 21 Oct 2026 07:28:00 GMT", None), ("9" * 20, None)],
)  # fmt: skip
def test_retry_after_is_read_in_seconds(value: str, seconds: float | None) -> None:
    assert retry_after_seconds(value) == seconds


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _storm(execs: int, rate: float, burst: float, seed: int) -> tuple[int, int]:
    """``execs`` plugins started within one second against a token bucket, each retrying as
    :func:`throttled_delay` schedules under its own 50 s deadline, on a simulated clock:
    (answered, calls the bucket saw)."""
    import heapq
    import random

    from emulators.ratelimit import TokenBucket

    clock = _Clock()
    bucket = TokenBucket(rate, burst, clock=clock)
    draws = random.Random(seed)
    starts = [draws.random() for _ in range(execs)]
    queue = [(start, number) for number, start in enumerate(starts)]
    heapq.heapify(queue)
    retries = dict.fromkeys(range(execs), 0)
    answered = calls = 0
    while queue:
        clock.now, number = heapq.heappop(queue)
        calls += 1
        if bucket.take():
            answered += 1
            continue
        delay = throttled_delay(retries[number], starts[number] + 50.0 - clock.now, draws.random)
        if delay is not None:
            retries[number] += 1
            heapq.heappush(queue, (clock.now + delay, number))
    return answered, calls


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_storm_the_bucket_can_serve_is_served_without_multiplying_calls(seed: int) -> None:
    """200 execs at once against 4 calls a second with a burst of 40 (1,000 nodes against ECR's
    20 a second and 200, scaled down): the bucket can serve 240 in 50 s, so every exec is
    answered, with fewer than 4 calls each (the upstream plugin makes up to 3 and answers about a
    third); 20 against 2 a second with a burst of 5, likewise."""
    answered, calls = _storm(200, 4.0, 40.0, seed)
    assert answered == 200 and calls < 4 * 200
    answered, calls = _storm(20, 2.0, 5.0, seed)
    assert answered == 20 and calls < 4 * 20


def test_call_with_retries_waits_as_the_schedule_says_and_throttles_are_not_failures() -> None:
    """Throttled twice (once with a Retry-After), then three 503s, then an answer that is no
    longer retried: the throttles did not use up the three attempts a failure gets."""
    clock = _Clock()
    ctx = Context(
        deadline=Deadline(50.0, clock=clock), log=Logger("t", 1, io.StringIO()), environ={}
    )
    answers = iter([429, 429, 503, 503, 503, 200])
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.now += seconds

    result = call_with_retries(
        lambda: next(answers),
        ctx=ctx,
        what="x",
        retry_result=lambda status: status == 503,
        throttled_result=lambda status: (
            Throttle(7.0 if not sleeps else None) if status == 429 else None
        ),
        sleep=sleep,
        rng=lambda: 0.5,
    )
    assert result == 503  # the third 503 is the last of its attempts
    assert sleeps[:2] == [7.0, pytest.approx((50.0 - 7.0 - 1.0) * 0.3)]
    assert len(sleeps) == 4


@pytest.mark.parametrize(
    ("status", "retry_after", "expected"),
    [
        (429, None, Throttle(None)),
        (429, "7", Throttle(7.0)),
        (429, "Wed, 21 Oct 2026 07:28:00 GMT", Throttle(None)),  # a date: the schedule decides
        (503, "2", Throttle(2.0)),
        (503, None, None),  # a 503 without Retry-After is a failure, retried a bounded number
        (503, "", None),
        (500, "2", None),
        (None, "2", None),  # no status at all (an SDK error without its answer)
    ],
)
def test_what_counts_as_throttled_on_every_route(
    status: int | None, retry_after: str | None, expected: Throttle | None
) -> None:
    """One rule for the stdlib client, azure-identity's and google-auth's routes."""
    assert throttle_of(status, retry_after) == expected

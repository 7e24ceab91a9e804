from __future__ import annotations

import io

import pytest

from credprovider.runtime.deadline import Deadline
from credprovider.runtime.log import Logger
from credprovider.runtime.provider import Context
from credprovider.runtime.retry import (
    BASE_DELAY_SECONDS,
    MAX_DELAY_SECONDS,
    backoff_delay,
    call_with_retries,
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

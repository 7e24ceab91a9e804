"""A token bucket, as the clouds' token APIs rate-limit their callers (ECR's
GetAuthorizationToken: 20 a second with a burst of 200 per account and region): each call takes a
token, tokens come back at ``rate`` a second up to ``burst``, and a call that finds none is
throttled. Thread-safe (the emulators' servers answer on threads).

``TokenBucket.emptied_at_first_call`` is the bucket another node has just emptied when the first
call comes: that call is throttled and tokens come back from then, however long the caller took to
start (a bucket emptied when the test began refilled before a plugin slow to start had asked)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from emulators.http import FakeResponse


@dataclass
class TokenBucket:
    rate: float
    burst: float
    clock: Callable[[], float] = time.monotonic
    throttled: int = 0  # calls refused so far
    served: int = 0
    _tokens: float = field(init=False)
    _last: float | None = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self._tokens, self._last = self.burst, self.clock()

    @classmethod
    def emptied_at_first_call(cls, rate: float, burst: float) -> TokenBucket:
        """A bucket with no token at the first call, refilling at ``rate`` from that call on."""
        bucket = cls(rate, burst)
        bucket._tokens, bucket._last = 0.0, None
        return bucket

    def take(self) -> bool:
        """One call: True if it may go through."""
        with self._lock:
            now = self.clock()
            if self._last is None:
                self._last = now
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
            self._last = now
            if self._tokens >= 1:
                self._tokens -= 1
                self.served += 1
                return True
            self.throttled += 1
            return False


def too_many_requests(body: Any, retry_after: int | None) -> FakeResponse:
    """A token endpoint's refusal when its bucket is empty: HTTP 429 with ``body``, and
    ``Retry-After`` (seconds) when it says one."""
    headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
    return FakeResponse.json(body, status=429, headers=headers)

"""One builder at a time for a thing in the build cache: two ``make`` runs on one machine (a
clone's ``make test`` and another's ``make build``), or the test workers, that need the same
interpreter or Go binary build it once; the others wait on its lock file, then find it built.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def one_builder(lock: Path) -> Iterator[None]:
    """Held while what ``lock`` guards is built (an exclusive ``flock`` on that file)."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)

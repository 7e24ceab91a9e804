"""SIGTERM and the agent (a DaemonSet roll, ``helm upgrade``, a node drain): while the agent is
changing the node, from its first write to the kubelet's health confirmed (or its rollback), the
signal is held and the change runs to its end; then the agent says what it did and exits. At any
other moment (planning, waiting for a restart slot, idle after the change) it exits at once. The
chart gives the pod ``terminationGracePeriodSeconds`` above the longest change (the health wait
and a rollback), so the kubelet never has to kill it in the middle of one."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from types import FrameType


class Termination:
    """The agent's SIGTERM handler: :meth:`changing` marks a change under way."""

    def __init__(self) -> None:
        self.requested = False
        self._depth = 0

    def install(self) -> Termination:
        signal.signal(signal.SIGTERM, self._on_term)
        return self

    def _on_term(self, _signal: int, _frame: FrameType | None) -> None:
        self.requested = True
        if not self._depth:
            raise SystemExit(0)
        print("credprovider agent: SIGTERM: finishing the change under way first", file=sys.stderr)

    @contextlib.contextmanager
    def changing(self) -> Iterator[None]:
        """A change under way: SIGTERM waits for its end (the caller then checks
        :attr:`requested`)."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

"""Servers run beside a command, both in a network namespace of their own (loopback only): a
stand-in at a fixed address (the Arc agent's 127.0.0.1:40342) or one reached only through
another (an API server behind a proxy), never binding the host's ports nor reaching its network.

The servers are Python code given in ``BESIDE_CODE`` (its settings in the environment): it writes
``$BESIDE_LOG.ready`` once it serves, and what it saw to ``$BESIDE_LOG`` when SIGTERM stops it.
:func:`wrapper` is the command's prefix (inside the namespace: ``unshare --net`` before it, or a
namespace the caller made), :func:`environment` the variables it needs.
"""

from __future__ import annotations

import sys
from pathlib import Path

_SCRIPT = """
ip link set lo up || exit 97
"$BESIDE_PYTHON" -c "$BESIDE_CODE" & servers=$!
tries=0
until [ -e "$BESIDE_LOG.ready" ]; do
  tries=$((tries + 1)); [ "$tries" -gt 400 ] && exit 98; sleep 0.05
done
"$@"; code=$?
kill "$servers"; wait "$servers"
exit "$code"
"""


def wrapper() -> list[str]:
    return ["sh", "-c", _SCRIPT, "sh"]


def environment(code: str, log: Path, **settings: str) -> dict[str, str]:
    return {"BESIDE_PYTHON": sys.executable, "BESIDE_CODE": code, "BESIDE_LOG": str(log),
            **settings}  # fmt: skip

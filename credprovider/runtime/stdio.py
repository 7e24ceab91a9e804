"""The process's standard streams, as :func:`~credprovider.runtime.serve.run` needs them, when one
was closed at exec (``<&-``, ``>&-``, ``2>&-``: Python then sets ``sys.stdin`` & co. to ``None``).

* stdin closed: there is no request; reading says so in one line.
* stdout closed: there is nowhere to answer; writing fails with ``EBADF`` (one line, exit 1).
* stderr closed: logging goes nowhere and never decides the outcome: the answer still goes out on
  stdout with exit status 0.
"""

from __future__ import annotations

import errno
import sys

from credprovider.runtime._typing import IO, Any
from credprovider.runtime.api import RequestError


class _ClosedStdin:
    def isatty(self) -> bool:
        return False

    def read(self, size: int = -1) -> bytes:
        raise RequestError(
            "stdin is closed: there is no CredentialProviderRequest to read (the kubelet writes "
            "one there)"
        )


class _ClosedStdout:
    def write(self, data: bytes) -> int:
        raise OSError(errno.EBADF, "stdout is closed")

    def flush(self) -> None:
        raise OSError(errno.EBADF, "stdout is closed")


class _Discard:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def standard_streams() -> tuple[IO[bytes], IO[bytes], IO[str]]:
    """(stdin, stdout, stderr) for :func:`run`, each usable even if it was closed at exec."""
    stdin: Any = sys.stdin.buffer if sys.stdin is not None else _ClosedStdin()
    stdout: Any = sys.stdout.buffer if sys.stdout is not None else _ClosedStdout()
    stderr: Any = sys.stderr if sys.stderr is not None else _Discard()
    return stdin, stdout, stderr


def flush_quietly() -> None:
    """Flush what Python buffered for stdout and stderr; a closed or broken stream is ignored."""
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:  # noqa: SIM105 - contextlib is not on the exec path
            stream.flush()
        except (OSError, ValueError):
            pass

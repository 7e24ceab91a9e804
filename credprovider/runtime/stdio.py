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


def print_out(program: str, text: str) -> int:
    """``text`` on stdout, flushed: exit status 0; or, stdout closed, full or gone, 1 (141 for
    a reader that went away) after one line on stderr, and nothing left for Python to fail on at
    exit (``--version >/dev/full`` was a traceback)."""
    try:
        if sys.stdout is None:
            raise OSError(errno.EBADF, "standard output is closed")
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    except OSError as exc:
        drop_stdout()
        if isinstance(exc, BrokenPipeError):
            return 141  # 128 + SIGPIPE, as a shell reports it
        say_quietly(f"{program}: cannot write to standard output: {exc.strerror or exc}\n")
        return 1


def drop_stdout() -> None:
    """What is still buffered for stdout goes to /dev/null: the write that failed would fail
    again at exit, where Python prints it as an exception ignored."""
    import os

    try:
        if sys.stdout is not None:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def say_quietly(line: str) -> None:
    """``line`` on stderr, if it can be written at all."""
    try:
        if sys.stderr is not None:
            sys.stderr.write(line)
            sys.stderr.flush()
    except (OSError, ValueError):
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

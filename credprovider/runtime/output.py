"""Whole texts written to stdout (``--version``, the tool's output) when stdout may take nothing:
closed at exec (``>&-``), a full disk (``/dev/full``), a reader gone. One line on stderr, an exit
status, and nothing left buffered for Python to fail on at exit. Imports nothing but ``sys`` and
``errno`` at its top: every program's ``--version`` loads it (``make bench`` times that exec).
"""

from __future__ import annotations

import errno
import sys


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

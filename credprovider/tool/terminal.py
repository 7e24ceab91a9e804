"""What the tool prints passes through one sanitizer: text it did not write itself (a node name,
an annotation or Status message from an API server, a file's content, a process's command line, a
plugin's stderr) cannot move the cursor, clear the screen, set the window title or reorder what
is shown (``\\x1b]0;...\\x07``, ``\\x1b[2J``, a right-to-left override), and a character the
terminal's encoding cannot show is escaped rather than ending the command (:func:`encodable`).

:func:`sanitized` escapes every character that is not printable as Go's ``%q`` does
(:func:`credprovider.runtime.redact.printable`), keeping only newline and tab; a byte that is not
UTF-8 (kept by ``os.fsdecode`` as a lone surrogate) is shown as ``\\xff``. :func:`sanitizing`
puts that filter in front of ``sys.stdout`` and ``sys.stderr`` for the whole command
(``cli.main``), so no print anywhere can forget it. JSON output is unaffected: ``json.dumps``
already escapes such characters. Where what is said is for a person (stderr, and stdout but with
``--json``), a line longer than :data:`STDERR_LINE_LIMIT` is cut there, saying how long it was
(5,000 node names in one line, a config path of 120 KB echoed); ``--json``'s stdout, which
scripts read, is never cut.
Not on the exec path.
"""

from __future__ import annotations

import contextlib
import errno
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from credprovider.errors import CredproviderError
from credprovider.runtime.excerpt import clip
from credprovider.runtime.redact import printable, without_userinfo

_KEPT = "\n\t"
STDERR_LINE_LIMIT = 4096


def sanitized(text: str) -> str:
    """``text`` with every control, format (bidi) and undecodable character escaped."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in _KEPT else _escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    """One character as ``%q`` writes it; a byte ``os.fsdecode`` kept as a surrogate as ``\\xff``."""
    if 0xDC80 <= ord(ch) <= 0xDCFF:
        return f"\\x{ord(ch) - 0xDC00:02x}"
    return printable(ch)


def encodable(text: str, encoding: str) -> str:
    """``text`` with each character ``encoding`` has no byte for escaped (``\\u2192``): a terminal
    in an 8-bit locale (``LANG=en_US.ISO-8859-1``) cannot show "→" or "…", and Python's stdout
    raised UnicodeEncodeError on them, ending the command halfway through what it printed."""
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:  # an encoding Python does not know: left as Python would write it
        pass
    return text


def capped(text: str, limit: int = STDERR_LINE_LIMIT) -> str:
    """``text`` with each line longer than ``limit`` characters cut there (``clip``)."""
    if len(text) <= limit:
        return text
    return "\n".join(clip(line, limit) for line in text.split("\n"))


class OutputFailed(CredproviderError):
    """Standard output cannot be written (closed, a full disk): the command's one line."""


class _Sanitizing:
    """A text stream that writes :func:`sanitized` text to ``stream`` (each line capped at
    ``limit`` characters, when given). For stdout (``quiet`` false) a write that fails is
    :class:`OutputFailed` (a reader that went away stays ``BrokenPipeError``); for stderr it is
    dropped: what the command says there never decides what it does."""

    def __init__(
        self, stream: TextIO | None, limit: int | None = None, quiet: bool = False
    ) -> None:
        self._stream = stream
        self._limit = limit
        self._quiet = quiet
        self._encoding = getattr(stream, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        # a URL's userinfo is a secret whatever quotes it (an operator's --url, a proxy setting)
        shown = without_userinfo(text)
        shown = capped(shown, self._limit) if self._limit else shown
        self._guarded(lambda stream: stream.write(encodable(sanitized(shown), self._encoding)))
        return len(text)

    def flush(self) -> None:
        self._guarded(lambda stream: stream.flush())

    def _guarded(self, act: Any) -> None:
        try:
            if self._stream is None:
                raise OSError(errno.EBADF, "standard output is closed")
            act(self._stream)
        except BrokenPipeError:
            if not self._quiet:
                raise
        except (OSError, ValueError) as exc:  # ValueError: a stream closed under it
            if not self._quiet:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise OutputFailed(f"cannot write to standard output: {why}") from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def sanitizing(cap_stdout: bool = True) -> Iterator[None]:
    """Every write to ``sys.stdout`` and ``sys.stderr`` sanitized (a URL's userinfo dropped) while
    this lasts, each line of stderr capped (and of stdout, with ``cap_stdout``: not for
    ``--json``)."""
    out, err = sys.stdout, sys.stderr
    sys.stdout = _Sanitizing(out, STDERR_LINE_LIMIT if cap_stdout else None)
    sys.stderr = _Sanitizing(err, STDERR_LINE_LIMIT, quiet=True)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err

"""Files an operator names to the ``credprovider`` tool (configs, flag files, tokens, directories),
read the way the kubelet would read them, but bounded and honest about who is reading.

* The kubelet runs as root. When this tool runs as another user and the kernel refuses it a file or
  directory, that says nothing about what the kubelet would do: :class:`UnreadableError` says so
  ("cannot read X as uid N ...; run this as root"), and no command turns it into a kubelet verdict.
* A FIFO, device or socket is never opened for reading (it could block for ever or never end), and a
  regular file is read up to a size limit: a file an operator names cannot hang the tool or exhaust
  its memory.

Not on the exec path.
"""

from __future__ import annotations

import errno
import os
from typing import Final

from credprovider.errors import CredproviderError
from credprovider.runtime.nodefile import NodeFileError, read_node_file, reason

# Far above any real config, flag file or token; far below what would hurt the machine.
MAX_FILE_BYTES: Final = 4 * 1024 * 1024
_REFUSED: Final = (errno.EACCES, errno.EPERM)


class UnreadableError(CredproviderError):
    """This user may not read something the kubelet (root) would read: no verdict can be given."""


class FileProblem(CredproviderError):
    """The file itself stops anyone reading it (missing, not a regular file, too large, not UTF-8):
    the kubelet, reading it, would fail too. ``reason`` is the short cause, Go-errno style."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def refused_as_non_root(exc: OSError) -> bool:
    """Was ``exc`` a permission refusal that root (the kubelet) would not get?"""
    return exc.errno in _REFUSED and os.geteuid() != 0


def unreadable(path: str, exc: OSError, verb: str = "read") -> UnreadableError:
    """The one sentence for a path this (non-root) user may not read (or write)."""
    return UnreadableError(
        f"cannot {verb} {path} as uid {os.geteuid()} ({(exc.strerror or str(exc)).lower()}): run "
        "this command as root, as the kubelet runs"
    )


def check_access(path: str, exc: OSError) -> None:
    """Raise :class:`UnreadableError` for a refusal only this user gets; else return (the caller
    then reports ``exc`` as the kubelet would)."""
    if refused_as_non_root(exc):
        raise unreadable(path, exc) from None


def lexists(path: str) -> bool:
    """Is anything at ``path`` (a dangling link too)? :class:`UnreadableError` where this user
    may not look and root might find something: never "nothing there" for what is only hidden."""
    try:
        os.lstat(path)
    except OSError as exc:
        check_access(path, exc)
        return False
    except ValueError:  # a NUL in the path
        return False
    return True


def cwd_gone() -> bool:
    """Whether the current directory was removed since this process entered it (``getcwd``
    fails): a relative path has nothing to be read from."""
    try:
        os.getcwd()
    except FileNotFoundError:
        return True
    return False


def link_target(path: str) -> str:
    """Where the link ``path`` points, as one normalised path (a relative link is read from the
    link's own directory, as the kernel follows it)."""
    return os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))


def read_bytes(path: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """A regular file's bytes, at most ``limit`` of them; never opens a FIFO or device (the
    plugins' own reader, :func:`~credprovider.runtime.nodefile.read_node_file`).

    Raises :class:`UnreadableError` (this user only) or :class:`FileProblem` (any reader)."""
    try:
        return read_node_file(path, limit)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        if isinstance(exc, OSError) and not isinstance(exc, NodeFileError):
            check_access(path, exc)
        raise FileProblem(path, reason(exc)) from None


def read_text(path: str, limit: int = MAX_FILE_BYTES) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a :class:`FileProblem` if it is not)."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileProblem(path, f"is not UTF-8 text (byte {exc.start})") from None


def list_directory(path: str) -> list[os.DirEntry[str]]:
    """A directory's entries (``os.scandir``), with this user's refusal as :class:`UnreadableError`."""
    try:
        with os.scandir(path) as entries:
            return list(entries)
    except OSError as exc:
        check_access(path, exc)
        raise FileProblem(path, reason(exc)) from None

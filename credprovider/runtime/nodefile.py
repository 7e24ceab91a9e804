"""A file on the node that a plugin or the tool reads (azure.json, a credentials file, a config, a
flag file, a token): opened without blocking, refused unless it is a regular file, read with a cap.

A FIFO named by mistake would otherwise hold the reader until a deadline (whose message would blame
the network), ``/dev/zero`` would be read until memory runs out. The one reader for both sides:
the plugins call it directly, the ``credprovider`` tool through ``tool/node/access`` (which adds who
may read what). A file an SDK would read itself is read for it (:func:`setting_file_text`: a token
file), or checked before it opens it (:func:`require_node_file`: a CA bundle, a profile file).
Stdlib only.
"""

from __future__ import annotations

import errno
import stat

from credprovider.errors import CredproviderError, ProviderError
from credprovider.runtime import _os
from credprovider.runtime._typing import Final
from credprovider.runtime.excerpt import byte_size

# Real ones are a few KiB (azure.json, a service-account key, an external-account config).
MAX_NODE_FILE_BYTES: Final = 1 << 20
_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NodeFileError(CredproviderError, OSError):
    """The file is not one to read (not a regular file, too large); ``strerror`` is the reason,
    fit for one line as it stands."""


class UnusableFileError(ProviderError):
    """A file a setting names that an SDK would read cannot be used: one line naming the file, the
    setting and the fix."""

    def __init__(self, what: str, path: str, setting: str, reason: str) -> None:
        super().__init__(
            f"{what} {path} named by {setting} cannot be used: {reason}", f"fix or unset {setting}"
        )


def read_node_file(path: str, cap: int = MAX_NODE_FILE_BYTES) -> bytes:
    """The whole file; :class:`OSError` if it cannot be opened (``ValueError`` for a NUL in the
    path), :class:`NodeFileError` if it is not a regular file or is larger than ``cap``."""
    descriptor = _open_regular(path)
    try:
        chunks, size = [], 0
        while chunk := _os.read(descriptor, min(1 << 20, cap + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                raise NodeFileError(errno.EFBIG, f"is larger than {byte_size(cap)}", path)
        return b"".join(chunks)
    finally:
        _os.close(descriptor)


def require_node_file(path: str, cap: int = MAX_NODE_FILE_BYTES) -> None:
    """Checks, without reading it, that ``path`` is a regular file of at most ``cap`` bytes that
    can be opened: for a file an SDK then reads itself (a CA bundle). Raises as
    :func:`read_node_file` does."""
    descriptor = _open_regular(path)
    try:
        if _os.fstat(descriptor).st_size > cap:
            raise NodeFileError(errno.EFBIG, f"is larger than {byte_size(cap)}", path)
    finally:
        _os.close(descriptor)


def setting_file_text(what: str, path: str, setting: str, cap: int = MAX_NODE_FILE_BYTES) -> str:
    """The UTF-8 text of the file ``setting`` names, read for an SDK that would read it unbounded
    (a token file); :class:`UnusableFileError` if it cannot be."""
    try:
        return read_node_text(path, cap)
    except UnicodeDecodeError:
        raise UnusableFileError(what, path, setting, "it is not UTF-8 text") from None
    except (OSError, ValueError) as exc:
        raise UnusableFileError(what, path, setting, reason(exc)) from None


def reason(exc: OSError | ValueError) -> str:
    """Why a node file could not be read, as the rest of a line ("is a FIFO, not a regular file",
    "no such file or directory")."""
    if isinstance(exc, NodeFileError):
        return str(exc.strerror)
    if isinstance(exc, OSError):
        return (exc.strerror or str(exc)).lower()
    return "the path contains a NUL byte"  # the one ValueError opening a path raises


def _open_regular(path: str) -> int:
    """A descriptor of ``path`` opened without blocking, refused unless a regular file."""
    try:
        descriptor = _os.open(path, _os.O_RDONLY | _os.O_NONBLOCK | _os.O_CLOEXEC | _os.O_NOCTTY)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (or a device without a driver): say which
            _refuse_special(_os.stat(path).st_mode, path)
        raise
    try:
        _refuse_special(_os.fstat(descriptor).st_mode, path)
    except BaseException:
        _os.close(descriptor)
        raise
    return descriptor


def special_kind(mode: int) -> str:
    """What a file of ``mode`` is when it is not a regular file ("a FIFO"), else ''."""
    if stat.S_ISREG(mode):
        return ""
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _refuse_special(mode: int, path: str) -> None:
    kind = special_kind(mode)
    if kind:
        raise NodeFileError(errno.EINVAL, f"is {kind}, not a regular file", path)


def read_node_text(path: str, cap: int = MAX_NODE_FILE_BYTES) -> str:
    """:func:`read_node_file` as UTF-8 text (:class:`UnicodeDecodeError` if it is not)."""
    return read_node_file(path, cap).decode("utf-8")

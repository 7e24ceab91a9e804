"""A file on the node that a plugin reads (azure.json, a credentials file, an Azure Stack
environment file): opened without blocking, refused unless it is a regular file, read with a cap.

A FIFO named by mistake would otherwise hold the plugin until its deadline (and the deadline's
message would blame the network); ``/dev/zero`` would be read until memory runs out. Stdlib only.
"""

from __future__ import annotations

import errno
import os
import stat

from credprovider.runtime._typing import Final

# Real ones are a few KiB (azure.json, a service-account key, an external-account config).
MAX_NODE_FILE_BYTES: Final = 1 << 20
_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_node_file(path: str, cap: int = MAX_NODE_FILE_BYTES) -> bytes:
    """The whole file; :class:`OSError` (with a ``strerror`` fit for one line) if it cannot be
    opened, is not a regular file or is larger than ``cap``."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise OSError(errno.EINVAL, f"is {kind}, not a regular file", path)
        chunks, size = [], 0
        while size <= cap:
            chunk = os.read(descriptor, min(1 << 16, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > cap:
            raise OSError(errno.EFBIG, f"is larger than {cap >> 10} KiB", path)
        return b"".join(chunks)
    finally:
        os.close(descriptor)


def read_node_text(path: str, cap: int = MAX_NODE_FILE_BYTES) -> str:
    """:func:`read_node_file` as UTF-8 text (:class:`UnicodeDecodeError` if it is not)."""
    return read_node_file(path, cap).decode("utf-8")

"""What the exec path takes from ``os``, without importing ``os``.

Importing ``os`` costs a plugin exec about 1.6 ms, a fifth of the interpreter's whole start: its
module body, ``posixpath``, and ``_collections_abc`` registering every collection ABC for
``os.environ``'s mapping. A cache hit needs none of that: the functions it calls are ``posix``'s
(the C module the interpreter holds from its first instruction), re-exported here under the same
names, and the environment is read once into a dict of ``str``, decoded as ``os.environ`` decodes
it. A cache miss that loads an SDK imports ``os`` anyway; the runtime's own code reads the
environment through its context (``Context.environ``), which :func:`process_environ` gives.

The modules of a hit import this one instead of ``os`` (tests/integration/test_cache.py holds a
hit to importing no ``os``).
"""

from __future__ import annotations

import posix
import sys
from posix import (
    O_CLOEXEC,
    O_CREAT,
    O_DIRECTORY,
    O_EXCL,
    O_NOCTTY,
    O_NOFOLLOW,
    O_NONBLOCK,
    O_RDONLY,
    O_RDWR,
    O_WRONLY,
    _exit,
    close,
    fstat,
    fsync,
    getcwd,
    geteuid,
    getpid,
    mkdir,
    open,
    read,
    readlink,
    replace,
    rmdir,
    stat,
    stat_result,
    sysconf,
    unlink,
    urandom,
)

__all__ = [
    "O_CLOEXEC", "O_CREAT", "O_DIRECTORY", "O_EXCL", "O_NOCTTY", "O_NOFOLLOW", "O_NONBLOCK",
    "O_RDONLY", "O_RDWR", "O_WRONLY", "ProcessEnviron", "_exit", "close", "exists",
    "fstat", "fsync", "getcwd", "geteuid", "getpid", "is_process_environ", "isabs", "join",
    "mkdir", "open", "process_environ", "read", "readlink", "replace", "rmdir", "stat",
    "stat_result", "sysconf", "unlink", "urandom",
]  # fmt: skip


class ProcessEnviron(dict[str, str]):
    """The process environment as the plugin started with it: ``os.environ``'s names and values
    (UTF-8 with ``surrogateescape``, as ``os.fsdecode`` on Linux), in a plain dict."""


_PROCESS: list[ProcessEnviron] = []


def process_environ() -> ProcessEnviron:
    """The process environment, read once."""
    if not _PROCESS:
        _PROCESS.append(
            ProcessEnviron(
                (name.decode("utf-8", "surrogateescape"), value.decode("utf-8", "surrogateescape"))
                for name, value in posix.environ.items()
            )
        )
    return _PROCESS[0]


def is_process_environ(environ: object) -> bool:
    """Whether ``environ`` is the process's own environment (nothing to put in place for an SDK):
    :func:`process_environ`'s, or ``os.environ`` when something imported ``os``."""
    if isinstance(environ, ProcessEnviron):
        return True
    loaded = sys.modules.get("os")
    return loaded is not None and environ is getattr(loaded, "environ", None)


def join(first: str, *more: str) -> str:
    """``os.path.join`` for ``str`` paths."""
    path = first
    for part in more:
        if part.startswith("/"):
            path = part
        elif not path or path.endswith("/"):
            path += part
        else:
            path += "/" + part
    return path


def isabs(path: str) -> bool:
    return path.startswith("/")


def exists(path: str) -> bool:
    """``os.path.exists``: whether ``stat`` succeeds (a dangling link does not exist)."""
    try:
        stat(path)
    except (OSError, ValueError):
        return False
    return True

"""The tool's errors that more than one of its packages raise, under the one root
(:class:`credprovider.errors.CredproviderError`), and the exit statuses a run ends with (the
commands' and the agent's pod's); each package's own errors live with it."""

from __future__ import annotations

from typing import Final

from credprovider.errors import CredproviderError

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2  # a usage error, or an input this user may not read: no verdict


class NodeChangeError(CredproviderError):
    """install, migrate or the agent cannot plan or make its change to the node: it would
    overwrite something that is not credprovider's, cannot find what to install, or cannot read
    the kubelet's flags."""


def node_failure(exc: OSError | CredproviderError, root_hint: str = "") -> str:
    """The one sentence for a change that failed on the node, whichever command made it: this
    user may not write there (run it as root; ``root_hint`` says who does), the node refused a
    write (its path and the system's reason), or the change's own sentence."""
    import os

    # a link or a rename: the path written is the second
    written = (exc.filename2 or exc.filename) if isinstance(exc, OSError) else None
    if isinstance(exc, PermissionError) and os.geteuid() == 0:  # root refused: not its mode
        return (
            f"cannot write {written}: {exc.strerror or exc}, even as root (is a file there "
            f"immutable, 'lsattr {os.path.dirname(str(written))}' showing an 'i'? or a security "
            "module refusing it?)"
        )
    if isinstance(exc, PermissionError):
        said = f" ({root_hint})" if root_hint else ""
        return f"cannot write {written} as uid {os.geteuid()}: run it as root{said}"
    if isinstance(exc, OSError):
        where = f" {written}" if written else ""
        return f"cannot write{where}: {exc.strerror or exc}{_remedy(exc, written)}"
    return str(exc)


def _remedy(exc: OSError, written: object) -> str:
    """What to do about a file system that refused the write for itself: full, or read-only."""
    import errno
    import os

    place = os.path.dirname(str(written)) if written else "/"
    while place not in ("", "/") and not os.path.isdir(place):  # a temporary one gone since
        place = os.path.dirname(place)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f" (make room on its file system: df -h {place})"
    if exc.errno == errno.EROFS:
        return f" (its file system is mounted read-only: findmnt -T {place})"
    return ""

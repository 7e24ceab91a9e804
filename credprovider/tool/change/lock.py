"""One lock per node: ``credprovider install``, ``migrate --write``, the agent's apply and
uninstall, and the node's own rollback (``agent rollback``) change the same kubelet files, so each
takes this lock before it reads what it will change and holds it until its change is over (for
the agent, through the kubelet's restart and health wait). A second run waits, says so on stderr,
and goes on once the first is done: it reads the node as the first left it.

The lock is ``flock(2)`` on ``/run/credprovider/node.lock``: ``/run`` is a tmpfs, so nothing is
written to the node's disk and nothing outlives a reboot; the kernel releases the lock when its
holder dies (a kill never leaves it taken). The file is locked, never removed, so every process
that opens it locks the same inode; the agent's pod mounts the host's ``/run/credprovider`` for
that (both chart modes). The holder writes its pid and command into the file for the waiter's
message. Under ``--root`` the lock is the root's (the agent's ``/host``: the host's own).

Root trusts the file only if it is a regular file it owns (``O_NOFOLLOW``; a link or another
user's file is refused, one line). A user who cannot create it (not root, writing their own
directories) goes on without it: it guards root's node files, which that user cannot change.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator
from typing import Final

from credprovider.paths import LOCK_PATH
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.root import HOST, NodeRoot

# How long a run waits for another's change (the agent's longest: a restart, its health wait
# and a rollback's restart) before it gives up with one line.
WAIT_SECONDS: Final = 900.0
_POLL: Final = 0.2


class NodeBusy(NodeChangeError):
    """Another change held the node's lock for longer than the wait."""


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _open(path: str) -> int | None:
    """The lock file's descriptor (made if missing), or None: this user cannot make it."""
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o755, exist_ok=True)
        descriptor = os.open(
            path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY, 0o600
        )
    except PermissionError:
        if os.geteuid() == 0:
            raise
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NodeChangeError(
                f"the node's lock {path} is a symbolic link: remove it (nothing else makes one)"
            ) from None
        if exc.errno in (errno.EROFS, errno.EACCES) and os.geteuid() != 0:
            return None
        raise NodeChangeError(
            f"cannot make the node's change lock {path}: {exc.strerror or exc}: nothing was "
            f"changed (every change takes it first: {directory} must be writable by root)"
        ) from None
    found = os.fstat(descriptor)
    if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid():
        os.close(descriptor)
        raise NodeChangeError(
            f"the node's lock {path} is not a regular file of uid {os.geteuid()}: remove it "
            "(another user's file there could hold every change back)"
        )
    return descriptor


def _holder(descriptor: int) -> str:
    """What the holder wrote about itself, for the waiter's message."""
    try:
        said = os.pread(descriptor, 512, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return "".join(ch for ch in said if ch.isprintable())[:200]


@contextlib.contextmanager
def node_lock(
    root: NodeRoot = HOST,
    what: str = "",
    *,
    wait: float = WAIT_SECONDS,
    say: Callable[[str], None] = _say,
) -> Iterator[None]:
    """Hold the node's lock for the ``with`` block; ``what`` (``credprovider install``) is what
    the holder is, for others' messages. Waits up to ``wait`` seconds, saying so once."""
    path = str(root.host(LOCK_PATH, follow=False))
    descriptor = _open(path)
    if descriptor is None:
        yield
        return
    try:
        started = time.monotonic()
        said = False
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(descriptor) or "another run"
                if not said:
                    say(f"waiting for another change on this node to end ({holder})")
                    said = True
                if time.monotonic() - started > wait:
                    raise NodeBusy(
                        f"another change on this node ({holder}) held {LOCK_PATH} for more than "
                        f"{wait:.0f}s: nothing was changed; try again once it has ended"
                    ) from None
                time.sleep(_POLL)
        if said:
            say(f"waited {time.monotonic() - started:.1f}s for another change on this node")
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"pid {os.getpid()}: {what or 'credprovider'}\n".encode(), 0)
        yield
    finally:
        os.close(descriptor)  # releases the lock

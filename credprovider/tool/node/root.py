"""The node's filesystem as the tool sees it: ``/``, or a directory (``--root``, the agent's
``/host``) that holds a node's filesystem. Every path the node names is resolved *inside* it.

Under a root other than ``/``, the kernel would resolve a node's absolute link
(``/etc/kubernetes -> /etc``) or a ``..`` in the tool's own filesystem, outside the node's: a read
would report another file, a write would land in the container. :meth:`NodeRoot.host` resolves as
``openat2``'s ``RESOLVE_IN_ROOT`` does: component by component, absolute link targets and ``..``
taken relative to the root, never above it, at most 40 links (the kernel's ``ELOOP``). The result
names a place inside the root whose directories are real ones (no link left to follow), so the
kernel's own resolution of it stays inside too. Under ``/`` the kernel's resolution is already the
node's, and a path is used as it is.

One definition for the agent, ``doctor --root``, install and migrate (``docs/security.md``).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from credprovider.errors import CredproviderError

_MAX_LINKS: Final = 40


class RootPathError(CredproviderError):
    """A node path that cannot be resolved inside the root (a loop of links)."""


@dataclass(frozen=True)
class NodeRoot:
    """Where a node's filesystem is (an absolute path)."""

    path: str = "/"

    @classmethod
    def at(cls, path: str | os.PathLike[str]) -> NodeRoot:
        return cls(os.path.abspath(os.fspath(path)))

    @property
    def is_host(self) -> bool:
        return self.path == "/"

    def host(self, node_path: str, *, follow: bool = True) -> Path:
        """Where ``node_path`` (as the node names it) is, for this tool: every link on the way
        resolved inside the root, the last one too unless ``follow`` is false (to replace or
        remove a link itself)."""
        if self.is_host:
            return Path(node_path)
        return Path(self.path, *self.resolve(node_path, follow=follow))

    def exists(self, node_path: str) -> bool:
        return os.path.exists(self.host(node_path))

    def lexists(self, node_path: str) -> bool:
        return os.path.lexists(self.host(node_path, follow=False))

    def mount_of(self, place: str) -> tuple[str, int]:
        """``place``, or the nearest directory above it that exists (what it will be made in),
        and the flags of the mount that holds it (``statvfs``: read-only, noexec)."""
        while place != "/" and not self.lexists(place):
            place = os.path.dirname(place)
        return place, os.statvfs(self.host(place, follow=False)).f_flag

    def resolve(self, node_path: str, *, follow: bool = True) -> list[str]:
        """The components of ``node_path`` below the root, with every link resolved inside it."""
        if "\0" in node_path:
            raise RootPathError(f"{node_path!r}: a path cannot hold a NUL byte")
        done: list[str] = []
        todo = [part for part in node_path.split("/") if part not in ("", ".")]
        todo.reverse()  # a stack: the next component last
        links = 0
        while todo:
            part = todo.pop()
            if part == "..":
                if done:
                    done.pop()
                continue
            here = os.path.join(self.path, *done, part)
            try:
                mode = os.lstat(here).st_mode
            except (FileNotFoundError, NotADirectoryError):
                done.append(part)
                continue
            except OSError:
                done.append(part)  # what the caller does there reports this user's refusal
                continue
            if not stat.S_ISLNK(mode) or (not todo and not follow):
                done.append(part)
                continue
            links += 1
            if links > _MAX_LINKS:
                raise RootPathError(
                    f"{node_path}: too many levels of symbolic links under {self.path}"
                )
            target = os.readlink(here)
            if target.startswith("/"):
                done = []
            todo += reversed([p for p in target.split("/") if p not in ("", ".")])
        return done

    def node_path(self, host_path: str | os.PathLike[str]) -> str:
        """The node's name for a place under the root (the inverse of :meth:`host`)."""
        if self.is_host:
            return os.fspath(host_path)
        relative = os.path.relpath(os.fspath(host_path), self.path)
        if relative == ".." or relative.startswith("../"):
            raise RootPathError(f"{host_path} is not under {self.path}")
        return "/" if relative == "." else f"/{relative}"


HOST: Final = NodeRoot()  # this tool's own filesystem is the node's (no --root)

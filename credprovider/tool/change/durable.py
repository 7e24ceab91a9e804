"""Every file and link the tool puts on a node is replaced the way a database writes a page:
a temporary beside it, written and flushed (``fsync``), renamed over the old one, and the
directory flushed after the rename. Readers see the old or the new content, never part of it, and
after a power cut the name holds one of the two: never an empty file (XFS, the default on RHEL and
Amazon Linux, may otherwise leave a renamed file empty when its data was not flushed first).

One writer for the agent (``agent/apply.py``) and for install and migrate (``install_plan.py``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Final

TEMPORARY_SUFFIX: Final = ".credprovider-new"


def temporary_for(path: Path) -> Path:
    """Where ``path``'s next version is written before it is renamed into place."""
    return path.with_name(f".{path.name}{TEMPORARY_SUFFIX}")


def sync_directory(directory: Path) -> None:
    """Flush ``directory``'s entries (a rename in it, a new name) to disk."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def replace_file(path: Path, data: bytes, mode: int = 0o644) -> None:
    """``path`` holds ``data`` (with ``mode``), durably; its directory is made if missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = temporary_for(path)
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    descriptor = os.open(
        partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode
    )
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
        os.fchmod(descriptor, mode)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(partial, path)
    sync_directory(path.parent)


def replace_link(path: Path, target: str) -> None:
    """``path`` is a link to ``target``, durably (a directory there is removed first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    partial = temporary_for(path)
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    partial.symlink_to(target)
    os.replace(partial, path)
    sync_directory(path.parent)


def sync_tree(top: Path) -> None:
    """Flush every file and directory of a tree just copied (before it is renamed into place)."""
    for directory, _, files in os.walk(top):
        for name in files:
            place = os.path.join(directory, name)
            if os.path.islink(place):
                continue
            descriptor = os.open(place, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        sync_directory(Path(directory))

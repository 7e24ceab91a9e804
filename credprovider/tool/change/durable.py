"""Every change the tool makes to a node goes through here, made the way a database writes a
page: a file is replaced by a temporary beside it, written and flushed (``fsync``), renamed over
the old one, and the directory flushed after the rename; a link the same way; a copied tree is
flushed before it is renamed into place. Readers see the old or the new content, never part of
it, and after a power cut each name holds one of the two: never an empty file (XFS, the default on
RHEL and Amazon Linux, may otherwise leave a renamed file empty when its data was not flushed
first). Every call that changes the node passes a kill point (``failpoint``) first.

The primitives of the node-change engine (``engine``), which install, migrate and the agent go
through.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from credprovider.errors import CredproviderError
from credprovider.tool.change.failpoint import reached

TEMPORARY_SUFFIX: Final = ".credprovider-new"
# What Linux file systems take: a name (one part of a path) and a whole path, in bytes.
NAME_MAX: Final = 255
PATH_MAX: Final = 4096
# renameat2(2): its number where credprovider runs, and the flag that swaps two names.
_SYS_RENAMEAT2: Final = {"x86_64": 316, "aarch64": 276}
_RENAME_EXCHANGE: Final = 2
_AT_FDCWD: Final = -100
# A directory a change makes (the bin dir, the config's): its owner's alone to change, whatever
# the umask of the one who ran it (umask 000 made the kubelet's bin dir 0777).
DIR_MODE: Final = 0o755
# Write for group and others, set-uid and set-gid: never on what a copy puts in the bin dir.
_LOOSE: Final = stat.S_IWGRP | stat.S_IWOTH | stat.S_ISUID | stat.S_ISGID


def overlong(path: Path) -> str:
    """Why a file system would refuse to make ``path`` for its length ('' if it would not): a
    name in it longer than :data:`NAME_MAX` bytes, or the whole longer than :data:`PATH_MAX`."""
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            return f"a name in it is {len(os.fsencode(part))} bytes, and {NAME_MAX} is the most"
    if len(os.fsencode(str(path))) >= PATH_MAX:
        return f"it is {len(os.fsencode(str(path)))} bytes long, and {PATH_MAX - 1} is the most"
    return ""


def temporary_for(path: Path) -> Path:
    """Where ``path``'s next version is written before it is renamed into place."""
    return path.with_name(f".{path.name}{TEMPORARY_SUFFIX}")


def _flush(path: Path, flags: int) -> None:
    reached(f"fsync {path}")
    descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC | flags)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def sync_directory(directory: Path) -> None:
    """Flush ``directory``'s entries (a rename in it, a new name) to disk."""
    _flush(directory, os.O_DIRECTORY)


def sync_file(path: Path) -> None:
    """Flush ``path``'s data (before it is renamed to another name)."""
    _flush(path, os.O_NOFOLLOW)


def missing_dirs(directory: Path) -> list[Path]:
    """``directory`` and those above it that do not exist, the deepest first: what
    :func:`make_dirs` makes."""
    missing = []
    here = directory
    while not os.path.lexists(here) and here != here.parent:
        missing.append(here)
        here = here.parent
    return missing


def make_dirs(directory: Path) -> None:
    """``directory`` and those above it, each new one flushed into its parent; each
    :data:`DIR_MODE` at most, whatever the umask."""
    for made in reversed(missing_dirs(directory)):
        reached(f"mkdir {made}")
        with contextlib.suppress(FileExistsError):
            made.mkdir(mode=DIR_MODE)
        sync_directory(made.parent)


def rename_into_place(source: Path, target: Path) -> None:
    """``source`` renamed to ``target`` (replacing it), the directory flushed after."""
    reached(f"rename {source} {target}")
    os.replace(source, target)
    sync_directory(target.parent)


@contextlib.contextmanager
def removed_on_failure(partial: Path) -> Iterator[None]:
    """A failure or an interrupt (not a kill) while ``partial`` is made and renamed into place
    leaves nothing under its name: it would only hold the space, beside the path (a kill leaves
    it, and the next write there removes it first). The failure names the path written."""
    try:
        yield
    except (OSError, KeyboardInterrupt) as exc:  # a failure, or an operator's Ctrl-C
        with contextlib.suppress(OSError):
            if partial.is_dir() and not partial.is_symlink():
                shutil.rmtree(partial)
            else:
                partial.unlink()
        if isinstance(exc, OSError) and exc.errno is not None:
            # said of the path being written, not of its temporary name, now gone
            raise OSError(
                exc.errno, exc.strerror, _as_written(exc.filename, partial), None,
                _as_written(exc.filename2, partial),
            ) from None  # fmt: skip
        raise


def _as_written(name: object, partial: Path) -> object:
    """``name`` (an error's file name) with the temporary ``partial`` in it named as the path it
    stands for."""
    if not isinstance(name, str) or not (name + "/").startswith(f"{partial}/"):
        return name
    meant = partial.with_name(partial.name[1 : -len(TEMPORARY_SUFFIX)])
    return f"{meant}{name[len(str(partial)) :]}"


def replace_file(path: Path, data: bytes, mode: int = 0o644) -> None:
    """``path`` holds ``data`` (with ``mode``), durably; its directory is made if missing."""
    make_dirs(path.parent)
    partial = temporary_for(path)
    remove_file(partial)
    with removed_on_failure(partial):
        reached(f"write {partial}")
        descriptor = os.open(
            partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
            os.fchmod(descriptor, mode)
            reached(f"fsync {partial}")
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        rename_into_place(partial, path)


def replace_link(path: Path, target: str) -> None:
    """``path`` is a link to ``target``, durably (a directory there is removed first)."""
    make_dirs(path.parent)
    if path.is_dir() and not path.is_symlink():
        remove_tree(path)
    partial = temporary_for(path)
    remove_file(partial)
    with removed_on_failure(partial):
        reached(f"symlink {partial}")
        partial.symlink_to(target)
        rename_into_place(partial, path)


def place_tree(source: Path, target: Path, links: bool = True) -> None:
    """``target`` is a copy of ``source`` (links kept as links; without ``links``, the source's
    own top-level links left out), flushed, then renamed into place (whatever was at ``target``
    is replaced). A copy that fails part way (a full disk) is removed before the error goes on:
    it would only hold the space (a kill leaves it, and the next copy removes it first); so is
    the old tree an exchange put aside, if what follows fails."""
    make_dirs(target.parent)
    partial = temporary_for(target)
    remove_tree(partial)
    with removed_on_failure(partial):
        reached(f"copy {source} {partial}")
        try:
            shutil.copytree(
                source,
                partial,
                symlinks=True,
                ignore=None if links else lambda at, names: _top_links(source, at, names),
                copy_function=_copy_or_stop,
            )
        except _CopyStopped as stopped:
            raise stopped.failure from None
        except shutil.Error as exc:  # a link it could not copy
            listed = exc.args[0] if exc.args and isinstance(exc.args[0], list) else []
            first = listed[0] if listed else None  # (from, to, why)
            raise OSError(f"copying {source} to {target}: {first[2] if first else exc}") from None
        root_alone(partial)
        sync_tree(partial)
        if os.path.lexists(target):
            reached(f"exchange {partial} {target}")
            if exchange(partial, target):  # the new tree in place at one instant, the old aside
                sync_directory(target.parent)
                remove_tree(partial)
                return
            remove_tree(target)
        rename_into_place(partial, target)


class _CopyStopped(CredproviderError):
    """A file of a tree that could not be copied: the copy stops there. (``shutil.copytree`` goes
    on past an ``OSError``, a full disk's included, to fail each file after it as well, and then
    says them all in one line of reprs.)"""

    def __init__(self, failure: OSError) -> None:
        super().__init__(str(failure))
        self.failure = failure


def _copy_or_stop(source: str, copy: str) -> object:
    try:
        return shutil.copy2(source, copy)
    except OSError as exc:  # the system's reason, naming the file written
        raise _CopyStopped(OSError(exc.errno, exc.strerror, copy)) from None


def exchange(first: Path, second: Path) -> bool:
    """``first`` and ``second`` swapped at one instant (``renameat2`` with ``RENAME_EXCHANGE``,
    Linux 3.15 on): a directory replaced with no moment where neither is there (links into an
    install --copy's bundle never dangle while it is upgraded). ``False`` where the kernel or the
    file system cannot swap, for the caller to replace in two steps."""
    number = _SYS_RENAMEAT2.get(os.uname().machine)
    if number is None:
        return False
    try:
        # cffi's C backend alone, which the bundle has for cryptography (its Python package and
        # C parser, 0.6 MiB, it leaves out; so is the stdlib's ctypes)
        import _cffi_backend as backend  # type: ignore[import-untyped]

        libc = backend.load_library(None)
    except (ImportError, OSError):  # no C library to call through (a static interpreter)
        return False
    long, int_ = backend.new_primitive_type("long"), backend.new_primitive_type("int")
    path = backend.new_array_type(
        backend.new_pointer_type(backend.new_primitive_type("char")), None
    )
    syscall = libc.load_function(backend.new_function_type((long,), long, 1), "syscall")
    result = syscall(
        backend.cast(long, number),
        backend.cast(int_, _AT_FDCWD),
        backend.newp(path, os.fsencode(first)),
        backend.cast(int_, _AT_FDCWD),
        backend.newp(path, os.fsencode(second)),
        backend.cast(backend.new_primitive_type("unsigned int"), _RENAME_EXCHANGE),
    )
    if result == 0:
        return True
    failed = backend.get_errno()
    if failed in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(failed, os.strerror(failed), str(first), None, str(second))


def remove_whole(directory: Path) -> None:
    """``directory`` and all it holds gone at one instant: renamed to its temporary name, then
    removed (what a killed run left under that name, or half made by ``engine.carry_out``, goes
    first)."""
    partial = temporary_for(directory)
    remove_tree(partial)
    if os.path.lexists(directory):
        rename_into_place(directory, partial)
        remove_tree(partial)


def _top_links(source: Path, at: str, names: list[str]) -> list[str]:
    return [n for n in names if Path(at) == source and (source / n).is_symlink()]


def remove_file(path: Path) -> None:
    """``path`` (a file or a link) gone, durably; nothing there is fine."""
    if not os.path.lexists(path):
        return
    reached(f"unlink {path}")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sync_directory(path.parent)


def remove_tree(path: Path) -> None:
    """A directory tree gone (a link there is removed as a link); nothing there is fine."""
    if not os.path.lexists(path):
        return
    if path.is_symlink() or not path.is_dir():
        remove_file(path)
        return
    reached(f"rmtree {path}")
    shutil.rmtree(path, ignore_errors=True)
    sync_directory(path.parent)


def remove_empty_dir(path: Path) -> bool:
    """``path`` removed if it is an empty directory; whether it is gone."""
    if not os.path.lexists(path):
        return True
    reached(f"rmdir {path}")
    try:
        path.rmdir()
    except OSError:
        return False  # not empty: something else lives there now
    sync_directory(path.parent)
    return True


def root_alone(top: Path) -> None:
    """Every file and directory of a tree just copied writable by its owner alone, and no program
    in it set-uid or set-gid: the copy keeps the source's modes, and a bundle unpacked by a user
    with a loose umask (``g+w``, ``o+w``) would leave the plugins the kubelet runs as root
    writable by others."""
    for directory, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            place = os.path.join(directory, name)
            found = os.lstat(place)
            if not stat.S_ISLNK(found.st_mode) and found.st_mode & _LOOSE:
                os.chmod(place, stat.S_IMODE(found.st_mode) & ~_LOOSE)
    os.chmod(top, stat.S_IMODE(os.lstat(top).st_mode) & ~_LOOSE)


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

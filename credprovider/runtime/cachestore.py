"""The opt-in persistent credential cache shared by concurrent plugin execs on a node. Stdlib only.

Enabled with ``--cache-dir DIR`` or ``CREDPROVIDER_CACHE_DIR``. One JSON file per (provider, registry,
identity) holds the credentials and their expiry. What it trusts (docs/security.md says why):

* the path is walked from ``/`` one directory at a time with ``O_NOFOLLOW`` (missing ones are
  created 0700): every directory on it
  must be owned by root or this user and not writable by group or others, except a sticky one
  (``/tmp``), whose entry on the path must then be owned by root or this user; a symlink on the
  path is followed only if root or this user owns it. The cache directory itself is created 0700
  and must be owned by this user and not writable by group or others. Anything else: a warning,
  and the plugin runs uncached;
* the directory is opened once; locks and entries are opened relative to that descriptor with
  ``O_NOFOLLOW`` (never by path), and must be regular files owned by this user. Entries are written
  0600 under a fresh name, then renamed into place;
* an entry is served only if all of it is valid: at most :data:`MAX_ENTRY_BYTES`, this format
  version, the scope's provider and registry, exactly the auth keys the scope names, and a finite
  expiry more than :data:`SAFETY_MARGIN_SECONDS` and at most :data:`MAX_VALIDITY_SECONDS` away.
  Anything else is ignored (said at -v=1) and replaced by the next fetch;
* a lock file per key (``flock``) makes concurrent execs for the same key do **one** cloud call
  while the others wait (within the deadline) and read its result. A fresh entry is served
  without taking the lock (entries are renamed into place whole);
* credentials without a known expiry and service-account-token requests are never stored; no cache
  problem ever fails a request (the plugin runs uncached and says so).

Nothing here imports a cloud SDK: a cache hit answers without loading one.
"""

from __future__ import annotations

import errno
import stat
import time

from credprovider.errors import CredproviderError
from credprovider.runtime import _os, cjson
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final
from credprovider.runtime.api import CACHE_KEY_TYPES, AuthConfig
from credprovider.runtime.provider import (
    MAX_VALIDITY_SECONDS,
    CacheScope,
    Context,
    Credentials,
    sha256_hex,
)

if TYPE_CHECKING:
    pass

FORMAT_VERSION: Final = 1
SAFETY_MARGIN_SECONDS: Final = 300.0
MAX_ENTRY_BYTES: Final = 64 * 1024
MAX_SYMLINK_HOPS: Final = 40
LOCK_POLL_SECONDS: Final = 0.05
# Keep this much of the deadline to fetch uncached if another exec holds the lock too long.
LOCK_RESERVE_SECONDS: Final = 10.0
_DIRECTORY_FLAGS: Final = _os.O_RDONLY | _os.O_DIRECTORY | _os.O_NOFOLLOW | _os.O_CLOEXEC
_FILE_FLAGS: Final = _os.O_NOFOLLOW | _os.O_CLOEXEC | _os.O_NONBLOCK


class CacheUnavailable(CredproviderError):
    """The cache directory cannot be used safely; the plugin runs uncached."""


def scope_key(scope: CacheScope) -> str:
    """The file name stem of ``scope``'s entry and lock: a hash of what the answer is valid for."""
    material = cjson.dumps(
        [scope.provider, scope.registry, sorted(scope.identity.items())], compact=False
    )
    return sha256_hex(material.encode())[:40]


def _trusted_owner(uid: int) -> bool:
    return uid in (0, _os.geteuid())


def _check_parent(info: _os.stat_result, where: str) -> None:
    """A directory on the path: trusted owner, and nobody else can swap what is in it."""
    if not _trusted_owner(info.st_uid):
        raise CacheUnavailable(f"{where} on the cache path is owned by uid {info.st_uid}")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        raise CacheUnavailable(
            f"{where} on the cache path is writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):o})"
        )


def _open_directory(path: str, create: bool = True) -> int:
    """Walk ``path`` from ``/`` without following untrusted links; create missing parts (0700)
    when ``create``."""
    if not _os.isabs(path):
        try:
            path = _os.join(_os.getcwd(), path)
        except OSError as exc:  # the working directory was deleted (or is unreadable)
            raise CacheUnavailable(
                f"the cache directory {path} is relative and the working directory cannot be "
                f"found ({exc.strerror or exc}): give an absolute --cache-dir"
            ) from None
    pending = [part for part in path.split("/") if part not in ("", ".")]
    descriptor = _os.open("/", _DIRECTORY_FLAGS)
    where, hops = "/", 0
    try:
        while pending:
            _check_parent(_os.fstat(descriptor), where)
            name = pending.pop(0)
            if name == "..":
                raise CacheUnavailable("the cache path must not contain '..'")
            try:
                entry = _os.stat(name, dir_fd=descriptor, follow_symlinks=False)
            except FileNotFoundError:
                if not create:
                    raise CacheUnavailable(
                        f"the cache directory {path} does not exist (read-only: not created)"
                    ) from None
                try:  # noqa: SIM105 - contextlib is not on the exec path
                    _os.mkdir(name, 0o700, dir_fd=descriptor)
                except FileExistsError:  # a concurrent exec made it first
                    pass
                entry = _os.stat(name, dir_fd=descriptor, follow_symlinks=False)
            where = _os.join(where, name)
            if not _trusted_owner(entry.st_uid):
                raise CacheUnavailable(f"{where} is owned by uid {entry.st_uid}")
            if stat.S_ISLNK(entry.st_mode):
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise CacheUnavailable(f"too many symlinks on the cache path at {where}")
                target = _os.readlink(name, dir_fd=descriptor)
                pending = [p for p in target.split("/") if p not in ("", ".")] + pending
                if target.startswith("/"):
                    _os.close(descriptor)
                    descriptor, where = _os.open("/", _DIRECTORY_FLAGS), "/"
                continue
            child = _os.open(name, _DIRECTORY_FLAGS, dir_fd=descriptor)
            _os.close(descriptor)
            descriptor = child
    except OSError as exc:
        _os.close(descriptor)
        raise CacheUnavailable(
            f"cannot open the cache directory {path}: {exc.strerror or exc}"
        ) from None
    except CacheUnavailable:
        _os.close(descriptor)
        raise
    return descriptor


class CacheDir:
    """The cache directory, opened once and checked on its descriptor."""

    def __init__(self, path: str, create: bool = True) -> None:
        self.path = path
        self.fd = _open_directory(path, create)
        info = _os.fstat(self.fd)
        if info.st_uid != _os.geteuid():
            self.close()
            raise CacheUnavailable(
                f"the cache directory {path} is not owned by this user (uid "
                f"{_os.geteuid()}): refusing to use it"
            )
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            self.close()
            raise CacheUnavailable(
                f"the cache directory {path} is writable by group or others "
                f"(mode {stat.S_IMODE(info.st_mode):o}): refusing to use it; chmod 700 it"
            )

    def open_file(self, name: str, flags: int, mode: int = 0o600) -> int:
        """``name`` in this directory, never through a link; a regular file of this user only."""
        descriptor = _os.open(name, flags | _FILE_FLAGS, mode, dir_fd=self.fd)
        info = _os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != _os.geteuid():
            _os.close(descriptor)
            raise OSError(errno.EPERM, f"{name} is not a regular file of this user")
        return descriptor

    def close(self) -> None:
        if self.fd >= 0:
            _os.close(self.fd)
            self.fd = -1


def open_cache(directory: str, create: bool = True) -> CacheDir:
    """Open (creating it 0700 when ``create``) and check the cache directory;
    :class:`CacheUnavailable` if unsafe or, not to be created, missing."""
    return CacheDir(directory, create)


def _encode(scope: CacheScope, creds: Credentials, now: float) -> bytes:
    return cjson.dumps(
        {
            "version": FORMAT_VERSION,
            "provider": scope.provider,
            "registry": scope.registry,
            "writtenAt": now,
            "expiresAt": creds.expires_at,
            "cacheKeyType": creds.cache_key_type,
            "auth": {
                key: {"username": entry.username, "password": entry.password}
                for key, entry in creds.auth.items()
            },
        },
        compact=False,
    ).encode()


def decode_entry(data: bytes, scope: CacheScope, now: float) -> Credentials | str:
    """The stored credentials if every part of the entry is valid for ``scope`` at ``now``; else
    what is wrong with it."""
    try:
        obj: Any = cjson.loads(data.decode("utf-8"), parse_constant=cjson.reject_constant)
    except (ValueError, RecursionError):
        return "not JSON"
    if not isinstance(obj, dict) or obj.get("version") != FORMAT_VERSION:
        return "another format version"
    if (obj.get("provider"), obj.get("registry")) != (scope.provider, scope.registry):
        return "written for another provider or registry"
    expires_at = obj.get("expiresAt")
    if isinstance(expires_at, bool) or not isinstance(expires_at, int | float):
        return "no expiry"
    remaining = expires_at - now
    if not SAFETY_MARGIN_SECONDS < remaining <= MAX_VALIDITY_SECONDS:  # False for NaN too
        return "expired, expiring, or valid for longer than any credential is"
    written = obj.get("writtenAt")
    if isinstance(written, int | float) and not written <= now + SAFETY_MARGIN_SECONDS:
        # the clock went back since: its lifetime, counted from now, would be made up
        return "written later than now (the clock went back)"
    if obj.get("cacheKeyType") not in CACHE_KEY_TYPES:
        return "an unknown cacheKeyType"
    auth_obj = obj.get("auth")
    if not isinstance(auth_obj, dict) or sorted(auth_obj) != sorted(scope.keys):
        return "auth keys other than the registry's"
    auth = {}
    for key, entry in auth_obj.items():
        if not isinstance(entry, dict):
            return "a malformed auth entry"
        username, password = entry.get("username"), entry.get("password")
        if not isinstance(username, str) or not isinstance(password, str) or not password:
            return "a malformed auth entry"
        auth[key] = AuthConfig(username, password)
    return Credentials(auth=auth, cache_key_type=obj["cacheKeyType"], expires_at=float(expires_at))


class CacheEntry:
    """One key's file: loaded with or without its lock, stored only while holding it."""

    def __init__(self, directory: CacheDir, scope: CacheScope) -> None:
        self.directory = directory
        self.scope = scope
        self.name = f"{scope_key(scope)}.json"
        self.path = _os.join(directory.path, self.name)
        self.problem = ""  # why the last load served nothing, if there was a file

    def load(self, now: float) -> Credentials | None:
        """Fresh, valid credentials, or ``None`` (:attr:`problem` then says why, if not missing)."""
        self.problem = ""
        try:
            descriptor = self.directory.open_file(self.name, _os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.problem = f"cannot be read ({exc.strerror or exc})"
            return None
        try:
            data = _os.read(descriptor, MAX_ENTRY_BYTES + 1)
        except OSError as exc:
            self.problem = f"cannot be read ({exc.strerror or exc})"
            return None
        finally:
            _os.close(descriptor)
        if len(data) > MAX_ENTRY_BYTES:
            self.problem = f"larger than {MAX_ENTRY_BYTES} bytes"
            return None
        decoded = decode_entry(data, self.scope, now)
        if isinstance(decoded, str):
            self.problem = decoded
            return None
        return decoded

    def store(self, creds: Credentials, now: float) -> bool:
        """Write atomically with mode 0600; only credentials with a known, long enough expiry."""
        if creds.expires_at is None or creds.cache_duration is not None:
            return False  # no expiry, or an explicit override (e.g. KUBE_SIDECAR_*)
        data = _encode(self.scope, creds, now)
        if isinstance(decode_entry(data, self.scope, now), str):
            return False  # expiring soon, or not valid for its scope: not worth keeping
        temp = f".tmp-{_os.getpid()}-{_os.urandom(6).hex()}"
        descriptor = self.directory.open_file(temp, _os.O_WRONLY | _os.O_CREAT | _os.O_EXCL)
        try:
            with open(descriptor, "wb") as handle:
                handle.write(data)
                handle.flush()
                _os.fsync(handle.fileno())
            dfd = self.directory.fd
            try:
                _os.replace(temp, self.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except IsADirectoryError:  # something made a directory of that name: only if empty
                _os.rmdir(self.name, dir_fd=dfd)
                _os.replace(temp, self.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:  # noqa: SIM105 - contextlib is not on the exec path
                _os.unlink(temp, dir_fd=self.directory.fd)
            except OSError:
                pass
            raise
        return True


class KeyLock:
    """The per-key ``flock``: held while checking, fetching and storing one registry's answer."""

    def __init__(self, directory: CacheDir, scope: CacheScope) -> None:
        self.directory = directory
        self.scope = scope
        self._descriptor: int | None = None

    def acquire(self, ctx: Context) -> CacheEntry | None:
        """Wait for the lock within the deadline; ``None`` if another exec keeps it too long."""
        import fcntl  # a cache hit reads without the lock

        descriptor = self.directory.open_file(
            f"{scope_key(self.scope)}.lock", _os.O_RDWR | _os.O_CREAT
        )
        self._descriptor = descriptor
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    raise
            if ctx.deadline.remaining() <= LOCK_RESERVE_SECONDS:
                ctx.log.v(
                    1,
                    f"cache: another exec held the lock for {time.monotonic() - started:.1f}s:"
                    " fetching without the cache",
                )
                return None
            time.sleep(LOCK_POLL_SECONDS)
        waited = time.monotonic() - started
        if waited > LOCK_POLL_SECONDS:
            ctx.log.v(1, f"cache: waited {waited:.2f}s for another exec of the same registry")
        return CacheEntry(self.directory, self.scope)

    def release(self) -> None:
        if self._descriptor is not None:
            _os.close(self._descriptor)  # closing releases the flock
            self._descriptor = None

"""The opt-in persistent credential cache shared by concurrent plugin execs on a node. Stdlib only.

Enabled with ``--cache-dir DIR`` or ``CREDPROVIDER_CACHE_DIR``. One JSON file per (provider, registry,
identity) holds the credentials and their expiry:

* the directory is created 0700 and refused (warning, uncached) when it is group/world-writable or
  not owned by the current user; files are created 0600 and replaced atomically (temp file + rename);
* a lock file per key (``flock``) makes concurrent execs for the same key do **one** cloud call while
  the others wait (within the deadline) and read its result;
* an entry is served only while more than :data:`SAFETY_MARGIN_SECONDS` of validity remain, and the
  served ``cacheDuration`` follows the remaining validity;
* credentials without a known expiry and service-account-token requests are never stored;
* a corrupt, truncated or foreign-version file is ignored and replaced; no cache failure ever fails
  a request (the plugin runs uncached and says so at -v=1).

Nothing here imports a cloud SDK: a cache hit answers without loading one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from credprovider.api import CACHE_KEY_TYPES, AuthConfig
from credprovider.plugin import Context, Credentials

FORMAT_VERSION: Final = 1
SAFETY_MARGIN_SECONDS: Final = 300.0
LOCK_POLL_SECONDS: Final = 0.05
# Keep this much of the deadline to fetch uncached if another exec holds the lock too long.
LOCK_RESERVE_SECONDS: Final = 10.0


class CacheUnavailable(Exception):
    """The cache directory cannot be used safely; the plugin runs uncached."""


class CacheScope(NamedTuple):
    """What a cached answer is valid for. ``identity`` must not contain secrets."""

    provider: str
    registry: str
    identity: Mapping[str, str]

    @property
    def key(self) -> str:
        material = json.dumps([self.provider, self.registry, sorted(self.identity.items())])
        return sha256_hex(material.encode())[:40]


def sha256_hex(data: bytes) -> str:
    """SHA-256 without loading OpenSSL on a cache hit (CPython's builtin module when present)."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]
    except ImportError:
        from hashlib import sha256
    return str(sha256(data).hexdigest())


def fingerprint_file(path: str) -> str:
    """A content hash of a file the identity depends on (``absent`` if it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            return sha256_hex(handle.read())[:32]
    except OSError:
        return "absent"


def open_cache(directory: str) -> str:
    """Create (0700) or check the cache directory; raise :class:`CacheUnavailable` if unsafe."""
    path = directory
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.stat(path)
    except OSError as exc:
        raise CacheUnavailable(
            f"cannot create the cache directory {path}: {exc.strerror}"
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise CacheUnavailable(f"{path} is not a directory")
    if info.st_uid != os.geteuid():
        raise CacheUnavailable(
            f"the cache directory {path} is not owned by this user (uid "
            f"{os.geteuid()}): refusing to use it"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheUnavailable(
            f"the cache directory {path} is writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):o}): refusing to use it; chmod 700 it"
        )
    return path


def _encode(scope: CacheScope, creds: Credentials, now: float) -> bytes:
    return json.dumps(
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
        }
    ).encode()


def _decode(data: bytes, scope: CacheScope) -> Credentials | None:
    """The stored credentials, or ``None`` for anything foreign, corrupt or for another scope."""
    try:
        obj: Any = json.loads(data)
        if not isinstance(obj, dict) or obj.get("version") != FORMAT_VERSION:
            return None
        if (obj.get("provider"), obj.get("registry")) != (scope.provider, scope.registry):
            return None
        expires_at = obj["expiresAt"]
        key_type = obj["cacheKeyType"]
        auth_obj = obj["auth"]
        if not isinstance(expires_at, int | float) or key_type not in CACHE_KEY_TYPES:
            return None
        if not isinstance(auth_obj, dict):
            return None
        auth = {}
        for key, entry in auth_obj.items():
            username, password = entry["username"], entry["password"]
            if not isinstance(username, str) or not isinstance(password, str):
                return None
            auth[str(key)] = AuthConfig(username, password)
    except (ValueError, KeyError, TypeError):
        return None
    return Credentials(auth=auth, cache_key_type=key_type, expires_at=float(expires_at))


class CacheEntry:
    """One key's file, used while holding its lock."""

    def __init__(self, directory: str, scope: CacheScope) -> None:
        self.scope = scope
        self.path = os.path.join(directory, f"{scope.key}.json")
        self.name = os.path.basename(self.path)

    def load(self, now: float) -> Credentials | None:
        """Fresh credentials (more than the safety margin left), or ``None``."""
        try:
            with open(self.path, "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        creds = _decode(data, self.scope)
        if creds is None or creds.expires_at is None:
            return None
        if creds.expires_at - now <= SAFETY_MARGIN_SECONDS:
            return None
        return creds

    def store(self, creds: Credentials, now: float) -> bool:
        """Write atomically with mode 0600; only credentials with a known, long enough expiry."""
        if creds.expires_at is None or creds.expires_at - now <= SAFETY_MARGIN_SECONDS:
            return False
        if creds.cache_duration is not None:
            return False  # an explicit override (e.g. KUBE_SIDECAR_*): not a property of the token
        import tempfile  # only when storing: a cache hit does not need it

        descriptor, temp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(self.path))
        try:
            os.fchmod(descriptor, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(_encode(self.scope, creds, now))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        return True


class KeyLock:
    """The per-key ``flock``: held while checking, fetching and storing one registry's answer."""

    def __init__(self, directory: str, scope: CacheScope) -> None:
        self.directory = directory
        self.scope = scope
        self._descriptor: int | None = None

    def acquire(self, ctx: Context) -> CacheEntry | None:
        """Wait for the lock within the deadline; ``None`` if another exec keeps it too long."""
        lock_path = os.path.join(self.directory, f"{self.scope.key}.lock")
        descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
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
            os.close(self._descriptor)  # closing releases the flock
            self._descriptor = None

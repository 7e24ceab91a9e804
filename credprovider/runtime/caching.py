"""The persistent cache as a decorator: :func:`with_cache` puts any provider behind it, or, with
caching off, hands the provider back unchanged (the null cache), so no caller branches on it.

Concurrent execs for the same registry and identity wait on one lock, so one cloud call serves them
all. Cache problems never fail a request: the plugin then runs uncached and says so.
"""

from __future__ import annotations

from credprovider.runtime._typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from credprovider.runtime.api import CredentialProviderRequest
    from credprovider.runtime.cachestore import CacheDir, CacheScope
    from credprovider.runtime.provider import Context, Credentials, Provider


def with_cache(provider: Provider, cache_dir: str | None, read_only: bool = False) -> Provider:
    """``provider`` answered through the cache in ``cache_dir``; ``provider`` itself when off.
    ``read_only``: a fresh entry is served, but nothing is created, locked or stored (``credprovider
    get`` runs plugins so: a diagnosis changes nothing on the node)."""
    return CachingProvider(provider, cache_dir, read_only) if cache_dir else provider


class CachingProvider:
    """Answers from the cache when an entry is fresh, else asks the provider and stores its answer.

    Only what the provider's ``cache_scope`` names is cached (a registry and an identity, no
    secrets); a ``None`` scope, and every service-account-token request, go to the provider.
    """

    def __init__(self, provider: Provider, cache_dir: str, read_only: bool = False) -> None:
        self._provider = provider
        self._cache_dir = cache_dir
        self._read_only = read_only

    def cache_scope(self, request: CredentialProviderRequest, ctx: Context) -> CacheScope | None:
        return self._provider.cache_scope(request, ctx)

    def get_credentials(self, request: CredentialProviderRequest, ctx: Context) -> Credentials:
        def fetch() -> Credentials:
            return self._provider.get_credentials(request, ctx)

        if request.service_account_token:
            ctx.log.v(
                1, "cache: not used for service account token requests (the kubelet caches those)"
            )
            return fetch()
        from credprovider.runtime import cachestore as cache

        try:
            directory = cache.open_cache(self._cache_dir, create=not self._read_only)
        except cache.CacheUnavailable as exc:
            ctx.log.warning(f"{exc}: running uncached")
            return fetch()
        try:
            scope = self._provider.cache_scope(request, ctx)
            if scope is None:
                return fetch()
            if self._read_only:
                return _read_only(directory, scope, fetch, ctx)
            return _through_cache(directory, scope, fetch, ctx)
        finally:
            directory.close()


def _read_only(
    directory: CacheDir, scope: CacheScope, fetch: Callable[[], Credentials], ctx: Context
) -> Credentials:
    """A fresh entry, else the provider's answer, stored nowhere."""
    from credprovider.runtime.cachestore import CacheEntry

    entry = CacheEntry(directory, scope)
    hit = entry.load(ctx.now())
    if hit is not None:
        ctx.log.v(1, f"cache: hit for {scope.registry} ({entry.name}); read-only")
        return hit
    ctx.log.v(1, f"cache: no fresh entry for {scope.registry}; read-only: nothing is stored")
    return fetch()


def _through_cache(
    directory: CacheDir, scope: CacheScope, fetch: Callable[[], Credentials], ctx: Context
) -> Credentials:
    """Serve ``scope`` from ``directory``, or fetch and store it under its lock.

    A fresh entry is read without the lock (entries are renamed into place whole, so a reader sees
    an old one or a new one, never part of one): a cache hit takes no lock. Otherwise the lock is
    taken and the entry read again, since another exec may have stored it meanwhile.
    """
    from credprovider.runtime.cachestore import CacheEntry, KeyLock

    unlocked = CacheEntry(directory, scope)
    hit = unlocked.load(ctx.now())
    if hit is not None:
        ctx.log.v(1, f"cache: hit for {scope.registry} ({unlocked.name})")
        return hit
    lock = KeyLock(directory, scope)
    try:
        entry = lock.acquire(ctx)
    except OSError as exc:
        lock.release()
        ctx.log.warning(f"cache: cannot lock in {directory.path}: {exc}: running uncached")
        return fetch()
    try:
        if entry is None:
            return fetch()
        hit = entry.load(ctx.now())
        if hit is not None:
            ctx.log.v(1, f"cache: hit for {scope.registry} ({entry.name})")
            return hit
        if entry.problem:
            ctx.log.v(1, f"cache: ignoring {entry.name}: {entry.problem}; fetching anew")
        ctx.deadline.phase = "getting credentials (cache miss)"
        creds = fetch()
        try:
            if entry.store(creds, ctx.now()):
                ctx.log.v(1, f"cache: stored {scope.registry} in {entry.name}")
        except OSError as exc:
            ctx.log.warning(f"cache: cannot write {entry.path}: {exc.strerror or exc}")
        return creds
    finally:
        lock.release()

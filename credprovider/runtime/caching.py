"""The persistent cache as a decorator: :func:`with_cache` puts any provider behind it, or, with
caching off, hands the provider back unchanged (the null cache), so no caller branches on it.

Concurrent execs for the same registry and identity wait on one lock, so one cloud call serves them
all. Cache problems never fail a request: the plugin then runs uncached and says so.
"""

from __future__ import annotations

from credprovider.runtime._typing import TYPE_CHECKING
from credprovider.runtime.cachestore import (
    CacheDir,
    CacheEntry,
    CacheUnavailable,
    KeyLock,
    open_cache,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from credprovider.runtime.api import CredentialProviderRequest
    from credprovider.runtime.imageref import ImageRef
    from credprovider.runtime.provider import CacheScope, Context, Credentials, Plan, Provider


def with_cache(
    provider: Provider, name: str, cache_dir: str | None, read_only: bool = False
) -> Provider:
    """``provider`` (plugin ``name``) answered through the cache in ``cache_dir``; ``provider``
    itself when off. ``read_only``: a fresh entry is served, but nothing is created, locked or
    stored (``credprovider get`` runs plugins so: a diagnosis changes nothing on the node)."""
    return CachingProvider(provider, name, cache_dir, read_only) if cache_dir else provider


class CachingProvider:
    """Answers a plan from the cache when its entry is fresh, else has the provider fulfil it and
    stores the answer.

    Only a plan with an identity is cached (under its scope: the registry and that identity, no
    secrets); every service-account-token request goes to the provider. An answer whose keys are
    not the plan's is served but not stored, and said.
    """

    def __init__(
        self, provider: Provider, name: str, cache_dir: str, read_only: bool = False
    ) -> None:
        self._provider = provider
        self._name = name
        self._cache_dir = cache_dir
        self._read_only = read_only

    def plan(self, image: ImageRef, request: CredentialProviderRequest, ctx: Context) -> Plan:
        return self._provider.plan(image, request, ctx)

    def fulfil(self, plan: Plan, request: CredentialProviderRequest, ctx: Context) -> Credentials:
        def fetch() -> Credentials:
            return self._provider.fulfil(plan, request, ctx)

        if request.service_account_token:
            ctx.log.v(
                1, "cache: not used for service account token requests (the kubelet caches those)"
            )
            return fetch()
        try:
            directory = open_cache(self._cache_dir, create=not self._read_only)
        except CacheUnavailable as exc:
            ctx.log.warning(f"{exc}: running uncached")
            return fetch()
        try:
            scope = plan.cache_scope(self._name)
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
        if creds.auth and sorted(creds.auth) != sorted(scope.keys):
            ctx.log.warning(
                f"cache: the answer's keys {sorted(creds.auth)} are not the plan's "
                f"{sorted(scope.keys)}: served, not stored"
            )
            return creds
        try:
            if entry.store(creds, ctx.now()):
                ctx.log.v(1, f"cache: stored {scope.registry} in {entry.name}")
        except OSError as exc:
            ctx.log.warning(f"cache: cannot write {entry.path}: {exc.strerror or exc}")
        return creds
    finally:
        lock.release()

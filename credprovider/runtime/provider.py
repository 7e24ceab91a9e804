"""The seam every cloud implements, and what crosses it: Credentials, Context, PluginSpec, and the
one cache policy that turns a credential's expiry into ``cacheDuration``."""

from __future__ import annotations

import time

from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple, Protocol
from credprovider.runtime.api import CACHE_KEY_REGISTRY
from credprovider.runtime.goformat import SECOND
from credprovider.runtime.redact import clip, scrub

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from credprovider.runtime.api import AuthConfig, CredentialProviderRequest
    from credprovider.runtime.cachestore import CacheScope
    from credprovider.runtime.deadline import Deadline
    from credprovider.runtime.log import Logger

# No registry credential lives this long; an expiry further away is not believed (see below).
MAX_VALIDITY_SECONDS: Final = 366 * 24 * 3600.0


DETAIL_LIMIT: Final = 300


def one_line(detail: object) -> str:
    """An SDK's error text as one line of at most :data:`DETAIL_LIMIT` characters: scrubbed first,
    then cut (a secret cut in half would no longer be recognised)."""
    return clip(" ".join(scrub(str(detail)).split()), DETAIL_LIMIT)


class Credentials(NamedTuple):
    """What a provider returns.

    ``expires_at`` (Unix seconds) of the shortest-lived credential drives ``cacheDuration`` through
    :func:`cache_duration_for`; an explicit ``cache_duration`` (nanoseconds) wins over it. With
    neither, ``cacheDuration`` is omitted and the kubelet applies the config's ``defaultCacheDuration``.
    """

    auth: Mapping[str, AuthConfig]
    cache_key_type: str = CACHE_KEY_REGISTRY
    expires_at: float | None = None
    cache_duration: int | None = None


def cache_duration_for(expires_at: float, now: float) -> int:
    """The one cache policy: half the remaining validity, in whole seconds (as nanoseconds).

    Half, because the kubelet keeps using a cached credential for the whole duration and the runtime
    may still be pulling with it afterwards; the margin also absorbs clock skew. A credential with
    less than 2 s left yields ``0`` ("do not cache") rather than an omitted duration, which would let
    the config default cache an expired token for hours. So does an expiry that is no time at all
    (NaN, infinite, or more than :data:`MAX_VALIDITY_SECONDS` away): whatever a server or a cache
    file claims, the answer is well-formed and never cached on a made-up lifetime.
    """
    remaining = expires_at - now
    if not 0 <= remaining <= MAX_VALIDITY_SECONDS:  # also false for NaN
        return 0
    return int(remaining // 2) * SECOND


class Context:
    """What a provider gets besides the request: deadline, logger, environment, clock."""

    def __init__(
        self,
        deadline: Deadline,
        log: Logger,
        environ: Mapping[str, str],
        now: Callable[[], float] = time.time,
    ) -> None:
        self.deadline = deadline
        self.log = log
        self.environ = environ
        self.now = now


class Provider(Protocol):
    """The seam each cloud implements.

    ``cache_scope`` says which registry and identity (no secrets) an answer for ``request`` would
    be for, as a :class:`credprovider.runtime.cachestore.CacheScope`, or ``None`` when it must not be cached. It
    must not import an SDK or fetch anything, so a cache hit stays light. ``get_credentials``
    fetches (and may call the cloud)."""

    def cache_scope(
        self, request: CredentialProviderRequest, ctx: Context
    ) -> CacheScope | None: ...

    def get_credentials(self, request: CredentialProviderRequest, ctx: Context) -> Credentials: ...


class PluginSpec(NamedTuple):
    """One plugin name: how to build its provider from its own arguments."""

    name: str
    summary: str
    build: Callable[[list[str], Context], Provider]
    arguments_help: str = ""

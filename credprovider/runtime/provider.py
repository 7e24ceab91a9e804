"""The seam every cloud implements, and what crosses it: the Plan a provider makes for one request,
the CacheScope it names, Credentials, Context, PluginSpec, and the one cache policy that turns a
credential's expiry into ``cacheDuration``."""

from __future__ import annotations

import time

from credprovider.runtime._os import is_process_environ
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol
from credprovider.runtime.api import CACHE_KEY_REGISTRY
from credprovider.runtime.excerpt import clip
from credprovider.runtime.goformat import SECOND
from credprovider.runtime.redact import scrub

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from credprovider.runtime.api import AuthConfig, CredentialProviderRequest
    from credprovider.runtime.deadline import Deadline
    from credprovider.runtime.imageref import ImageRef
    from credprovider.runtime.log import Logger

# No registry credential lives this long; an expiry further away is not believed (see below).
MAX_VALIDITY_SECONDS: Final = 366 * 24 * 3600.0


DETAIL_LIMIT: Final = 300


def one_line(detail: object) -> str:
    """An SDK's error text as one line of at most :data:`DETAIL_LIMIT` characters: scrubbed first,
    then cut (a secret cut in half would no longer be recognised)."""
    return clip(" ".join(scrub(str(detail)).split()), DETAIL_LIMIT)


# What a line says of an answer that had no body, where it would quote the body.
EMPTY_ANSWER: Final = "an empty answer"


def answer_text(text: str) -> str:
    """A failed answer's body (or what was read of it) as a line quotes it: :func:`one_line`, or
    :data:`EMPTY_ANSWER` for none ("HTTP 404: ; ..." said nothing)."""
    return one_line(text) or EMPTY_ANSWER


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
    """What a provider gets besides the request: deadline, logger, environment, clock.

    ``environ`` is the only environment a provider reads. The SDKs read ``os.environ`` instead (at
    import and at call time), so :meth:`sdk_environment` makes the process environment this one
    while a provider fetches; in a plugin's exec they are the same object and nothing changes.
    """

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

    def sdk_environment(self) -> SdkEnvironment:
        """A context manager within which ``os.environ`` is :attr:`environ` (see the class)."""
        return SdkEnvironment(self.environ)


class SdkEnvironment:
    """``os.environ`` (and the C environment a child process inherits) replaced by ``environ``
    for the ``with`` block, then put back as it was. A no-op when ``environ`` is the process's own
    (``runtime._os.is_process_environ``).
    Process-wide: only one provider fetches at a time in a process (the runtime's worker thread)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self._restore: Callable[[], None] | None = None
        self._restores_seen = 0

    def __enter__(self) -> None:
        if is_process_environ(self._environ):
            return
        self._restore = environment_restorer(self._environ)
        self._restores_seen = _RESTORES[0]
        _replace_environ(self._environ)

    def __exit__(self, *_: object) -> None:
        # Not if it was put back meanwhile: the runtime does when it abandons a late fetch, and
        # what was set after that must not be undone when the fetch finally ends.
        if self._restore is not None and _RESTORES[0] == self._restores_seen:
            self._restore()
        self._restore = None


_RESTORES: Final = [0]  # how many times a replaced process environment was put back


def environment_restorer(environ: Mapping[str, str]) -> Callable[[], None]:
    """For a context's ``environ``: a function putting ``os.environ`` back as it is now; a no-op
    when ``environ`` is the process's own (a plugin's exec, where nothing is ever replaced)."""
    if is_process_environ(environ):
        return _nothing
    import os  # only where a context's environment is not the process's (the tool's dry runs)

    saved = dict(os.environ)

    def restore() -> None:
        _RESTORES[0] += 1
        _replace_environ(saved)

    return restore


def _nothing() -> None:
    pass


def _replace_environ(wanted: Mapping[str, str]) -> None:
    import os

    for name in [name for name in os.environ if name not in wanted]:
        del os.environ[name]
    for name, value in wanted.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


class CacheScope(NamedTuple):
    """What a cached answer is valid for. ``identity`` must not contain secrets; ``keys`` are the
    auth keys every answer for this scope has (an entry with other keys is never served)."""

    provider: str
    registry: str
    identity: Mapping[str, str]
    keys: tuple[str, ...]


class Plan(NamedTuple):
    """What a provider will do for one request, decided before anything is fetched.

    ``image``: the request's image, parsed once by the runtime. ``keys``: the auth keys an answer
    with credentials carries. ``identity``: what picks the cloud identity (settings and file
    fingerprints, never a secret), or ``None`` when an answer must never be cached. ``detail``: the
    provider's own decisions (a login server, a mirror), handed back to :meth:`Provider.fulfil` so
    that nothing is worked out twice.
    """

    image: ImageRef
    keys: tuple[str, ...]
    identity: Mapping[str, str] | None = None
    detail: Any = None

    def cache_scope(self, provider: str) -> CacheScope | None:
        """The cache scope of this plan's answer for plugin ``provider``; ``None``: not cached."""
        if self.identity is None:
            return None
        return CacheScope(provider, self.image.registry, self.identity, self.keys)


def sha256_hex(data: bytes) -> str:
    """SHA-256 without loading OpenSSL on a cache hit (CPython's builtin module when present)."""
    try:
        from _sha256 import sha256  # type: ignore[import-not-found]
    except ImportError:
        from hashlib import sha256
    return str(sha256(data).hexdigest())


def fingerprint_file(path: str) -> str:
    """A content hash of a file a plan's identity depends on (``absent`` if it cannot be read)."""
    from credprovider.runtime.nodefile import read_node_file

    try:
        return sha256_hex(read_node_file(path))[:32]
    except OSError:
        return "absent"


class Provider(Protocol):
    """The seam each cloud implements: one plan per request, then its fulfilment.

    ``plan`` is pure: it imports no SDK, reads no secret and fetches nothing, so a cache hit (which
    only plans) stays light. ``fulfil`` gets the credentials the plan describes, and may call the
    cloud; an answer with credentials carries exactly ``plan.keys`` (the runtime checks)."""

    def plan(self, image: ImageRef, request: CredentialProviderRequest, ctx: Context) -> Plan: ...

    def fulfil(
        self, plan: Plan, request: CredentialProviderRequest, ctx: Context
    ) -> Credentials: ...


class PluginSpec(NamedTuple):
    """One plugin name: how to build its provider from its own arguments; ``check``: what the
    tool's start check (``--version`` with the args and ``CREDPROVIDER_START_CHECK``: validate
    --bin-dir, install, the agent) proves beyond building it: the settings a pull reads, read
    offline (default: that it builds)."""

    name: str
    summary: str
    build: Callable[[list[str], Context], Provider]
    arguments_help: str = ""
    check: Callable[[list[str], Context], None] | None = None

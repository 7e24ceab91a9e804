"""What to do, for the failures every cloud shares: the second half of a plugin's one error line
(docs/clouds.md, "How a plugin runs": one line saying what failed and what to check). A cloud's
own advice (a metadata server that does not resolve off its cloud, an IMDS hop limit) lives with
that cloud."""

from __future__ import annotations

from credprovider.runtime._typing import Final

# A 5xx or 429 after the retries the deadline allowed.
RETRIES_NEXT_PULL: Final = (
    "the service is failing or throttling; the kubelet retries on the next pull (if it persists, "
    "check the service's status)"
)
# An answer that is not the service's (an HTML page, cut JSON, a missing field).
NOT_THE_SERVICE: Final = (
    "something other than the service may have answered: check HTTPS_PROXY, HTTP_PROXY and NO_PROXY "
    "in the provider's env"
)


def unreachable(endpoint: str) -> str:
    """For an endpoint the plugin could not reach (refused, reset, timed out)."""
    return (
        f"check that {endpoint} is reachable from this node (a firewall, a proxy: HTTPS_PROXY and "
        "NO_PROXY in the provider's env)"
    )


def unreachable_url(url: str) -> str:
    """:func:`unreachable` for the host (and port) of ``url``, a ``scheme://host/...`` URL."""
    return unreachable(url_host(url))


def url_host(url: str) -> str:
    """The host (and port) of ``url``, a ``scheme://host/...`` URL, as written."""
    return url.split("://", 1)[-1].split("/", 1)[0]


def name_not_resolved(exc: BaseException) -> bool:
    """Whether an HTTP failure was the host name not resolving (not a refused or silent host): a
    ``socket.gaierror`` among its causes (an SDK's transport wraps it three or four times over;
    urllib3's ``NameResolutionError`` in requests' ``ConnectionError`` in google-auth's)."""
    import socket

    cause = exc.__cause__ or exc.__context__
    for _ in range(16):  # a chain is short; a cycle (an error made its own cause) is not followed
        if cause is None or isinstance(cause, socket.gaierror):
            break
        cause = cause.__cause__ or cause.__context__
    return isinstance(cause, socket.gaierror)


def transport_reason(exc: BaseException) -> str:
    """One line saying why an HTTP call through an SDK's transport failed: the OS's own reason
    where there is one (:func:`transport_cause`), else the error's text."""
    from credprovider.runtime.provider import one_line

    return one_line(transport_cause(exc) or exc)


def transport_cause(exc: BaseException) -> str | None:
    """The OS's own reason an HTTP call failed (``ConnectionRefusedError: [Errno 111] Connection
    refused``, ``gaierror: [Errno -2] Name or service not known``): the innermost ``OSError`` of
    the chain an SDK's transport wraps it in (azure-core over requests over urllib3 repeats the
    whole pool's repr in each layer's text, as google-auth over requests does); ``None`` without
    one."""
    found: BaseException | None = None
    cause: BaseException | None = exc
    for _ in range(16):  # as above: short chains, no cycle followed
        if cause is None:
            break
        if isinstance(cause, OSError) and type(cause).__module__ in ("builtins", "socket", "ssl"):
            found = cause
        # azure-core raises its transport error outside the except block: the cause is held
        inner = getattr(cause, "inner_exception", None)
        cause = cause.__cause__ or cause.__context__ or _exception(inner)
    return None if found is None else f"{type(found).__name__}: {found}"


def _exception(value: object) -> BaseException | None:
    return value if isinstance(value, BaseException) else None

"""A small stdlib HTTP client for the calls a plugin makes itself (metadata servers, the ECR API,
the ACR exchange).

An SDK's transport stack (requests, urllib3 and the cryptography it pulls in) costs 100 ms or more
per exec, and even ``http.client`` imports ``email`` and ``ssl``: this module speaks HTTP/1.1 itself
over ``socket``, with ``ssl`` only for an https URL. ``http://`` is for the link-local
metadata servers; ``https://`` only when the caller passes the TLS context (certificate checks on),
and never through a proxy: callers leave proxied setups to the SDKs. No redirect is followed, every
call has a timeout and the body read is capped.

:func:`exchange` is the one transport seam every such call goes through: a :data:`Send` (this
client by default, or an SDK's when a proxy is set: :func:`proxy_setting` is the one proxy rule),
each attempt's timeout cut to the deadline, and bounded retries on a failed exchange or a retryable
answer. Callers check the status and say what failed. HTTP/1.1's wire format (the URL split, the
request head, the answer's framing and limits) and :class:`HttpError` are
:mod:`credprovider.runtime.http1`'s.
"""

from __future__ import annotations

from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple
from credprovider.runtime.answer import MAX_BODY_BYTES, BadAnswer, decoded
from credprovider.runtime.http1 import DEFAULT_PORTS as DEFAULT_PORTS
from credprovider.runtime.http1 import HttpError as HttpError
from credprovider.runtime.http1 import UnusableUrl as UnusableUrl
from credprovider.runtime.http1 import read_body, read_head, request_head
from credprovider.runtime.http1 import split_authority as split_authority
from credprovider.runtime.http1 import split_http_url as split_http_url

if TYPE_CHECKING:
    import socket
    import ssl
    from collections.abc import Callable, Collection, Mapping
    from typing import Any, BinaryIO

    from credprovider.runtime.provider import Context
    from credprovider.runtime.retry import Throttle

    # (method, url, headers, body, timeout) -> the whole answer; raises HttpError when none came
    Send = Callable[[str, str, Mapping[str, str], bytes | None, float], "HttpResponse"]

# Any of these set means a proxy may be wanted: this client never uses one, so callers hand such
# setups to the SDK (requests, botocore), which honours them with NO_PROXY.
PROXY_ENV: Final = (
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
)


class HttpResponse(NamedTuple):
    """A complete answer: status, headers (lower-cased names; the last of a repeated one) and
    body, and every header field in order (``fields``) for a header that may repeat."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    fields: tuple[tuple[str, str], ...] = ()

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")

    def header_values(self, name: str) -> list[str]:
        wanted = name.lower()
        return [value for field, value in self.fields if field.lower() == wanted]

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class NotHttps(UnusableUrl):
    """A credential would go over plain http:// to a host that is not this machine."""


def credential_endpoint(url: str) -> tuple[str, str, str]:
    """``url`` split as :func:`split_http_url` does, if a credential may be sent to it: https://,
    or http:// to a loopback address; a host, and no query, fragment or userinfo. Else
    :class:`HttpError` saying what is wrong (:class:`NotHttps` for the scheme), for the caller to
    name its flag."""
    from credprovider.runtime.loopback import is_loopback_address

    scheme, _, rest = url.partition("://")
    if scheme.lower() not in ("http", "https"):
        raise NotHttps("must be an https:// URL")
    try:
        scheme, authority, target = split_http_url(url, allow_https=True)
        host, _ = split_authority(authority, scheme)
    except HttpError:
        host, authority, target = "", "", ""
    if not host or "?" in rest or "#" in rest:
        raise HttpError("is not a URL like https://host[:port][/path]")
    if scheme == "http" and not is_loopback_address(host):
        raise NotHttps("must be an https:// URL")
    return scheme, authority, target


def request(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    body: bytes | None = None,
    tls: ssl.SSLContext | None = None,
    max_body: int = MAX_BODY_BYTES,
    within: float | None = None,
    connect_to: str | None = None,
) -> HttpResponse:
    """One request on a fresh connection; raises :class:`HttpError` when no full answer arrives.
    ``timeout`` bounds each wait on the network and, unless ``within`` gives another bound, the
    whole exchange from the connect on: a server that drip-feeds its headers or body, each byte
    within the wait, ends it then. ``connect_to`` (an address) is dialled
    instead of the URL's host, which still names the server in ``Host`` and TLS (SNI and the
    certificate check): AKS identity bindings reach their endpoint through the API server's IP.

    ``https://`` URLs need ``tls`` (the caller's verified context); ``http://`` ones never use it.
    HTTP/1.1 is spoken here over ``socket`` (and ``ssl`` only for https): ``http.client`` would
    import ``email`` and ``ssl`` on every cache miss, plain-HTTP metadata calls included.
    """
    import socket
    import time

    scheme, authority, target = split_http_url(url, allow_https=tls is not None)
    host, port = split_authority(authority, scheme)
    default = port == DEFAULT_PORTS[scheme]
    shown_host = f"[{host}]" if ":" in host else host
    head = request_head(
        method, shown_host if default else f"{shown_host}:{port}", target, headers, body
    )
    # An ASCII host goes to getaddrinfo (and ssl) as bytes: CPython (<= 3.12) encodes a str host
    # with the "idna" codec, whose import (with stringprep, unicodedata and re) costs a miss
    # milliseconds.
    address = host.encode("ascii") if host.isascii() else host
    dialled = address if connect_to is None else connect_to.encode("ascii")
    bound = timeout if within is None else within
    started = time.monotonic()
    try:
        connection = socket.create_connection((dialled, port), timeout=min(timeout, bound))  # type: ignore[arg-type]
    except (OSError, ValueError) as exc:
        raise HttpError(_describe(exc)) from exc
    try:
        if tls is not None and scheme == "https":
            # bytes for the same reason: ssl encodes a str server name with "idna" too
            connection = tls.wrap_socket(connection, server_hostname=address)
        connection.sendall(head + (body or b""))
        left = bound - (time.monotonic() - started)
        with _reader(connection, timeout, left, bound) as reader:
            status, fields = read_head(reader)
            data = read_body(reader, status, fields, method, max_body)
        headers = {name.lower(): value for name, value in fields}
        data = decoded(data, headers.get("content-encoding", ""), max_body)
        return HttpResponse(status, headers, data, fields)
    except HttpError:
        raise
    except BadAnswer as exc:
        raise exc.at(url) from None
    except (OSError, ValueError) as exc:
        raise HttpError(_describe(exc)) from exc
    finally:
        connection.close()


def _reader(connection: socket.socket, timeout: float, within: float, bound: float) -> BinaryIO:
    """The answer's bytes, each wait at most ``timeout`` and all of them within ``within``
    seconds from now (what is left of the exchange's ``bound``, said when it passes)."""
    import io
    import time

    deadline = time.monotonic() + within

    class _Bounded(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no whole answer within {bound:g}s")
            connection.settimeout(min(timeout, left))
            try:
                return connection.recv_into(buffer)
            except TimeoutError:
                if deadline - time.monotonic() <= 0:
                    raise TimeoutError(f"no whole answer within {bound:g}s") from None
                raise

    return io.BufferedReader(_Bounded())


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def worth_retrying(error: Exception) -> bool:
    """A failed exchange is retried; an answer past a cap is not (it would only come again), nor
    a URL that cannot be asked."""
    return isinstance(error, HttpError) and not isinstance(error, UnusableUrl)


def proxy_setting(environ: Mapping[str, str]) -> str | None:
    """The name of the first proxy variable that is set, if any (see :data:`PROXY_ENV`): the one
    rule by which a call leaves this client for an SDK's transport, which honours ``NO_PROXY``."""
    return next((name for name in PROXY_ENV if environ.get(name, "").strip()), None)


def get(
    url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    max_body: int = MAX_BODY_BYTES,
) -> HttpResponse:
    """One plain-HTTP ``GET`` (see :func:`request`)."""
    return request("GET", url, headers=headers, timeout=timeout, max_body=max_body)


def stdlib_send(tls: ssl.SSLContext | None = None, connect_to: str | None = None) -> Send:
    """This client as a :data:`Send` (``tls`` for https URLs; ``connect_to``: see
    :func:`request`)."""

    def send(
        method: str, url: str, headers: Mapping[str, str], body: bytes | None, timeout: float
    ) -> HttpResponse:
        return request(
            method, url, headers=headers, timeout=timeout, body=body, tls=tls, connect_to=connect_to
        )

    return send


def exchange(
    ctx: Context,
    method: str,
    url: str,
    *,
    what: str,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    send: Send | None = None,
    timeout_cap: float = 10.0,
    retry_statuses: Collection[int] | None = None,
    retry_answer: Callable[[HttpResponse], bool] | None = None,
    attempts: int = 3,
    throttled_answer: Callable[[HttpResponse], Throttle | None] | None = None,
) -> HttpResponse:
    """One call through ``send`` (this client by default), each attempt given at most
    ``timeout_cap`` seconds and never past the deadline; retried (bounded, see
    :func:`credprovider.runtime.retry.call_with_retries`) on a failed exchange or an answer with a
    status in ``retry_statuses`` (default: 408, 429 and 5xx) or for which ``retry_answer`` is true;
    an answer ``throttled_answer`` calls throttling (default: :func:`throttled`) is retried over
    the deadline instead.

    Returns the last answer, whatever its status; raises :class:`HttpError` if no answer came and
    :class:`~credprovider.runtime.answer.BadAnswer` (not retried) for one past a cap.
    """
    from credprovider.runtime.retry import RETRYABLE_STATUSES, call_with_retries

    chosen = send or stdlib_send()
    statuses = RETRYABLE_STATUSES if retry_statuses is None else retry_statuses
    return call_with_retries(
        lambda: chosen(method, url, headers or {}, body, ctx.deadline.timeout(timeout_cap)),
        ctx=ctx,
        what=what,
        retry_result=retry_answer or (lambda answer: answer.status in statuses),
        retry_error=worth_retrying,
        attempts=attempts,
        throttled_result=throttled_answer or throttled,
    )


def throttled(answer: HttpResponse) -> Throttle | None:
    """The answer of a service asking to slow down: HTTP 429, or a 503 with ``Retry-After``."""
    from credprovider.runtime.retry import throttle_of

    return throttle_of(answer.status, answer.header("retry-after"))

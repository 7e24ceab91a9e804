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
answer. Callers check the status and say what failed.
"""

from __future__ import annotations

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple
from credprovider.runtime.answer import MAX_BODY_BYTES, BadAnswer, decoded, too_large

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


class HttpError(CredproviderError, OSError):
    """The exchange itself failed: bad URL, connection, timeout or protocol. (An answer past a
    cap is :class:`~credprovider.runtime.answer.BadAnswer`: it came, and is not retried.)"""


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


def split_http_url(url: str, *, allow_https: bool = False) -> tuple[str, str, str]:
    """``http://host[:port]/path?query`` -> (``http``, ``host[:port]``, ``/path?query``)."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in (("http", "https") if allow_https else ("http",)):
        kinds = "http:// and https://" if allow_https else "http://"
        raise HttpError(f"only {kinds} URLs are supported here, not {url!r}")
    authority, slash, path = rest.partition("/")
    if not authority or "@" in authority:
        raise HttpError(f"{url!r} has no usable host")
    return scheme, authority, slash + path


# Limits on what a server may send before the body (http.client's own: 64 KiB lines, 100 fields).
MAX_LINE_BYTES: Final = 65536
MAX_HEADER_FIELDS: Final = 100
MAX_INTERIM_ANSWERS: Final = 10
DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_TOKEN_CHARACTERS: Final = frozenset(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


def split_authority(authority: str, scheme: str) -> tuple[str, int]:
    """``host[:port]`` or ``[v6]:port`` -> (host, port), the scheme's port when none is given."""
    host, port_text = authority, ""
    if authority.startswith("["):
        close = authority.find("]")
        after = authority[close + 1 :] if close > 0 else "?"
        if after and not after.startswith(":"):
            raise HttpError(f"{authority!r} is not a usable host")
        host, port_text = authority[1:close], after[1:]
    elif ":" in authority:
        host, _, port_text = authority.rpartition(":")
    if not host or (port_text and not (port_text.isdigit() and port_text.isascii())):
        raise HttpError(f"{authority!r} is not a usable host and port")
    port = int(port_text) if port_text else DEFAULT_PORTS[scheme]
    if not 0 < port < 65536:
        raise HttpError(f"{authority!r} has no usable port")
    return host, port


class NotHttps(HttpError):
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


def request_head(
    method: str, host_header: str, target: str, headers: Mapping[str, str], body: bytes | None
) -> bytes:
    """The request line and header fields; refuses anything that could split or smuggle a request
    (control characters or spaces in the target, non-token names, line breaks in values)."""
    if not method or not set(method) <= _TOKEN_CHARACTERS:
        raise HttpError(f"invalid method {method!r}")
    if not target.startswith("/") or any(ord(c) <= 0x20 or ord(c) >= 0x7F for c in target):
        raise HttpError("the URL has characters that cannot be sent in a request line")
    fields = [("Host", host_header), *headers.items(), ("Accept-Encoding", "identity")]
    if body is not None:
        fields.append(("Content-Length", str(len(body))))
    fields.append(("Connection", "close"))
    lines = [f"{method} {target} HTTP/1.1"]
    for name, value in fields:
        if not name or not set(name) <= _TOKEN_CHARACTERS:
            raise HttpError(f"invalid header name {name!r}")
        if any(c in value for c in "\r\n\0"):
            raise HttpError(f"the {name} header has a line break or NUL")
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _line(reader: BinaryIO, what: str) -> bytes:
    line = reader.readline(MAX_LINE_BYTES + 1)
    if len(line) > MAX_LINE_BYTES:
        raise HttpError(f"the {what} is longer than {MAX_LINE_BYTES} bytes")
    if not line:
        raise HttpError(f"the server closed the connection before the {what}")
    return line


def read_head(reader: BinaryIO) -> tuple[int, tuple[tuple[str, str], ...]]:
    """Status and header fields of the final answer (interim 1xx answers are skipped, at most
    :data:`MAX_INTERIM_ANSWERS` of them: a server sending ``100 Continue`` for ever is refused)."""
    for _ in range(MAX_INTERIM_ANSWERS + 1):
        status_line = _line(reader, "status line").decode("latin-1")
        version, _, rest = status_line.partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not (code.isdigit() and code.isascii()):
            raise HttpError(f"not an HTTP/1.x answer: {status_line.strip()[:80]!r}")
        fields: list[tuple[str, str]] = []
        while True:
            line = _line(reader, "header").decode("latin-1")
            if line in ("\r\n", "\n"):
                break
            if line[:1] in (" ", "\t") and fields:  # an obsolete folded continuation
                name, value = fields[-1]
                fields[-1] = (name, f"{value} {line.strip()}")
                continue
            name, colon, value = line.partition(":")
            if not colon or not name or not set(name) <= _TOKEN_CHARACTERS:
                raise HttpError(f"a malformed header line: {line.strip()[:80]!r}")
            fields.append((name, value.strip()))
            if len(fields) > MAX_HEADER_FIELDS:
                raise HttpError(f"more than {MAX_HEADER_FIELDS} header fields")
        if not 100 <= int(code) < 200 or int(code) == 101:
            return int(code), tuple(fields)
    raise HttpError(f"more than {MAX_INTERIM_ANSWERS} interim (1xx) answers")


def _exactly(reader: BinaryIO, count: int) -> bytes:
    data = reader.read(count)
    if len(data) != count:
        raise HttpError(f"the answer ended after {len(data)} of {count} bytes")
    return data


def read_body(
    reader: BinaryIO, status: int, fields: tuple[tuple[str, str], ...], method: str, max_body: int
) -> bytes:
    """The body, framed as the header says (chunked, Content-Length or to the end), capped
    (:class:`~credprovider.runtime.answer.BadAnswer` past ``max_body``)."""
    if method == "HEAD" or status in (204, 304):
        return b""
    values = {name.lower(): value for name, value in fields}
    if "chunked" in values.get("transfer-encoding", "").lower():
        chunks, total = [], 0
        while True:
            size_text = _line(reader, "chunk size").split(b";")[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise HttpError(f"a malformed chunk size: {size_text[:20]!r}") from None
            if size == 0:
                break
            total += size
            if size < 0 or total > max_body:
                raise BadAnswer(too_large(max_body))
            chunks.append(_exactly(reader, size))
            _exactly(reader, 2)  # the chunk's CRLF
        for _ in range(MAX_HEADER_FIELDS + 1):  # trailer fields, up to the blank line
            if _line(reader, "trailer") in (b"\r\n", b"\n"):
                return b"".join(chunks)
        raise HttpError(f"more than {MAX_HEADER_FIELDS} trailer fields")
    length_text = values.get("content-length")
    if length_text is not None:
        if not (length_text.isdigit() and length_text.isascii()):
            raise HttpError(f"a malformed Content-Length: {length_text[:20]!r}")
        if int(length_text) > max_body:
            raise BadAnswer(too_large(max_body))
        return _exactly(reader, int(length_text))
    data = reader.read(max_body + 1)
    if len(data) > max_body:
        raise BadAnswer(too_large(max_body))
    return data


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
    """A failed exchange is retried; an answer past a cap is not (it would only come again)."""
    return isinstance(error, HttpError)


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

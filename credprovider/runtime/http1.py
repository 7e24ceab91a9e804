"""HTTP/1.1 as :mod:`credprovider.runtime.http` speaks it: the URL split, the request head it
sends and the answer it reads, each held to ``http.client``'s own limits, and the one error for
an exchange that failed (:class:`HttpError`). Pure functions over bytes and a reader: the socket,
TLS, the deadline and retries are :mod:`credprovider.runtime.http`'s."""

from __future__ import annotations

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final
from credprovider.runtime.answer import BadAnswer, too_large
from credprovider.runtime.excerpt import quoted

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import BinaryIO


class HttpError(CredproviderError, OSError):
    """The exchange itself failed: bad URL, connection, timeout or protocol. (An answer past a
    cap is :class:`~credprovider.runtime.answer.BadAnswer`: it came, and is not retried.)"""


class UnusableUrl(HttpError):
    """The URL cannot be asked at all (no usable host or port, a scheme this client does not
    speak): the setting that named it is wrong, and no retry can help."""


def split_http_url(url: str, *, allow_https: bool = False) -> tuple[str, str, str]:
    """``http://host[:port]/path?query`` -> (``http``, ``host[:port]``, ``/path?query``)."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in (("http", "https") if allow_https else ("http",)):
        kinds = "http:// and https://" if allow_https else "http://"
        raise UnusableUrl(f"only {kinds} URLs are supported here, not {quoted(url)}")
    authority, slash, path = rest.partition("/")
    if not authority or "@" in authority:
        raise UnusableUrl(f"{quoted(url)} has no usable host")
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
            raise UnusableUrl(f"{quoted(authority)} is not a usable host")
        host, port_text = authority[1:close], after[1:]
    elif ":" in authority:
        host, _, port_text = authority.rpartition(":")
    # ASCII digits ("²" passes isdigit), and few of them (int() refuses 4,300 and more)
    if not host or (port_text and not (port_text.isdigit() and port_text.isascii())):
        raise UnusableUrl(f"{quoted(authority)} is not a usable host and port")
    port = int(port_text) if 0 < len(port_text) <= 5 else 0 if port_text else DEFAULT_PORTS[scheme]
    if not 0 < port < 65536:
        raise UnusableUrl(f"{quoted(authority)} has no usable port")
    return host, port


def request_head(
    method: str, host_header: str, target: str, headers: Mapping[str, str], body: bytes | None
) -> bytes:
    """The request line and header fields; refuses anything that could split or smuggle a request
    (control characters or spaces in the target, non-token names, line breaks in values)."""
    if not method or not set(method) <= _TOKEN_CHARACTERS:
        raise HttpError(f"invalid method {method!r}")
    if not target.startswith("/") or any(ord(c) <= 0x20 or ord(c) >= 0x7F for c in target):
        raise UnusableUrl("the URL has characters that cannot be sent in a request line")
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
        if len(length_text) > 18 or int(length_text) > max_body:  # int() refuses 4,300 digits
            raise BadAnswer(too_large(max_body))
        return _exactly(reader, int(length_text))
    data = reader.read(max_body + 1)
    if len(data) > max_body:
        raise BadAnswer(too_large(max_body))
    return data

"""credprovider/runtime/http.py and http1.py: the HTTP/1.1 the plugins speak themselves, parsed
from bytes (framing, limits, hostile answers) and against a loopback server (with and without TLS)."""

from __future__ import annotations

import io
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from credprovider.runtime import http, http1
from credprovider.runtime.answer import BadAnswer
from credprovider.runtime.deadline import Deadline
from credprovider.runtime.http import HttpError, NotHttps, credential_endpoint
from credprovider.runtime.log import Logger
from credprovider.runtime.provider import Context
from tests.reliability.redteam.rawserver import Answer, drip, drip_headers, raw_server


@pytest.mark.parametrize(
    ("authority", "scheme", "expected"),
    [
        ("169.254.169.254", "http", ("169.254.169.254", 80)),
        ("metadata.google.internal:8080", "http", ("metadata.google.internal", 8080)),
        ("api.ecr.us-east-1.amazonaws.com", "https", ("api.ecr.us-east-1.amazonaws.com", 443)),
        ("[::1]:8443", "https", ("::1", 8443)),
        ("[fd00:ec2::254]", "http", ("fd00:ec2::254", 80)),
        ("host:", "http", ("host", 80)),
    ],
)
def test_split_authority(authority: str, scheme: str, expected: tuple[str, int]) -> None:
    assert http1.split_authority(authority, scheme) == expected


@pytest.mark.parametrize(
    "authority",
    [
        "host:http",
        "host:0",
        "host:70000",
        ":80",
        "[::1",
        "[::1]x",
        "h:１",
        "h:\u00b2",
        "h:" + "9" * 5000,
    ],
)
def test_unusable_authorities(authority: str) -> None:
    with pytest.raises(HttpError) as caught:
        http1.split_authority(authority, "http")
    assert len(str(caught.value)) < 200  # quoted short, whatever its length


def test_request_head() -> None:
    head = http1.request_head("PUT", "169.254.169.254", "/latest/api/token", {"X-A": "1"}, b"ab")
    assert head == (
        b"PUT /latest/api/token HTTP/1.1\r\nHost: 169.254.169.254\r\nX-A: 1\r\n"
        b"Accept-Encoding: identity\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
    )


@pytest.mark.parametrize(
    ("method", "target", "headers"),
    [
        ("GET", "/a b", {}),
        ("GET", "/a\r\nX: y", {}),
        ("GET", "/a\x00", {}),
        ("GET", "relative", {}),
        ("G ET", "/", {}),
        ("GET", "/", {"X": "a\r\nInjected: 1"}),
        ("GET", "/", {"Bad Name": "x"}),
        ("GET", "/", {"X": "nul\0"}),
    ],
)
def test_request_smuggling_is_refused(method: str, target: str, headers: dict[str, str]) -> None:
    with pytest.raises(HttpError):
        http1.request_head(method, "h", target, headers, None)


def _parse(
    raw: bytes, method: str = "GET", max_body: int = 64
) -> tuple[int, dict[str, str], bytes]:
    reader = io.BytesIO(raw)
    status, fields = http1.read_head(reader)
    body = http1.read_body(reader, status, fields, method, max_body)
    return status, dict(fields), body


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello+extra", (200, {"Content-Length": "5"}, b"hello")),
        (b"HTTP/1.0 200 OK\r\n\r\nto the end", (200, {}, b"to the end")),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n",
         (200, {"Transfer-Encoding": "chunked"}, b"abcde")),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", (404, {"Content-Length": "0"}, b"")),
        (b"HTTP/1.1 204 No Content\r\n\r\nignored", (204, {}, b"")),
        (b"HTTP/1.1 200 OK\r\nX-Long: a\r\n b\r\nContent-Length: 0\r\n\r\n", (200, {"X-Long": "a b", "Content-Length": "0"}, b"")),
        (b"HTTP/1.1 401 Unauthorized\nWww-Authenticate: Bearer x\n\n", (401, {"Www-Authenticate": "Bearer x"}, b"")),
    ],
)  # fmt: skip
def test_answers_are_framed(raw: bytes, expected: tuple[int, dict[str, str], bytes]) -> None:
    assert _parse(raw) == expected


def test_head_answers_have_no_body() -> None:
    assert _parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", method="HEAD")[2] == b""


@pytest.mark.parametrize(
    ("raw", "error", "message"),
    [
        (b"", HttpError, "closed the connection before the status line"),
        (b"SSH-2.0-OpenSSH\r\n", HttpError, "not an HTTP/1.x answer"),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", HttpError, "not an HTTP/1.x answer"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", HttpError, "malformed header line"),
        (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n", HttpError, "more than 100 header fields"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n", HttpError, "longer than 65536 bytes"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", HttpError, "ended after 5 of 10 bytes"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", HttpError, "malformed Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 65\r\n\r\n" + b"a" * 65, BadAnswer, "larger than 64 bytes"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n", BadAnswer, "larger than 64"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n", HttpError, "malformed Content-Length"),
        (b"HTTP/1.1 200 OK\r\n\r\n" + b"a" * 65, BadAnswer, "larger than 64 bytes"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n41\r\n" + b"a" * 65, BadAnswer, "larger than 64"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", HttpError, "malformed chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", HttpError, "ended after 2 of 5"),
    ],
)  # fmt: skip
def test_hostile_answers_are_refused(raw: bytes, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        _parse(raw)


@pytest.fixture
def server() -> Iterator[tuple[int, list[bytes]]]:
    """A one-shot loopback HTTP server: records each request, answers with a chunked body."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def serve() -> None:
        for _ in range(2):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                seen.append(data)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nSet-Cookie: a\r\n"
                    b"Set-Cookie: b\r\n\r\n2\r\nok\r\n0\r\n\r\n"
                )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], seen
    listener.close()


def test_a_request_over_loopback(server: tuple[int, list[bytes]]) -> None:
    port, seen = server
    answer = http.get(
        f"http://127.0.0.1:{port}/computeMetadata/v1/x?y=1",
        headers={"Metadata-Flavor": "Google"},
        timeout=5,
    )
    assert (answer.status, answer.body) == (200, b"ok")
    assert answer.header_values("set-cookie") == ["a", "b"]
    assert seen[0].startswith(
        b"GET /computeMetadata/v1/x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:" + str(port).encode()
    )
    assert b"Metadata-Flavor: Google\r\n" in seen[0]


def test_a_refused_connection_is_an_http_error() -> None:
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with pytest.raises(HttpError, match="ConnectionRefusedError"):
        http.get(f"http://127.0.0.1:{port}/", headers={}, timeout=5)


def test_https_needs_a_tls_context() -> None:
    with pytest.raises(HttpError, match="only http:// URLs"):
        http.get("https://127.0.0.1/", headers={}, timeout=5)


# --- the transport seam: exchange() over any Send ------------------------------------------------


def _ctx(seconds: float = 30.0) -> Context:
    return Context(Deadline(seconds), Logger("t", 2, io.StringIO()), {}, time.time)


def _scripted(
    *outcomes: int | Exception,
) -> tuple[list[tuple[str, float]], Callable[..., http.HttpResponse]]:
    """A Send that answers each call with the next status, or raises the next error."""
    calls: list[tuple[str, float]] = []
    pending = list(outcomes)

    def send(
        method: str, url: str, headers: object, body: bytes | None, timeout: float
    ) -> http.HttpResponse:
        calls.append((f"{method} {url} {headers} {body!r}", timeout))
        outcome = pending.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return http.HttpResponse(outcome, {}, b"", ())

    return calls, send


@pytest.mark.parametrize(
    ("outcomes", "statuses", "attempts", "calls", "final"),
    [
        ((200,), None, 3, 1, 200),
        ((503, 429, 200), None, 3, 3, 200),  # 408, 429, 5xx are retried by default
        ((429, 429, 429, 429, 503, 200), None, 3, 6, 200),  # a throttle is no failed attempt
        ((503, 503, 503), None, 3, 3, 503),  # the last answer, whatever its status
        ((404, 200), None, 3, 1, 404),  # a refusal is an answer
        ((HttpError("reset"), 200), None, 3, 2, 200),  # a failed exchange is retried
        ((404, 200), (404,), 3, 2, 200),  # the caller's retry statuses
        ((503, 200), None, 1, 1, 503),  # one attempt: no retry
    ],
)
def test_exchange_retries_what_it_should_over_any_transport(
    outcomes: tuple[int | Exception, ...],
    statuses: tuple[int, ...] | None,
    attempts: int,
    calls: int,
    final: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("credprovider.runtime.retry.backoff_delay", lambda attempt: 0.0)
    monkeypatch.setattr("credprovider.runtime.retry.throttled_delay", lambda *_: 0.0)
    made, send = _scripted(*outcomes)
    answer = http.exchange(
        _ctx(),
        "POST",
        "http://127.0.0.1:9/x",
        what="test",
        headers={"A": "b"},
        body=b"{}",
        send=send,
        retry_statuses=statuses,
        attempts=attempts,
    )
    assert (len(made), answer.status) == (calls, final)
    assert made[0][0] == "POST http://127.0.0.1:9/x {'A': 'b'} b'{}'"


def test_exchange_cuts_each_attempt_to_the_deadline_and_raises_when_no_answer_came(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("credprovider.runtime.retry.backoff_delay", lambda attempt: 0.0)
    made, send = _scripted(HttpError("refused"), HttpError("refused"), HttpError("refused"))
    with pytest.raises(HttpError, match="refused"):
        http.exchange(_ctx(5.0), "GET", "http://127.0.0.1:9/", what="t", send=send, timeout_cap=8)
    assert len(made) == 3 and all(timeout <= 5.0 for _, timeout in made)
    made, send = _scripted(BadAnswer("is too big"), 200)
    with pytest.raises(BadAnswer):  # an oversized answer would only come again
        http.exchange(_ctx(), "GET", "http://127.0.0.1:9/", what="t", send=send)
    assert len(made) == 1


@pytest.mark.parametrize(
    ("environ", "chosen"),
    [
        ({}, None),
        ({"HTTPS_PROXY": "http://proxy:3128"}, "HTTPS_PROXY"),
        ({"http_proxy": "  "}, None),  # blank is unset, as botocore and requests read it
        ({"NO_PROXY": "*"}, None),
        ({"all_proxy": "socks5://p"}, "all_proxy"),
    ],
)
def test_the_one_proxy_rule(environ: dict[str, str], chosen: str | None) -> None:
    assert http.proxy_setting(environ) == chosen


@pytest.mark.parametrize("answer", [drip_headers(0.1), drip(b"x", 0.1)], ids=["headers", "body"])
def test_a_drip_fed_answer_ends_with_the_exchanges_bound(answer: Answer) -> None:
    """Each byte within the wait, never the whole answer: the exchange as a whole is bounded by
    its timeout from the connect on (a plugin's metadata or registry call), not only each wait."""
    with raw_server(answer) as url:
        started = time.monotonic()
        with pytest.raises(HttpError, match="no whole answer within 1s"):
            http.request("GET", f"{url}/", headers={}, timeout=1.0)
        assert time.monotonic() - started < 2.5


def test_a_drip_fed_tls_handshake_ends_with_the_exchanges_bound() -> None:
    """A server that drips a TLS record a byte at a time, never finishing the handshake: the
    handshake as a whole ends with the timeout (CPython bounds the whole do_handshake by the
    socket's timeout, as a deadline), not after every byte's wait."""
    import ssl

    listener = socket.create_server(("127.0.0.1", 0))

    def drip() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(4096)  # the ClientHello
            for byte in b"\x16\x03\x03\x40\x00" + b"\x02" * 200:
                try:
                    connection.send(bytes([byte]))
                except OSError:
                    return
                time.sleep(0.1)

    threading.Thread(target=drip, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(HttpError, match="timed out"):
        http.request(
            "GET", f"https://127.0.0.1:{listener.getsockname()[1]}/", headers={}, timeout=1.0,
            tls=ssl.create_default_context(),
        )  # fmt: skip
    assert time.monotonic() - started < 2.5
    listener.close()


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("https://sts.googleapis.com/v1/token", None),
        ("HTTPS://quay.io", None),
        ("https://[::1]:8443/x", None),
        ("http://127.0.0.1:8080/token", None),
        ("http://[::1]/token", None),
        ("http://sts.example.com/v1/token", "must be an https:// URL"),
        ("ftp://quay.io", "must be an https:// URL"),
        ("quay.io", "must be an https:// URL"),
        ("https://sts.example.com/v1/token?audience=x", "is not a URL like"),
        ("https://sts.example.com/v1/token#x", "is not a URL like"),
        ("https://user@sts.example.com/v1/token", "is not a URL like"),
        ("https://sts.example.com:port/", "is not a URL like"),
        ("https:///v1/token", "is not a URL like"),
    ],
)
def test_the_one_rule_for_where_a_credential_may_go(url: str, refused: str | None) -> None:
    """https://, or http:// to this machine; a host and nothing a URL could hide a second
    destination in (userinfo, query, fragment): the registry plugin's --url and the Google
    plugin's --sts-endpoint alike."""
    if refused is None:
        scheme, authority, _ = credential_endpoint(url)
        assert scheme in ("http", "https") and authority
    else:
        with pytest.raises(HttpError, match=refused) as raised:
            credential_endpoint(url)
        assert isinstance(raised.value, NotHttps) == ("https" in refused)

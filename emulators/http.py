"""A tiny loopback HTTP(S) server that the fakes of cloud endpoints are built on.

Each fake is a function ``(FakeRequest) -> FakeResponse``; the server records every request so tests
can assert what the plugin actually sent (headers, form fields, signing region, ...). Faults are
responses too: a status, a body, a delay, or ``hang`` (accept and never answer).
"""

from __future__ import annotations

import json
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class FakeRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    host: str
    peer: str = ""  # the client certificate's common name (TLS asking for one), else ""

    @property
    def form(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(self.body.decode(), keep_blank_values=True).items()}

    def json(self) -> Any:
        return json.loads(self.body)

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")


@dataclass
class FakeResponse:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    hang: bool = False
    endless: str = ""  # "", "chunked", "unframed" or "announced"

    @classmethod
    def json(
        cls, obj: Any, status: int = 200, content_type: str = "application/json", **kwargs: Any
    ) -> FakeResponse:
        headers = {"Content-Type": content_type, **kwargs.pop("headers", {})}
        return cls(status=status, body=json.dumps(obj).encode(), headers=headers, **kwargs)

    @classmethod
    def text(cls, text: str, status: int = 200, **kwargs: Any) -> FakeResponse:
        headers = {"Content-Type": "text/plain", **kwargs.pop("headers", {})}
        return cls(status=status, body=text.encode(), headers=headers, **kwargs)


Handler = Callable[[FakeRequest], FakeResponse]
ENDLESS_BLOCK = 1 << 16
ENDLESS_ANNOUNCED = 1 << 40  # what an "announced" body claims, and where any endless one stops


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone before its request (an exec killed at the end of a storm, a pool's
        idle connection closed) is what clients do, not the emulator's fault: no traceback."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class FakeServer:
    """One listening loopback server; ``url`` is its base URL."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None, port: int = 0) -> None:
        self.handler = handler
        self.requests: list[FakeRequest] = []
        self.nodelay: list[bool] = []  # per request: TCP_NODELAY on the connection it came on
        self._release = threading.Event()
        fake = self

        class RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # As real services do: without it, the second request on a kept-alive connection
                # waits for the client's delayed ACK of the first answer (Nagle), about 40 ms.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                split = urlsplit(self.path)
                request = FakeRequest(
                    method=self.command,
                    path=split.path,
                    query=parse_qs(split.query, keep_blank_values=True),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    host=self.headers.get("Host", ""),
                    peer=_common_name(self.connection),
                )
                fake.requests.append(request)
                fake.nodelay.append(
                    bool(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                )
                response = fake.handler(request)
                if response.hang:
                    fake._release.wait(120)
                    self.close_connection = True
                    return
                if response.delay:
                    time.sleep(response.delay)
                if response.endless:
                    self._stream_without_end(response)
                    return
                self.send_response(response.status)
                for name, value in response.headers.items():
                    if name.lower() != "content-length":
                        self.send_header(name, value)
                if self.command == "HEAD":
                    # what a GET would carry (a proxied answer says so in its headers)
                    length = response.headers.get("Content-Length", str(len(response.body)))
                    self.send_header("Content-Length", length)
                    self.end_headers()
                    return
                self.send_header("Content-Length", str(len(response.body)))
                self.end_headers()
                try:
                    self.wfile.write(response.body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client stopped reading (a size limit)

            def _stream_without_end(self, response: FakeResponse) -> None:
                framing = {
                    "chunked": ("Transfer-Encoding", "chunked"),
                    "announced": ("Content-Length", str(ENDLESS_ANNOUNCED)),
                    "unframed": ("Connection", "close"),
                }[response.endless]
                self.send_response(response.status)
                for name, value in {**response.headers, framing[0]: framing[1]}.items():
                    self.send_header(name, value)
                self.end_headers()
                block = (response.body or b" ") * (ENDLESS_BLOCK // max(1, len(response.body)))
                if response.endless == "chunked":
                    block = b"%x\r\n%s\r\n" % (len(block), block)
                self.close_connection = True
                sent = 0
                try:
                    while sent < ENDLESS_ANNOUNCED and not fake._release.is_set():
                        self.wfile.write(block)
                        sent += len(block)
                except OSError:
                    pass  # the client stopped reading: what a bounded reader does

            do_GET = do_POST = do_PUT = do_PATCH = do_HEAD = _serve

        self._server = _Server(("127.0.0.1", port), RequestHandler)
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self) -> FakeServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def serve(
    handler: Handler, tls: ssl.SSLContext | None = None, port: int = 0
) -> Iterator[FakeServer]:
    server = FakeServer(handler, tls, port).start()
    try:
        yield server
    finally:
        server.stop()


def _common_name(connection: Any) -> str:
    """The common name of the certificate a TLS client gave (``""``: plain HTTP, or none)."""
    certificate = connection.getpeercert() if hasattr(connection, "getpeercert") else None
    for rdn in (certificate or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return ""

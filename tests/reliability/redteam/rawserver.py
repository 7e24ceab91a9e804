"""A loopback TCP server that answers with raw bytes, as no well-behaved HTTP server would: a body
drip-fed a byte at a time, ``100 Continue`` for ever, an answer cut short. Each connection is
handed to ``answer(request_head, send)``; the server stops every answer when it is closed."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Send = Callable[[bytes], bool]  # False once the client has gone or the server stops
Answer = Callable[[bytes, Send], None]


@contextmanager
def raw_server(answer: Answer) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a server answering every connection with ``answer``."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def handle(connection: socket.socket) -> None:
        def send(data: bytes) -> bool:
            if stop.is_set():
                return False
            try:
                connection.sendall(data)
            except OSError:
                return False
            return True

        with connection:
            connection.settimeout(5)
            head = b""
            try:
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    chunk = connection.recv(4096)
                    if not chunk:
                        return
                    head += chunk
            except OSError:
                return
            answer(head, send)

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


def drip(body: bytes, every: float = 0.2) -> Answer:
    """Headers at once, then ``body`` one byte per ``every`` seconds until the connection closes
    (no length: the reader reads to the end), never finished in time."""

    def answer(_: bytes, send: Send) -> None:
        if not send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"):
            return
        for index in range(len(body) * 1000):
            if not send(body[index % len(body) : index % len(body) + 1]):
                return
            time.sleep(every)

    return answer


def drip_headers(every: float = 0.5) -> Answer:
    """A status line, then header lines one byte per ``every`` seconds, never their end: the
    client waits for the headers before any body bound can start."""

    def answer(_: bytes, send: Send) -> None:
        if not send(b"HTTP/1.1 200 OK\r\n"):
            return
        while True:
            for byte in b"X-Slow: a\r\n":
                if not send(bytes([byte])):
                    return
                time.sleep(every)

    return answer


def endless_continue(_: bytes, send: Send) -> None:
    """``100 Continue`` answers, one after another, without end."""
    while send(b"HTTP/1.1 100 Continue\r\n\r\n"):
        time.sleep(0.001)


def once(status: str, body: bytes, content_type: str = "application/json") -> Answer:
    """One whole answer."""

    def answer(_: bytes, send: Send) -> None:
        send(
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )

    return answer

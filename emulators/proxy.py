"""An HTTP proxy (``CONNECT`` tunnels) and a SOCKS5 one in front of an API server stand-in, all in
a network namespace a command runs in: the command reaches the API server by a name only the
proxies know (``api.cluster.test``), so a client that went around them could not reach it, nor
anything else (the namespace has loopback only, no DNS).

``ApiBehindProxy(directory, server_cert, server_key).wrapper()`` is the command's prefix (run as
root, inside ``unshare --net``), ``env()`` its environment; once the command is done, ``seen()``
holds the ``CONNECT`` targets the HTTP proxy was asked for (``tunnels``), the SOCKS5 proxy's
(``socks``, and the users who asked: ``socks_users``; it asks for ``SOCKS_AUTH`` when a client
offers a password) and the API server's ``authorizations``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from emulators import beside

API_NAME = "api.cluster.test"
API_PORT = 6443
PROXY_PORT = 3128
SOCKS_PORT = 1080
SOCKS_AUTH = "operator:socks-secret-0123"  # the user and password its SOCKS5 side asks for

# The proxy and the API server, run beside the command: a NodeList for any GET; every CONNECT
# tunnelled to the API server whatever it names (recorded); the log written when stopped.
_SERVERS = """
import json, os, signal, socket, ssl, sys, threading
from emulators.http import FakeResponse, serve
log, cert, key = os.environ["BESIDE_LOG"], os.environ["SERVERS_CERT"], os.environ["SERVERS_KEY"]
api_port, proxy_port = int(os.environ["API_PORT"]), int(os.environ["PROXY_PORT"])
socks_port, socks_auth = int(os.environ["SOCKS_PORT"]), os.environ["SOCKS_AUTH"].encode()
seen = {"tunnels": [], "direct": 0, "authorizations": [], "socks": [], "socks_users": []}
def api(request):
    seen["authorizations"].append(request.header("authorization"))
    return FakeResponse.json({"kind": "NodeList", "apiVersion": "v1", "metadata": {},
                              "items": [{"metadata": {"name": "node-behind-proxy"}}]})
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
def pipe(source, sink):
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def client(conn):
    head = b""
    while b"\\r\\n\\r\\n" not in head:
        chunk = conn.recv(4096)
        if not chunk:
            return conn.close()
        head += chunk
    line = head.split(b"\\r\\n", 1)[0].decode()
    method, target, _ = line.split(" ", 2)
    if method != "CONNECT":
        conn.sendall(b"HTTP/1.1 405 Method Not Allowed\\r\\ncontent-length: 0\\r\\n\\r\\n")
        return conn.close()
    seen["tunnels"].append(target)
    upstream = socket.create_connection(("127.0.0.1", api_port))
    conn.sendall(b"HTTP/1.1 200 Connection established\\r\\n\\r\\n")
    threading.Thread(target=pipe, args=(upstream, conn), daemon=True).start()
    pipe(conn, upstream)
def exactly(conn, count):
    data = b""
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data
def socks(conn):
    # RFC 1928 (CONNECT only) and RFC 1929 (user and password, asked for when offered)
    try:
        _, count = exactly(conn, 2)
        methods = exactly(conn, count)
        if 2 in methods:
            conn.sendall(b"\\x05\\x02")
            _, size = exactly(conn, 2)
            user = exactly(conn, size)
            password = exactly(conn, exactly(conn, 1)[0])
            seen["socks_users"].append(user.decode())
            if user + b":" + password != socks_auth:
                return conn.sendall(b"\\x01\\x01")
            conn.sendall(b"\\x01\\x00")
        else:
            conn.sendall(b"\\x05\\x00")
        _, command, _, kind = exactly(conn, 4)
        if kind == 3:
            host = exactly(conn, exactly(conn, 1)[0]).decode()
        else:
            host = socket.inet_ntop(socket.AF_INET if kind == 1 else socket.AF_INET6,
                                    exactly(conn, 4 if kind == 1 else 16))
        port = int.from_bytes(exactly(conn, 2), "big")
        seen["socks"].append(f"{host}:{port}")
        upstream = socket.create_connection(("127.0.0.1", api_port))
        conn.sendall(b"\\x05\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00")
    except OSError:
        return conn.close()
    threading.Thread(target=pipe, args=(upstream, conn), daemon=True).start()
    pipe(conn, upstream)
def stop(*_):
    with open(log, "w") as out:
        json.dump(seen, out)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
def accept(listener, handler):
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handler, args=(conn,), daemon=True).start()
for port, handler in ((proxy_port, client), (socks_port, socks)):
    listener = socket.create_server(("127.0.0.1", port))
    threading.Thread(target=accept, args=(listener, handler), daemon=True).start()
with serve(api, tls=context, port=api_port):
    open(log + ".ready", "w").close()
    signal.pause()
"""


@dataclass(frozen=True)
class ApiBehindProxy:
    log: Path
    cert: Path  # the API server's certificate (for API_NAME) and key
    key: Path

    def env(self) -> dict[str, str]:
        return beside.environment(
            _SERVERS, self.log, SERVERS_CERT=str(self.cert), SERVERS_KEY=str(self.key),
            API_PORT=str(API_PORT), PROXY_PORT=str(PROXY_PORT), SOCKS_PORT=str(SOCKS_PORT),
            SOCKS_AUTH=SOCKS_AUTH,
        )  # fmt: skip

    def wrapper(self) -> list[str]:
        return ["unshare", "--net", *beside.wrapper()]

    def seen(self) -> dict[str, object]:
        found: dict[str, object] = json.loads(self.log.read_text())
        return found

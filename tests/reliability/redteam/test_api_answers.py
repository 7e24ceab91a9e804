"""Red team, the API server as an answer like any other (docs/security.md): ``credprovider fleet
status`` and ``agent run --node`` against a server that answers nested, truncated, HTML, with the
wrong types, a redirect, a deep Status, a list that never ends, a body that never ends or drips,
names that drive a terminal, numbers and times no API server sends; and against kubeconfigs whose
token or CA file is a device or a FIFO. Each ends within its bound, under an address-space limit,
in one line (no traceback), and prints nothing raw to the terminal.

Through the bundle when it is built (make test, CI), else from source."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from release.bundle import BUNDLE_DIR, REPO
from tests.helpers import private
from tests.integration.cli.conftest import fake_bundle
from tests.reliability.redteam.rawserver import (
    Answer,
    Send,
    drip,
    drip_headers,
    once,
    raw_server,
)
from tests.unit.tool.test_agent_apply import kubeadm

ADDRESS_SPACE = 1 << 30
NESTING = 100_000
NODE_LIST = {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": []}


def tool() -> list[str]:
    if (BUNDLE_DIR / "credprovider").exists():
        return [str(BUNDLE_DIR / "credprovider")]
    return [sys.executable, "-m", "credprovider", "credprovider"]


def kubeconfig(tmp: Path, server: str, **user: str) -> Path:
    path = tmp / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **user.pop("cluster", {})}}],  # type: ignore[dict-item]
        "users": [{"name": "u", "user": user or {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }))  # fmt: skip
    return path


def status(tmp: Path, server: str, within: float, **user: str) -> subprocess.CompletedProcess[str]:
    started = time.monotonic()
    done = subprocess.run(
        private(["prlimit", f"--as={ADDRESS_SPACE}", "--", *tool(), "fleet", "status",
                 "--kubeconfig", str(kubeconfig(tmp, server, **user))]),
        capture_output=True, text=True, timeout=within + 60, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert time.monotonic() - started < within, done.stderr[-500:]
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr[-2000:]
    return done


def endless_continue(_: bytes, send: Send) -> None:
    body = json.dumps({**NODE_LIST, "metadata": {"continue": "more"}}).encode()
    send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
         b"Connection: close\r\n\r\n%s" % (len(body), body))  # fmt: skip


def endless_body(_: bytes, send: Send) -> None:
    if send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"):
        while send(b'{"items": [' * 4096):
            pass


def encoded(encoding: str) -> Answer:
    """A list in a Content-Encoding the client did not ask for (it asks for identity): gzip that
    inflates past the cap (80 MiB of JSON whitespace in 80 KiB), or brotli."""

    def answer(request: bytes, send: Send) -> None:
        import gzip

        assert b"accept-encoding: identity" in request.lower(), request
        body = gzip.compress(b" " * (80 << 20)) if encoding == "gzip" else b"\x0b\x02\x80{}\x03"
        send(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: %s\r\n"
             b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
             % (encoding.encode(), len(body), body))  # fmt: skip

    return answer


DEEP = b'{"kind":"NodeList","items":' + b"[" * NESTING + b"]" * NESTING + b"}"
DEEP_STATUS = (b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":403,"details":'
               + b"[" * 50_000 + b"]" * 50_000 + b"}")  # fmt: skip
LIST_ROWS: dict[str, tuple[Answer, str, float]] = {
    "JSON nested 100,000 deep": (once("200 OK", DEEP), "nested more than 32 levels deep", 20),
    "truncated JSON": (once("200 OK", b'{"kind": "NodeList", "items": [{"metadata": '),
                       "not one the client can use", 20),
    "an HTML page": (once("200 OK", b"<html><body>proxy login</body></html>", "text/html"),
                     "not one the client can use", 20),
    "items of the wrong type": (once("200 OK", b'{"kind": "NodeList", "items": "x"}'),
                                "not one the client can use", 20),
    "a node of the wrong type": (once("200 OK", b'{"kind": "NodeList", "items": [7]}'),
                                 "not one the client can use", 20),
    "a 302 elsewhere": (lambda _, send: send(b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/"
                                              b"\r\nContent-Length: 0\r\n\r\n"), "listing the nodes", 20),
    "a Status nested 50,000 deep": (once("403 Forbidden", DEEP_STATUS), "nested more than 32", 20),
    "a list that never ends": (endless_continue, "past 1000 pages", 60),
    "a body that never ends": (endless_body, "larger than 64 MiB", 60),
    "a drip-fed body": (drip(b" ", 0.5), "took longer than 30s", 45),
    # #63: read through the plugins' one bounded reader, decoded under the same cap
    "a gzip bomb": (encoded("gzip"), "larger than 64 MiB", 30),
    "a brotli body": (encoded("br"), "which is not supported", 20),
    # #62: the body's bound started after the headers, which never ended (103 s and more)
    "drip-fed headers": (drip_headers(0.5), "no complete answer within 35s", 50),
}  # fmt: skip


@pytest.mark.parametrize("row", LIST_ROWS)
def test_fleet_status_against_a_hostile_api_server(tmp_path: Path, row: str) -> None:
    answer, said, within = LIST_ROWS[row]
    with raw_server(answer) as url:
        done = status(tmp_path, url, within)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert len(done.stderr.splitlines()) == 1 and said in done.stderr, done.stderr


# A SOCKS5 proxy (a kubeconfig's proxy-url) that answers as no SOCKS5 proxy does: what it sends
# once it has read the client's greeting (and, where there are two, after its CONNECT).
SOCKS_ROWS = {
    "an HTTP answer": [b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"],
    "a method it was not offered": [b"\x05\x02"],
    "no acceptable method": [b"\x05\xff"],
    "a CONNECT refused": [b"\x05\x00", b"\x05\x05\x00\x01\x00\x00\x00\x00\x00\x00"],
    "a reply of another version": [b"\x05\x00", b"\x04\x5a\x00\x00\x00\x00\x00\x00"],
    "an address type that is none": [b"\x05\x00", b"\x05\x00\x00\x09" + b"\xff" * 64],
    "silence": [],
    "a close at once": None,
}


@contextlib.contextmanager
def socks_server(replies: list[bytes] | None) -> Iterator[int]:
    """A loopback port whose every connection gets ``replies`` in turn, one per read of what the
    client sent; then it stays open and silent (``None``: closed at once)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)
            if replies is None:
                connection.close()
                continue
            try:
                connection.settimeout(5)
                for reply in replies:
                    connection.recv(4096)
                    connection.sendall(reply)
            except OSError:
                continue

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        for connection in held:
            connection.close()


@pytest.mark.parametrize("row", SOCKS_ROWS)
def test_fleet_status_through_a_hostile_socks_proxy(tmp_path: Path, row: str) -> None:
    """One line, exit 1, within the call's bound, whatever the proxy says (httpcore asserts on
    some replies: an AssertionError is no answer either); its password never said."""
    with socks_server(SOCKS_ROWS[row]) as port:
        proxy = {"proxy-url": f"socks5://operator:socks-secret@127.0.0.1:{port}"}
        done = status(tmp_path, "https://api.cluster.test:6443", 50, cluster=proxy)  # type: ignore[arg-type]
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert len(done.stderr.splitlines()) == 1 and "socks-secret" not in done.stderr, done.stderr
    assert "internal error" not in done.stderr, done.stderr


def test_names_from_the_api_server_cannot_drive_the_terminal(tmp_path: Path) -> None:
    node = {"metadata": {"name": "a\x1b]0;pwned\x07", "annotations": {
        "credprovider.io/result": "installed\x1b[2J", "credprovider.io/detail": "\u202eevil",
        "credprovider.io/version": "0.1.0"}}}  # fmt: skip
    body = json.dumps({**NODE_LIST, "items": [node]}).encode()
    with raw_server(once("200 OK", body)) as url:
        done = status(tmp_path, url, 20)
    assert "\x1b" not in done.stdout + done.stderr and "\u202e" not in done.stdout
    assert "a\\x1b]0;pwned\\a" in done.stdout, done.stdout


@pytest.mark.parametrize("kind", ["/dev/zero", "a FIFO"])
@pytest.mark.parametrize("key", ["tokenFile", "certificate-authority"])
def test_a_kubeconfig_naming_a_device_or_fifo(tmp_path: Path, kind: str, key: str) -> None:
    special = tmp_path / "special"
    if kind == "a FIFO":
        os.mkfifo(special)
    else:
        os.mknod(special, 0o644 | stat.S_IFCHR, os.makedev(1, 5))
    user = (
        {"cluster": {key: str(special)}} if key == "certificate-authority" else {key: str(special)}
    )
    done = status(tmp_path, "https://127.0.0.1:9", 20, **user)  # type: ignore[arg-type]
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert "names a file that cannot be used" in done.stderr and len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("kind", ["/dev/zero", "a FIFO", "64 MiB"])
@pytest.mark.parametrize("name", ["token", "ca.crt"])
def test_the_pods_service_account_files_are_read_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, name: str
) -> None:
    """#62: the uninstall hook and the agent connect with the pod's service account; lightkube
    reads its files whole (``/dev/zero``: MemoryError) and blocks on a FIFO. Each is refused in
    one line, at once, naming the file."""
    from credprovider.tool.cluster import connect

    account = tmp_path / "serviceaccount"
    account.mkdir()
    for each in ("token", "namespace", "ca.crt"):
        (account / each).write_text("x")
    special = account / name
    special.unlink()
    if kind == "a FIFO":
        os.mkfifo(special)
    elif kind == "64 MiB":
        with special.open("wb") as handle:
            handle.truncate(64 << 20)
    else:
        os.mknod(special, 0o644 | stat.S_IFCHR, os.makedev(1, 5))
    monkeypatch.setattr(connect, "SERVICE_ACCOUNT_DIR", str(account))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "9")
    started = time.monotonic()
    with pytest.raises(connect.ClusterError) as refused:
        connect.connect(None, in_cluster=True)
    assert time.monotonic() - started < 5
    said = str(refused.value)
    assert said.startswith("the pod's service account cannot be used: ") and "\n" not in said
    assert f"{account}/{name}" in said, said


# -- agent run --node: the node's version and the restart slot's Lease --------------------------------
def agent_api(head: bytes, send: Send) -> None:
    """A node whose kubeletVersion is 5,000 digits long, a Lease renewed in the year 9999 (month
    99), and every write accepted."""
    path = head.split(b" ", 2)[1].decode()
    if path.startswith("/api/v1/nodes/n1") and head.startswith(b"GET"):
        body = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1"},
                "status": {"nodeInfo": {"kubeletVersion": "v" + "9" * 5000 + ".1.1"}}}  # fmt: skip
    elif "/leases/" in path and head.startswith(b"GET"):
        body = {"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
                "metadata": {"name": path.rsplit("/", 1)[1], "namespace": "kube-system",
                             "resourceVersion": "1"},
                "spec": {"holderIdentity": "other", "leaseDurationSeconds": 15,
                         "renewTime": "9999-99-99T00:00:00.000000Z"}}  # fmt: skip
    else:
        body = {"kind": "Status", "apiVersion": "v1", "status": "Success"}
    once("200 OK", json.dumps(body).encode())(head, send)


def test_agent_run_against_impossible_numbers_and_times(tmp_path: Path) -> None:
    root = Path(kubeadm(tmp_path / "node"))
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    with raw_server(agent_api) as url:
        agent = subprocess.Popen(  # no kubelet is looked for: no namespace of its own needed
            ["prlimit", f"--as={ADDRESS_SPACE}", "--", *tool(), "agent", "run",
                     "--node", "n1", "--namespace", "kube-system", "--kubeconfig",
                     str(kubeconfig(tmp_path, url)), "--root", str(root), "--bundle", str(bundle),
                     "--providers", "aws", "--restart-command", "true {unit}", "--metrics", "",
                     "--health-timeout", "2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        time.sleep(12)  # the version read, the plan, a slot asked for (and waited on)
        agent.send_signal(signal.SIGTERM)
        try:
            _out, err = agent.communicate(timeout=30)
        finally:
            agent.kill()
    assert "Traceback" not in err, err[-3000:]
    waiting = [line for line in err.splitlines() if "restart slot" in line]
    assert waiting and "renewTime" in waiting[0], err[-2000:]


def test_a_control_byte_in_a_server_or_a_node_name_is_one_error(tmp_path: Path) -> None:
    """#62: a kubeconfig server or a --hostname-override holding an escape byte made httpx
    raise InvalidURL, which nothing caught (a traceback). Each is one ClusterError line."""
    from lightkube.resources.core_v1 import Node

    from credprovider.tool.cluster.connect import ClusterError, api_call, connect

    def kubeconfig(server: str) -> str:
        path = tmp_path / "kubeconfig"
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "x",
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        }))  # fmt: skip
        return str(path)

    with pytest.raises(ClusterError, match=r"no API server configuration from .*non-printable"):
        connect(kubeconfig("https://127.0.0.1:9/\x1b[2J"), in_cluster=False)
    client = connect(kubeconfig("https://127.0.0.1:9"), in_cluster=False)
    with pytest.raises(ClusterError, match=r"^reading the Node: .*non-printable"):
        api_call("reading the Node", client.get, Node, "node\x1b[2J")

"""The API client's TLS from a kubeconfig's inline data (kubeadm's admin.conf, k3s.yaml, kind's:
``certificate-authority-data``, ``client-certificate-data``, ``client-key-data``), against a
stand-in API server that takes only a client certificate its CA signed: the cluster-admin's
private key is never written to a file (credprovider/tool/cluster/clienttls.py). lightkube wrote
it to ``$TMPDIR`` twice per client, left there by a kill; strace shows every file the tool
creates."""

from __future__ import annotations

import base64
import json
import os
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from emulators.http import FakeRequest, FakeResponse, serve
from emulators.tls import CertAuthority
from tests.helpers import run_cli

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="strace of the tool in a pid namespace")


def nodes(request: FakeRequest) -> FakeResponse:
    return FakeResponse.json({"kind": "NodeList", "apiVersion": "v1", "metadata": {},
                              "items": [{"metadata": {"name": "node-mtls"}}]})  # fmt: skip


@pytest.fixture
def mutual_tls(test_ca: CertAuthority) -> Iterator[str]:
    """An API server on loopback that requires a client certificate signed by ``test_ca``."""
    context = test_ca.server_context("127.0.0.1")
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(test_ca.bundle)
    with serve(nodes, tls=context) as server:
        yield server.url


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig(directory: Path, server: str, cluster: dict[str, str], user: dict[str, str]) -> Path:
    path = directory / "admin.conf"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **cluster}}],
        "users": [{"name": "admin", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "admin"}}],
        "current-context": "c",
    }))  # fmt: skip
    path.chmod(0o600)
    return path


def assert_lists_nodes_creating_no_file(tmp_path: Path, config: Path, use_bundle: bool) -> None:
    """``fleet status`` with ``config`` lists the stand-in's node, and strace sees the tool (and
    whatever it runs) create no file."""
    trace = tmp_path / "trace"
    done = run_cli("fleet", "status", f"--kubeconfig={config}", use_bundle=use_bundle,
                   wrapper=["strace", "-f", "-qq", "-e", "trace=open,openat,creat",
                            "-o", str(trace)])  # fmt: skip
    assert "node-mtls" in done.stdout, done.stderr
    lines = trace.read_text().splitlines()
    assert [line for line in lines if "O_CREAT" in line or "creat(" in line] == []


@pytest.mark.parametrize("use_bundle", [False, True], ids=["source", "bundle"])
def test_inline_keys_are_never_written_to_a_file(
    tmp_path: Path, test_ca: CertAuthority, mutual_tls: str, use_bundle: bool
) -> None:
    cert, key = test_ca.issue("kubernetes-admin", organizations=("system:masters",))
    config = kubeconfig(tmp_path, mutual_tls, {"certificate-authority-data": b64(test_ca.bundle)},
                        {"client-certificate-data": b64(cert),
                         "client-key-data": b64(key)})  # fmt: skip
    assert_lists_nodes_creating_no_file(tmp_path, config, use_bundle)


def test_files_a_kubeconfig_names_still_serve(
    tmp_path: Path, test_ca: CertAuthority, mutual_tls: str
) -> None:
    cert, key = test_ca.issue("kubernetes-admin", organizations=("system:masters",))
    config = kubeconfig(tmp_path, mutual_tls, {"certificate-authority": str(test_ca.bundle)},
                        {"client-certificate": str(cert), "client-key": str(key)})  # fmt: skip
    done = run_cli("fleet", "status", f"--kubeconfig={config}")
    assert "node-mtls" in done.stdout, done.stderr
    config = kubeconfig(tmp_path, mutual_tls, {"certificate-authority": str(test_ca.bundle)}, {})
    refused = run_cli("fleet", "status", f"--kubeconfig={config}")
    assert refused.returncode == 1 and "node-mtls" not in refused.stdout


def test_inline_data_that_is_not_base64_is_one_line(tmp_path: Path, mutual_tls: str) -> None:
    config = kubeconfig(tmp_path, mutual_tls, {"certificate-authority-data": "not base64!"}, {})
    done = run_cli("fleet", "status", f"--kubeconfig={config}")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"no API server configuration from {config}" in done.stderr, done.stderr


@pytest.mark.parametrize("memfd", [True, False], ids=["memfd", "o-tmpfile"])
def test_the_memory_file_has_no_name(monkeypatch: pytest.MonkeyPatch, memfd: bool) -> None:
    """Both ways (the bundle's Python has no memfd_create): a file no directory names."""
    from credprovider.tool.cluster.clienttls import anonymous_memory_file

    if not memfd:
        monkeypatch.delattr(os, "memfd_create", raising=False)
    descriptor = anonymous_memory_file()
    try:
        os.write(descriptor, b"secret")
        assert os.fstat(descriptor).st_nlink == 0
        with open(f"/proc/self/fd/{descriptor}", "rb") as reopened:
            assert reopened.read() == b"secret"
    finally:
        os.close(descriptor)


def test_no_memory_file_is_one_line_and_no_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where neither way works (no /dev/shm), the key is refused, never put in a named file."""
    from credprovider.tool.cluster import clienttls

    monkeypatch.delattr(os, "memfd_create", raising=False)
    monkeypatch.setattr(clienttls, "SHARED_MEMORY", str(tmp_path / "no-shm"))
    with pytest.raises(ValueError, match="cannot be held in memory for OpenSSL"):
        clienttls.anonymous_memory_file()
    assert list(tmp_path.iterdir()) == []


# A GKE node's kubelet kubeconfig (/var/lib/kubelet/kubeconfig, from the instance's "kubeconfig"
# metadata attribute that kube-up's create-kubelet-kubeconfig fetches): the kubelet's credential is
# the client certificate and key kubernetes/cloud-provider-gcp cmd/gke-exec-auth-plugin issues
# (TPM mode, its default: ExecCredential status clientCertificateData and clientKeyData, PEM).
GKE_KUBELET_USER = {
    "exec": {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "{plugin}",
        "args": ["--cache-dir", "/var/lib/kubelet/pki/"],
    }
}


def test_an_exec_plugins_client_certificate_is_used_from_memory(
    tmp_path: Path, test_ca: CertAuthority, mutual_tls: str
) -> None:
    """The plugin issues a certificate instead of a token (GKE's kubelet): the client speaks TLS
    with it, and nothing of it reaches a file."""
    cert, key = test_ca.issue("system:node:gke-node-1", organizations=("system:nodes",))
    issued = tmp_path / "exec-credential.json"
    issued.write_text(json.dumps({
        "kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1",
        "status": {"expirationTimestamp": "2099-01-01T00:00:00Z",
                   "clientCertificateData": cert.read_text(), "clientKeyData": key.read_text()},
    }))  # fmt: skip
    plugin = tmp_path / "gke-exec-auth-plugin"
    plugin.write_text(f"#!/bin/sh\n[ \"$*\" = \"--cache-dir /var/lib/kubelet/pki/\" ] || exit 2\n"
                      f"exec cat {issued}\n")  # fmt: skip
    plugin.chmod(0o755)
    user = json.loads(json.dumps(GKE_KUBELET_USER).replace("{plugin}", str(plugin)))
    config = kubeconfig(tmp_path, mutual_tls, {"certificate-authority": str(test_ca.bundle)}, user)
    assert_lists_nodes_creating_no_file(tmp_path, config, use_bundle=True)


def test_a_client_certificate_issued_afresh_is_the_one_spoken_with(
    tmp_path: Path, test_ca: CertAuthority
) -> None:
    """The plugin's certificate nears its expirationTimestamp (or the API server refuses it):
    the plugin is run again, as for a token, and its new certificate is the one the next
    connection speaks with. The TLS context was made once, with the first: every request after
    the renewal went on with the old certificate, refused (401), until the run failed."""
    import time

    answers = []
    for number, expires in ((1, time.time() + 5), (2, 4070908800.0)):
        cert, key = test_ca.issue(f"issued-{number}", organizations=("system:nodes",))
        answer = tmp_path / f"answer-{number}.json"
        answer.write_text(json.dumps({
            "kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1",
            "status": {"expirationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                            time.gmtime(expires)),
                       "clientCertificateData": cert.read_text(),
                       "clientKeyData": key.read_text()},
        }))  # fmt: skip
        answers.append(answer)
    count = tmp_path / "count"
    plugin = tmp_path / "plugin"
    plugin.write_text(f'#!/bin/sh\nn=$(($(cat {count} 2>/dev/null || echo 0) + 1))\n'
                      f'echo $n > {count}\n[ $n -gt 2 ] && n=2\nexec cat {tmp_path}/answer-$n.json\n')  # fmt: skip
    plugin.chmod(0o755)
    context = test_ca.server_context("127.0.0.1")
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(test_ca.bundle)

    def only_the_fresh_one(request: FakeRequest) -> FakeResponse:
        if request.peer != "issued-2":
            return FakeResponse.json({"kind": "Status", "code": 401}, status=401)
        return nodes(request)

    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin)}}
    with serve(only_the_fresh_one, tls=context) as server:
        config = kubeconfig(tmp_path, server.url, {"certificate-authority": str(test_ca.bundle)},
                            user)  # fmt: skip
        done = run_cli("fleet", "status", f"--kubeconfig={config}", use_bundle=True)
        peers = {request.peer for request in server.requests}
    assert "node-mtls" in done.stdout, done.stderr  # listed (exit 1: no agent reported on it)
    assert peers == {"issued-2"}, peers  # renewed before the first request: it nears its end
    assert count.read_text() == "2\n"

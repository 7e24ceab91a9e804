"""A real control plane inside the e2e sandbox (tests/e2e/node.py): etcd and kube-apiserver, built from
the same module as the kubelet (release/gobuild.py), on loopback in the sandbox's own network
namespace, as a real cluster runs them for what the credential providers touch: client
certificates from one cluster CA, the Node authorizer and RBAC, NodeRestriction, and service
account tokens signed by the API server's own key. The kubelet registers as a node with its own
client certificate (``system:node:<name>`` in ``system:nodes``).

There is no scheduler and no controller manager: pods are created with ``spec.nodeName`` set and
with ``automountServiceAccountToken: false`` (no token volume, no root CA config map), and service
accounts are created by the admin client. Nothing here is reached from outside the sandbox.
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from emulators.tls import CertAuthority, key_pem, make_test_ca

API_PORT = 6443
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
NODE_NAME = "credprovider-e2e"
ISSUER = "https://kubernetes.default.svc.cluster.local"
# The verb and resource through which RBAC lets a node request tokens for an audience
# (ServiceAccountNodeAudienceRestriction, on since v1.32).
AUDIENCE_VERB = "request-serviceaccounts-token-audience"


class ApiError(RuntimeError):
    """The API server answered a request with an error status."""


@dataclass
class ControlPlane:
    directory: Path
    ca: CertAuthority
    admin: ssl.SSLContext
    kubelet_kubeconfig: Path
    admin_kubeconfig: Path  # cluster admin, for the tools run in the sandbox

    def request(
        self,
        method: str,
        path: str,
        body: object | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        """One call as cluster admin (``system:masters``): the status and the decoded answer."""
        connection = http.client.HTTPSConnection(
            "127.0.0.1", API_PORT, context=self.admin, timeout=10
        )
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": content_type, "Accept": "application/json"}
            connection.request(method, path, body=data, headers=headers)
            answer = connection.getresponse()
            text = answer.read().decode(errors="replace")
        finally:
            connection.close()
        try:
            return answer.status, json.loads(text)
        except ValueError:
            return answer.status, text

    def create(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        status, answer = self.request("POST", path, obj)
        if status not in (200, 201):
            raise ApiError(f"POST {path}: HTTP {status}: {answer}")
        created: dict[str, Any] = answer
        return created

    def get(self, path: str) -> dict[str, Any] | None:
        status, answer = self.request("GET", path)
        if status == 404:
            return None
        if status != 200:
            raise ApiError(f"GET {path}: HTTP {status}: {answer}")
        found: dict[str, Any] = answer
        return found

    def grant_audience(self, audience: str) -> None:
        """Let every node request service account tokens for ``audience`` (what an admin does
        for a credential provider's ``tokenAttributes.serviceAccountTokenAudience``)."""
        name = f"credential-provider-audience-{len(audience)}-{abs(hash(audience)) % 10**8}"
        self.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            {
                "metadata": {"name": name},
                "rules": [{"apiGroups": [""], "resources": [audience], "verbs": [AUDIENCE_VERB]}],
            },
        )
        self.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "metadata": {"name": name},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": name,
                },
                "subjects": [
                    {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Group",
                        "name": "system:nodes",
                    }
                ],
            },
        )

    def service_account(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.create(
            f"/api/v1/namespaces/{namespace}/serviceaccounts",
            {
                "metadata": {"name": name, "annotations": annotations},
                "automountServiceAccountToken": False,
            },
        )

    def pod(
        self,
        namespace: str,
        name: str,
        image: str,
        service_account: str,
        policy: str = "Always",
        host_network: bool = False,
        command: list[str] | None = None,
    ) -> None:
        container: dict[str, Any] = {"name": "c", "image": image, "imagePullPolicy": policy}
        if command is not None:
            # and the kubelet refuses to start an image that would run as root
            container |= {"command": command, "securityContext": {"runAsNonRoot": True}}
        self.create(
            f"/api/v1/namespaces/{namespace}/pods",
            {
                "metadata": {"name": name},
                "spec": {
                    "nodeName": NODE_NAME,
                    "hostNetwork": host_network,
                    "serviceAccountName": service_account,
                    "automountServiceAccountToken": False,
                    "restartPolicy": "Never",
                    "containers": [container],
                },
            },
        )

    def started(self, namespace: str, pod: str) -> bool:
        """Whether the kubelet has reported ``pod``'s container as started (or failed)."""
        found = self.get(f"/api/v1/namespaces/{namespace}/pods/{pod}") or {}
        statuses = found.get("status", {}).get("containerStatuses") or []
        return any(set(s.get("state", {})) & {"running", "terminated"} for s in statuses)

    def events(self, namespace: str, pod: str) -> list[str]:
        """The reasons and messages of the events about ``pod`` (what kubectl describe shows)."""
        found = self.get(
            f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name%3D{pod}"
        )
        return [f"{e.get('reason')}: {e.get('message')}" for e in (found or {}).get("items", [])]


def _client_context(ca: CertAuthority, cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(ca.bundle)
    context.load_cert_chain(cert, key)
    return context


def _kubeconfig(path: Path, ca: CertAuthority, cert: Path, key: Path) -> Path:
    return kubeconfig(path, ca, {"client-certificate": str(cert), "client-key": str(key)})


def kubeconfig(path: Path, ca: CertAuthority, user: dict[str, str]) -> Path:
    """A kubeconfig for this API server as ``user`` (a client certificate, or a token)."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "e2e",
                        "cluster": {
                            "server": f"https://127.0.0.1:{API_PORT}",
                            "certificate-authority": str(ca.bundle),
                        },
                    }
                ],
                "users": [{"name": "u", "user": user}],
                "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "u"}}],
                "current-context": "e2e",
            }
        )
    )
    return path


def start(
    directory: Path, etcd: str, apiserver: str, node_ip: str, stack: ExitStack, log: IO[bytes]
) -> ControlPlane:
    """etcd and kube-apiserver started (and stopped with ``stack``), the API server ready."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = make_test_ca(directory / "pki")
    serving = ca.issue("kube-apiserver", hosts=("127.0.0.1", node_ip, "localhost", "kubernetes"))
    admin = ca.issue("credprovider-e2e-admin", organizations=("system:masters",))
    node = ca.issue(f"system:node:{NODE_NAME}", organizations=("system:nodes",))
    signing = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (directory / "sa.key").write_bytes(key_pem(signing))
    (directory / "sa.pub").write_bytes(
        signing.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    etcd_process = subprocess.Popen(
        [
            etcd,
            "--name=e2e",
            f"--data-dir={directory / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{ETCD_CLIENT_PORT}",
            f"--advertise-client-urls=http://127.0.0.1:{ETCD_CLIENT_PORT}",
            f"--listen-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
            f"--initial-cluster=e2e=http://127.0.0.1:{ETCD_PEER_PORT}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    stack.callback(stop_process, etcd_process)
    apiserver_process = subprocess.Popen(
        [
            apiserver,
            f"--etcd-servers=http://127.0.0.1:{ETCD_CLIENT_PORT}",
            "--bind-address=127.0.0.1",
            f"--secure-port={API_PORT}",
            f"--advertise-address={node_ip}",
            f"--tls-cert-file={serving[0]}",
            f"--tls-private-key-file={serving[1]}",
            f"--client-ca-file={ca.bundle}",
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={directory / 'sa.pub'}",
            f"--service-account-signing-key-file={directory / 'sa.key'}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--service-cluster-ip-range=10.96.0.0/24",
            "--endpoint-reconciler-type=none",
            f"--cert-dir={directory / 'apiserver-certs'}",
            "--profiling=false",
            "--v=1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    stack.callback(stop_process, apiserver_process)
    plane = ControlPlane(
        directory,
        ca,
        _client_context(ca, *admin),
        _kubeconfig(directory / "kubelet.kubeconfig", ca, *node),
        _kubeconfig(directory / "admin.kubeconfig", ca, *admin),
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for process, name in ((etcd_process, "etcd"), (apiserver_process, "kube-apiserver")):
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited ({process.returncode}) while starting")
        try:
            if plane.request("GET", "/readyz")[0] == 200 and plane.get(
                "/api/v1/namespaces/default"
            ):
                return plane
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError("kube-apiserver was not ready within 90s")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s (what each sandbox service is stopped with)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def start_controller_manager(
    plane: ControlPlane, binary: str, stack: ExitStack, log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """kube-controller-manager with the controllers a DaemonSet's pods need: the DaemonSet
    controller, and the root CA config map their service-account token volumes read; and what
    helm uninstall's pre-delete hook needs: the Job controller, and the garbage collector that
    deletes a deleted owner's pods."""
    return _component(
        plane, binary, stack, log,
        "--controllers=daemonset,job,garbagecollector,root-ca-cert-publisher",
        f"--root-ca-file={plane.ca.bundle}",
        "--use-service-account-credentials=false",
    )  # fmt: skip


def start_scheduler(
    plane: ControlPlane, binary: str, stack: ExitStack, log: IO[bytes]
) -> subprocess.Popen[bytes]:
    """kube-scheduler: it binds the DaemonSet's pods to their nodes (by their node affinity)."""
    return _component(plane, binary, stack, log)


def _component(
    plane: ControlPlane, binary: str, stack: ExitStack, log: IO[bytes], *more: str
) -> subprocess.Popen[bytes]:
    """A control-plane component as cluster admin, on loopback, without leader election
    (stopped with ``stack``)."""
    process = subprocess.Popen(
        [binary, f"--kubeconfig={plane.admin_kubeconfig}", "--leader-elect=false",
         "--bind-address=127.0.0.1", *more, "--v=1"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    stack.callback(stop_process, process)
    return process


def node_kubeconfig(plane: ControlPlane, name: str) -> Path:
    """A kubelet's kubeconfig for node ``name`` (``system:node:<name>`` in ``system:nodes``)."""
    cert, key = plane.ca.issue(f"system:node:{name}", organizations=("system:nodes",))
    return _kubeconfig(plane.directory / f"{name}.kubeconfig", plane.ca, cert, key)

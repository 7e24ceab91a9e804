"""doctor reads the Node object (KEP-2395's other half): with the running kubelet's own kubeconfig,
through the real client library, against a stand-in API server: the uninitialized taint a cloud
controller manager never removed, a Node it never gave a providerID, one it initialized, an API
server that cannot be asked, a standalone kubelet. The decisions are
credprovider/tool/doctor/cloudnode.py; the Node names and the kubeconfig are the kubelet's."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from credprovider.tool.cluster.nodes import UNINITIALIZED_TAINT
from emulators.http import FakeRequest, FakeResponse, serve
from tests.helpers import config_file, fake_kubelet, provider_entry, run_cli

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a fake kubelet needs root")

TOKEN = "kubelet-node-token-0123456789abcdef"
AWS_MANAGER = "the AWS cloud controller manager (aws-cloud-controller-manager"


@dataclass
class FakeApi:
    """``GET /api/v1/nodes/NAME``: the nodes the test puts here, 404 for others."""

    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    asked: list[tuple[str, str]] = field(default_factory=list)  # (path, authorization)

    def __call__(self, request: FakeRequest) -> FakeResponse:
        self.asked.append((request.path, request.header("authorization")))
        name = request.path.removeprefix("/api/v1/nodes/")
        if request.method == "GET" and name in self.nodes:
            return FakeResponse.json(self.nodes[name])
        return FakeResponse.json(
            {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404,
             "reason": "NotFound", "message": f'nodes "{name}" not found'},
            status=404,
        )  # fmt: skip


def node(name: str, provider_id: str | None = None, tainted: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if provider_id is not None:
        spec["providerID"] = provider_id
    if tainted:
        spec["taints"] = [{"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}]
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name}, "spec": spec}


@dataclass
class Cluster:
    api: FakeApi
    kubeconfig: Path
    config: Path
    directory: Path

    def doctor(
        self,
        *flags: str,
        args: tuple[str, ...] = (),
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        kubelet_env: dict[str, str] | None = None,
    ) -> list[tuple[str, str, str]]:
        """doctor on a node whose kubelet runs ``flags`` (and the credential flags) in
        ``kubelet_env`` (default: this test's), doctor in ``cwd`` (the kubelet's is this test's),
        with ``env``."""
        kubelet = fake_kubelet(
            [
                f"--image-credential-provider-config={self.config}",
                f"--image-credential-provider-bin-dir={self.directory}",
                *flags,
            ],
            os.environ if kubelet_env is None else kubelet_env,
        )
        try:
            first = "--offline" if "--offline" in args else "--image=none"
            found = run_cli("doctor", "--json", first, *args, cwd=cwd, env=env)
            assert "Traceback" not in found.stderr, found.stderr
            report = json.loads(found.stdout)
        finally:
            kubelet.kill()
            kubelet.wait()
        return [
            (c["status"], c["message"], c.get("fix", ""))
            for c in report["checks"]
            if c["area"] == "kubelet" and ("Node" in c["message"] or "standalone" in c["message"])
        ]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    api = FakeApi()
    with serve(api) as server:
        kubeconfig = tmp_path / "kubelet.conf"
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": server.url}}],
                    "users": [{"name": "u", "user": {"token": TOKEN}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "c",
                }
            )
        )
        yield Cluster(api, kubeconfig, config_file(tmp_path, provider_entry()), tmp_path)


def test_a_node_no_controller_manager_initialized_keeps_its_taint(cluster: Cluster) -> None:
    """The kubelet registered with --cloud-provider=external and no CCM ran: FAIL, the fix names
    the manager of the node's plugins' cloud; asked with the kubelet's own credentials, for the
    name it registered under."""
    cluster.api.nodes["ip-10-0-0-1.ec2.internal"] = node("ip-10-0-0-1.ec2.internal", tainted=True)
    said = cluster.doctor(
        f"--kubeconfig={cluster.kubeconfig}",
        "--hostname-override=IP-10-0-0-1.ec2.internal",
        "--cloud-provider=external",
    )
    [(status, message, fix)] = said
    assert status == "fail"
    assert message.startswith(
        f"Node ip-10-0-0-1.ec2.internal keeps the {UNINITIALIZED_TAINT} taint: no cloud controller "
        "manager has initialized it"
    )
    assert AWS_MANAGER in fix
    assert cluster.api.asked == [("/api/v1/nodes/ip-10-0-0-1.ec2.internal", f"Bearer {TOKEN}")]


@pytest.mark.parametrize(
    ("stored", "status", "start"),
    [
        (node("n1", provider_id="aws:///us-east-1a/i-0abc"), "pass",
         "Node n1 was initialized by its cloud controller manager (providerID aws:///us-east-1a/i-0abc)"),
        (node("n1"), "warn",
         "Node n1 has no spec.providerID although its kubelet runs --cloud-provider=external"),
        (node("n1", provider_id="aws:///us-east-1a/i-0abc", tainted=True), "fail",
         f"Node n1 keeps the {UNINITIALIZED_TAINT} taint"),
    ],
)  # fmt: skip
def test_each_state_of_the_node_is_one_line(
    cluster: Cluster, stored: dict[str, Any], status: str, start: str
) -> None:
    cluster.api.nodes["n1"] = stored
    said = cluster.doctor(f"--kubeconfig={cluster.kubeconfig}", "--cloud-provider=external",
                          args=("--node-name", "n1"))  # fmt: skip
    assert [(s, m[: len(start)]) for s, m, _ in said] == [(status, start)]


def test_an_api_server_that_cannot_be_asked_is_a_warning_not_a_failure(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A Node unknown under the name, and a kubeconfig this user cannot use: one WARN each, with
    the flags that fix it; doctor goes on."""
    said = cluster.doctor(f"--kubeconfig={cluster.kubeconfig}", "--hostname-override=elsewhere")
    [(status, message, fix)] = said
    assert status == "warn" and message.startswith("the Node object was not read")
    assert 'nodes \\"elsewhere\\" not found' in message or "404" in message
    assert "--node-name" in fix
    broken = tmp_path / "broken.conf"
    broken.write_text("clusters: [")
    [(status, message, _)] = cluster.doctor(args=("--kubeconfig", str(broken)))
    assert status == "warn" and f"the kubeconfig {broken} is not YAML" in message


def test_a_standalone_kubelet_has_no_node_and_offline_asks_nothing(cluster: Cluster) -> None:
    [(status, message, _)] = cluster.doctor()
    assert status == "info" and "standalone" in message
    cluster.api.nodes["n1"] = node("n1", tainted=True)
    assert cluster.doctor(f"--kubeconfig={cluster.kubeconfig}", args=("--offline",)) == []
    assert cluster.api.asked == []


def test_a_relative_kubeconfig_is_read_where_it_was_given(cluster: Cluster, tmp_path: Path) -> None:
    """The kubelet's own --kubeconfig, relative, against the kubelet's working directory (as the
    kubelet reads it); the operator's --kubeconfig, relative, against the operator's."""
    cluster.api.nodes["n1"] = node("n1", provider_id="aws:///us-east-1a/i-0abc")
    from_the_kubelet = os.path.relpath(cluster.kubeconfig, Path.cwd())
    [(status, _, _)] = cluster.doctor(
        f"--kubeconfig={from_the_kubelet}", args=("--node-name", "n1")
    )
    assert status == "pass"
    elsewhere = tmp_path / "operator"
    elsewhere.mkdir()
    (elsewhere / "mine.conf").write_bytes(cluster.kubeconfig.read_bytes())
    [(status, said, _)] = cluster.doctor(
        args=("--kubeconfig", "mine.conf", "--node-name", "n1"), cwd=elsewhere
    )
    assert status == "pass", said


# nodeadm's internal/kubelet/kubeconfig.template.yaml (amazon-eks-ami), as an EKS node has it at
# /var/lib/kubelet/kubeconfig: the kubelet's token comes from `aws eks get-token`.
NODEADM_KUBECONFIG = """---
apiVersion: v1
kind: Config
clusters:
  - name: kubernetes
    cluster:
      server: {server}
current-context: kubelet
contexts:
  - name: kubelet
    context:
      cluster: kubernetes
      user: kubelet
users:
  - name: kubelet
    user:
      exec:
        apiVersion: client.authentication.k8s.io/v1beta1
        command: aws
        args:
          - "eks"
          - "get-token"
          - "--cluster-name"
          - "demo"
          - "--region"
          - "us-west-2"
"""


def test_an_eks_kubelets_token_comes_from_its_exec_plugin(cluster: Cluster, tmp_path: Path) -> None:
    """An EKS node's kubelet kubeconfig runs `aws eks get-token`: doctor reads the Node with the
    token that plugin issues, as the kubelet does, in the kubelet's environment (its PATH finds
    the plugin, not the operator's: a stand-in `aws` first on each PATH, so that no real AWS
    command is ever run); one that fails is a WARN naming it, and doctor goes on."""
    server = json.loads(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    kubeconfig = tmp_path / "var-lib-kubelet-kubeconfig"
    kubeconfig.write_text(NODEADM_KUBECONFIG.format(server=server))
    kubeconfig.chmod(0o644)  # nodeadm's kubeconfigPerm
    stand_in = tmp_path / "bin" / "aws"
    stand_in.parent.mkdir()
    answer = tmp_path / "exec-credential.json"
    answer.write_text(json.dumps({
        "kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1", "spec": {},
        "status": {"expirationTimestamp": "2099-01-01T00:00:00Z", "token": TOKEN},
    }))  # fmt: skip
    stand_in.write_text(
        "#!/bin/sh\n"
        '[ "$*" = "eks get-token --cluster-name demo --region us-west-2" ] || exit 2\n'
        f"exec cat {answer}\n"
    )
    stand_in.chmod(0o755)
    kubelets = {**os.environ, "PATH": f"{stand_in.parent}:{os.environ['PATH']}"}
    operators = tmp_path / "operator-bin" / "aws"  # the operator's own AWS login: never run
    operators.parent.mkdir()
    operators.write_text('#!/bin/sh\necho "the operator\'s aws" >&2\nexit 3\n')
    operators.chmod(0o755)
    env = {"PATH": f"{operators.parent}:{os.environ['PATH']}"}
    cluster.api.nodes["n1"] = node("n1", provider_id="aws:///us-west-2a/i-0abc")
    [(status, message, _)] = cluster.doctor(
        f"--kubeconfig={kubeconfig}", "--cloud-provider=external", args=("--node-name", "n1"),
        env=env, kubelet_env=kubelets,
    )  # fmt: skip
    assert status == "pass", message
    assert cluster.api.asked == [("/api/v1/nodes/n1", f"Bearer {TOKEN}")]
    stand_in.write_text("#!/bin/sh\necho 'Unable to locate credentials' >&2\nexit 255\n")
    [(status, message, _)] = cluster.doctor(
        f"--kubeconfig={kubeconfig}", "--cloud-provider=external", args=("--node-name", "n1"),
        env=env, kubelet_env=kubelets,
    )  # fmt: skip
    assert status == "warn" and message.startswith("the Node object was not read")
    assert (
        f"the kubeconfig {kubeconfig} (user 'kubelet'): exec: executable aws failed with exit "
        "code 255: Unable to locate credentials" in message
    ), message

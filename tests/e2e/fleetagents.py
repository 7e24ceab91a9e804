"""The chart's agents in mode flags against a real API server: ``python -m tests.e2e.fleetagents
SPEC.json``, run by tests/e2e/test_fleet_agents.py as ``unshare --net --mount --pid --fork
--mount-proc`` (nothing leaves the sandbox's namespaces).

etcd and kube-apiserver run as in tests/e2e/controlplane.py, with the chart's RBAC and admission
policy (rendered by Helm, mode flags) applied. Each node is a Node object, a root directory laid
out as that kind of node, and a stand-in kubelet: an HTTP server answering /healthz and /metrics
(with the kubelet's config hash, computed here from the file it "loaded" at its last start) that
keeps its Node's Ready condition fresh while it is up. Each node's systemd is a stand-in private
socket (emulators/systemd.py, D-Bus as systemd speaks it) whose ``RestartUnit`` restarts that
stand-in kubelet (down for a moment, then up with the config on disk), as the chart's agent
restarts units. Each agent is
the bundle's ``credprovider agent run`` with a token the API server issued for a pod bound to its
node, as the kubelet gets one. The result is JSON: what each node's annotations, Events and
stand-in kubelet saw, the Leases, and each node's files before, during and after.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from emulators.harness import aws_emulator
from emulators.http import FakeRequest, FakeResponse, serve
from emulators.systemd import NoSuchUnit, standin_systemd
from tests.e2e import controlplane
from tests.e2e.node import NODE_IP, isolate, node_environment
from tests.unit.tool.test_agent_apply import tree
from tests.unit.tool.test_agent_plan import KUBEADM_NODE, UPSTREAM_ECR, node

NAMESPACE = "credprovider"
SA = "fleet-agent"
FINAL = ("installed", "unchanged", "rolled back", "refused", "failed", "uninstalled")
KIND_PATHS = {
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "ValidatingAdmissionPolicy": "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": (
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
    ),
}
# node name -> its layout: two kubeadm nodes, one whose kubelet does not come back after a
# restart, one whose platform config the kubelet would refuse once merged (AKS layout).
NODES = {
    "node-a": {**KUBEADM_NODE, "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n"},
    "node-b": {**KUBEADM_NODE, "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n"},
    "node-c": {**KUBEADM_NODE, "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n"},
    "node-d": {
        # the platform's own provider (kept by the merge) has no apiVersion
        "/var/lib/kubelet/credential-provider-config.yaml": UPSTREAM_ECR.replace(
            "    apiVersion: credentialprovider.kubelet.k8s.io/v1\n", ""
        ).replace("ecr-credential-provider", "acme-credential-provider"),
        "/lib/systemd/system/kubelet.service": "[Service]\n",
    },
}
COMES_BACK = {"node-a": True, "node-b": True, "node-c": False, "node-d": True}


def kubelet_hash(contents: list[bytes]) -> str:
    """The kubelet's config hash (pkg/credentialprovider/plugin), written out independently."""
    digest = hashlib.sha256()
    for data in contents:
        digest.update(len(data).to_bytes(8, "big") + data)
    return "sha256:" + digest.hexdigest()


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StandInKubelet:
    """A node's kubelet as the agent sees it: /healthz, /metrics, its Node's Ready condition."""

    def __init__(self, name: str, root: Path, plane: controlplane.ControlPlane) -> None:
        self.name, self.root, self.plane = name, root, plane
        self.up = True
        self.loaded = ""
        self.restarts: list[tuple[float, float, str]] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        threading.Thread(target=self._heartbeat, daemon=True).start()

    def _config(self) -> list[bytes]:
        for path in ("etc/default/kubelet", "var/lib/kubelet/kubeadm-flags.env"):
            text = (self.root / path).read_text() if (self.root / path).exists() else ""
            for word in text.replace('"', " ").split():
                if word.startswith("--image-credential-provider-config="):
                    config = self.root / word.split("=", 1)[1].lstrip("/")
                    return [config.read_bytes()] if config.is_file() else []
        aks = self.root / "var/lib/kubelet/credential-provider-config.yaml"
        return [aks.read_bytes()] if aks.is_file() else []

    def restart(self) -> None:
        with self.lock:  # systemctl restart: one at a time per unit
            started = time.time()
            self.up = False
            time.sleep(1.5)
            contents = self._config()
            self.loaded = kubelet_hash(contents) if contents else ""
            self.up = COMES_BACK[self.name]
            self.restarts.append((started, time.time(), self.loaded))

    def restart_unit(self, unit: str) -> str:
        """systemd's side: the job's result."""
        if unit != "kubelet":
            raise NoSuchUnit(unit)
        self.restart()
        return "done"

    def answer(self, request: FakeRequest) -> FakeResponse:
        if request.path == "/healthz":
            return FakeResponse.text("ok" if self.up else "down", status=200 if self.up else 500)
        if request.path == "/metrics" and self.loaded:
            return FakeResponse.text(
                "# TYPE kubelet_credential_provider_config_info gauge\n"
                f'kubelet_credential_provider_config_info{{hash="{self.loaded}"}} 1\n'
            )
        return FakeResponse.text("kubelet_running_pods 0\n")

    def _heartbeat(self) -> None:
        while not self.stopped.wait(1):
            status = "True" if self.up else "False"
            condition = {"type": "Ready", "status": status, "reason": "StandIn",
                         "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}  # fmt: skip
            self.plane.request(
                "PATCH", f"/api/v1/nodes/{self.name}/status",
                {"status": {"conditions": [condition]}}, "application/strategic-merge-patch+json",
            )  # fmt: skip


def _agent_token(plane: controlplane.ControlPlane, name: str) -> str:
    """A token for the agent's service account bound to a pod on ``name``, as the kubelet asks."""
    pod = plane.create(
        f"/api/v1/namespaces/{NAMESPACE}/pods",
        {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"agent-{name}", "namespace": NAMESPACE},
            "spec": {"nodeName": name, "serviceAccountName": SA,
                     "automountServiceAccountToken": False,
                     "containers": [{"name": "agent", "image": "credprovider:test"}]},
        },
    )  # fmt: skip
    answer = plane.create(
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SA}/token",
        {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600, "boundObjectRef": {
                "kind": "Pod", "apiVersion": "v1", "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"]}},
        },
    )  # fmt: skip
    token: str = answer["status"]["token"]
    return token


def _settle(plane: controlplane.ControlPlane, names: list[str], results: tuple[str, ...]) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        found = [_annotations(plane, name).get("credprovider.io/result") for name in names]
        if all(result in results for result in found):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the agents did not finish: {found}")


def _annotations(plane: controlplane.ControlPlane, name: str) -> dict[str, str]:
    found = plane.get(f"/api/v1/nodes/{name}") or {}
    annotations: dict[str, str] = found.get("metadata", {}).get("annotations", {})
    return {key: value for key, value in annotations.items() if key.startswith("credprovider.io/")}


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    run = Path(spec["run_dir"])
    isolate(run)
    result: dict[str, Any] = {"nodes": {}}
    with ExitStack() as stack:
        aws = stack.enter_context(aws_emulator())
        env = node_environment([aws], run / "ca-bundle.pem")
        plane = controlplane.start(
            run / "control-plane", spec["etcd"], spec["apiserver"], NODE_IP, stack,
            stack.enter_context((run / "control-plane.log").open("wb")),
        )  # fmt: skip
        plane.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        for doc in spec["chart"]:
            path = KIND_PATHS[doc["kind"]].format(ns=doc["metadata"].get("namespace", ""))
            plane.create(path, doc)
        kubelets, agents = {}, {}
        for name, files in NODES.items():
            root = Path(node(run / name, files))
            plane.create("/api/v1/nodes", {"metadata": {"name": name}})
            kubelets[name] = StandInKubelet(name, root, plane)
            stack.callback(kubelets[name].stopped.set)
            server = stack.enter_context(serve(kubelets[name].answer))
            systemd = run / f"{name}-systemd-private"
            stack.enter_context(standin_systemd(systemd, kubelets[name].restart_unit, root=root))
            token = _agent_token(plane, name)
            kubeconfig = controlplane.kubeconfig(
                run / f"{name}.kubeconfig", plane.ca, {"token": token}
            )
            agents[name] = {"root": root, "url": server.url, "token": token, "systemd": systemd,
                            "kubeconfig": kubeconfig, "before": tree(str(root))}  # fmt: skip
        time.sleep(2)  # every Node Ready once

        def start(name: str, *more: str, version: str = "0.1.0") -> subprocess.Popen[bytes]:
            agent = agents[name]
            command = [
                spec["credprovider"], "agent", "run", "--node", name, "--namespace", NAMESPACE,
                "--kubeconfig", str(agent["kubeconfig"]), "--root", str(agent["root"]),
                "--bundle", spec["bundle"], "--version", version, "--providers", "aws",
                "--systemd-socket", str(agent["systemd"]), "--healthz", f"{agent['url']}/healthz",
                "--health-timeout", "6", "--metrics", f"{agent['url']}/metrics",
                "--lease-seconds", "30", "--ready-file", str(run / f"{name}.ready"), *more,
            ]  # fmt: skip
            log = (run / f"{name}-{version}-{len(list(run.glob(name + '-*.log')))}.log").open("wb")
            return subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=spec["repo"]
            )

        def stop(processes: dict[str, subprocess.Popen[bytes]]) -> None:
            for process in processes.values():
                process.send_signal(signal.SIGTERM)
            for process in processes.values():
                process.wait(timeout=30)

        try:
            # 1. all four at once, one restart slot
            running = {name: start(name) for name in NODES}
            _settle(plane, list(NODES), FINAL)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not all(
                (run / f"{name}.ready").exists() for name in ("node-a", "node-b")
            ):
                time.sleep(0.5)
            for name in NODES:
                result["nodes"][name] = {
                    "installed": _annotations(plane, name),
                    "ready": (run / f"{name}.ready").exists(),
                    "during": tree(str(agents[name]["root"])),
                }
            result["leases"] = plane.get(
                f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases"
            )
            # 2. the agent's token may patch its own node only
            result["own_node"] = _patch_as(agents["node-a"]["token"], plane, "node-a")
            result["other_node"] = _patch_as(agents["node-a"]["token"], plane, "node-b")
            result["fleet"] = subprocess.run(
                [spec["credprovider"], "fleet", "status", "--json", "--kubeconfig",
                 str(plane.admin_kubeconfig)],
                capture_output=True, text=True, timeout=60, check=False,
            ).__dict__  # fmt: skip
            stop(running)
            # 3. a new image, the config unchanged: no restart; and on node-b, values that make a
            # config the kubelet would refuse: refused before anything changes
            refusing = '{"aws": {"tokenAttributes": {"serviceAccountTokenAudience": "sts"}}}'
            upgraded = {
                "node-a": start("node-a", version="0.2.0"),
                "node-b": start("node-b", "--provider-settings", refusing),
            }
            _settle_version(plane, "node-a", "0.2.0")
            _settle(plane, ["node-b"], ("refused",))
            result["nodes"]["node-a"]["upgraded"] = _annotations(plane, "node-a")
            result["nodes"]["node-b"]["refused"] = _annotations(plane, "node-b")
            result["nodes"]["node-b"]["unchanged"] = (
                tree(str(agents["node-b"]["root"])) == result["nodes"]["node-b"]["during"]
            )
            stop(upgraded)
            result["nodes"]["node-a"]["restarts_upgraded"] = len(kubelets["node-a"].restarts)
            # 3b. node-a reboots and its platform writes the kubelet's config again (as GKE,
            # nodeadm and the MCO do at boot); the agent's pod, started again, says so and writes
            # its providers again
            result["rewrite"] = _rewrite_config(agents["node-a"]["root"])
            again = {"node-a": start("node-a", version="0.2.0")}
            _settle_rewritten(plane, "node-a")
            result["nodes"]["node-a"]["rewritten"] = _annotations(plane, "node-a")
            result["fleet_rewritten"] = subprocess.run(
                [spec["credprovider"], "fleet", "status", "--kubeconfig",
                 str(plane.admin_kubeconfig), "--json"],
                capture_output=True, text=True, timeout=60, check=False,
            ).__dict__  # fmt: skip
            result["rewrite"]["again"] = (
                agents["node-a"]["root"] / result["rewrite"]["path"].lstrip("/")
            ).read_text()
            stop(again)
            # 4. every node put back, one restart at a time
            kubelets["node-c"].up = True  # its kubelet was rolled back and is up again
            undo = {name: start(name, "--uninstall") for name in NODES}
            _settle(plane, list(NODES), ("uninstalled", "failed"))
            stop(undo)
            for name in NODES:
                result["nodes"][name]["uninstalled"] = _annotations(plane, name)
                result["nodes"][name]["same_as_before"] = (
                    tree(str(agents[name]["root"])) == agents[name]["before"]
                )
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            result["error"] = str(exc)
        events = plane.get("/api/v1/namespaces/default/events") or {"items": []}
        result["events"] = [
            {"node": item["involvedObject"]["name"], "uid": item["involvedObject"].get("uid"),
             "reason": item["reason"], "type": item["type"], "message": item["message"],
             "source": item.get("source", {}).get("component")}
            for item in events["items"]
        ]  # fmt: skip
        for name, kubelet in kubelets.items():
            result["nodes"].setdefault(name, {})["restarts"] = kubelet.restarts
        result["logs"] = {path.name: path.read_text(errors="replace")[-4000:]
                          for path in sorted(run.glob("node-*.log"))}  # fmt: skip
    Path(spec["result"]).write_text(json.dumps(result, default=str))
    return 0


def _settle_version(plane: controlplane.ControlPlane, name: str, version: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = _annotations(plane, name)
        if (
            found.get("credprovider.io/version") == version
            and found.get("credprovider.io/result") in FINAL
        ):
            return
        time.sleep(0.5)
    raise RuntimeError(f"{name} did not report version {version}")


def _rewrite_config(root: Path) -> dict[str, str]:
    """The kubelet's config on the node under ``root`` written again as a platform writes its
    own at boot (its own ECR provider alone): the path the agent's state names."""
    state = json.loads((root / "var/lib/credprovider/agent/state.json").read_text())
    [path] = [p for p in state["written"] if p.endswith(".yaml")]
    (root / path.lstrip("/")).write_text(UPSTREAM_ECR)
    return {"path": path}


def _settle_rewritten(plane: controlplane.ControlPlane, name: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = _annotations(plane, name)
        if "credprovider.io/rewritten" in found and found.get("credprovider.io/result") in FINAL:
            return
        time.sleep(0.5)
    raise RuntimeError(f"{name} did not report the platform's rewrite")


def _patch_as(token: str, plane: controlplane.ControlPlane, name: str) -> dict[str, Any]:
    """A patch of ``name``'s annotations with the agent's token: the status and message."""
    import http.client
    import ssl

    context = ssl.create_default_context(cafile=str(plane.ca.bundle))
    connection = http.client.HTTPSConnection("127.0.0.1", controlplane.API_PORT, context=context)
    body = json.dumps({"metadata": {"annotations": {"credprovider.io/probe": "x"}}})
    connection.request(
        "PATCH", f"/api/v1/nodes/{name}", body=body,
        headers={"Authorization": f"Bearer {token}",
                 "Content-Type": "application/merge-patch+json"},
    )  # fmt: skip
    answer = connection.getresponse()
    text = answer.read().decode(errors="replace")
    connection.close()
    return {"status": answer.status, "message": text[:2000]}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

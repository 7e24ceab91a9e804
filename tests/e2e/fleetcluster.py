"""The fleet chart on a two-node cluster: ``python -m tests.e2e.fleetcluster SPEC.json``, run by
tests/e2e/test_fleet_cluster.py as ``unshare --net --mount --pid --fork --mount-proc``.

The sandbox holds the control plane (etcd, kube-apiserver, kube-controller-manager for the
DaemonSet controller, and kube-scheduler, which binds the DaemonSet's pods), the emulated clouds and their registries (tests/e2e/registries.py), and two
kubeadm-style nodes (tests/e2e/fleetnode.py), each with its own mount namespace (its own /etc,
/var/lib and /run), containerd, real kubelet on its own address, and a stand-in systemd restarting
that kubelet with the flags its files give. ``helm install`` puts the chart (mode flags) on the
cluster; the DaemonSet controller makes the agents' pods; then, through ``helm upgrade``: a new
image version, values the kubelet would refuse, values whose kubelet does not come back on one
node, and ``action=uninstall``. The result is JSON: each phase's node annotations, Events, kubelet
restarts (from each node's stand-in systemd), pulls, and each node's files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from emulators.harness import aws_emulator, azure_emulator, gcp_emulator
from emulators.registry import RegistryFront
from emulators.tls import make_test_ca
from tests.e2e import controlplane, realpulls, registries, runtime, testimages
from tests.e2e.node import AZURE_JSON, NODE_IP, isolate, node_environment, sh
from tests.e2e.scenario import ACR_LOGIN_SERVER, ACR_REGISTRIES, ACR_TEAM_B, ECR_ACCOUNT

NODES = {"node-a": "10.213.0.11", "node-b": "10.213.0.12"}
NAMESPACE = "kube-system"
RELEASE = "credprovider"
# A private image in each cloud's emulated registry: pulled on each node with the plugins' credentials.
IMAGES = {
    "ecr": f"{ECR_ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/team/app:v1",
    "acr": f"{ACR_LOGIN_SERVER}/team/app:v1",
    "gcr": "gcr.io/team-project/app:v1",
}
# What node-b's kubelet cannot start with (its stand-in systemd starts it broken then).
BREAKS_NODE_B = "-v=9"
CA_IN_ETC = "/etc/credprovider-e2e/ca.pem"
WATCHED = ("etc/default", "etc/kubernetes", "etc/systemd/system", "var/lib/kubelet/kubeadm-flags.env",
           "var/lib/credprovider")  # fmt: skip


class Cluster:
    def __init__(self, spec: dict[str, Any], run: Path, plane: controlplane.ControlPlane) -> None:
        self.spec, self.run, self.plane = spec, run, plane
        self.pids: dict[str, int] = {}

    # -- the nodes' views ---------------------------------------------------------------------
    def root(self, name: str) -> Path:
        return Path(f"/proc/{self.pids[name]}/root")

    def snapshot(self, name: str) -> dict[str, str]:
        """Each watched path of the node: a link's target, a file's digest and mode, or dir."""
        found: dict[str, str] = {}
        root = self.root(name)
        for top in WATCHED:
            for path in (
                [root / top, *sorted((root / top).rglob("*"))]
                if (root / top).is_dir()
                else [root / top]
            ):
                if not os.path.lexists(path):
                    continue
                key = "/" + str(path.relative_to(root))
                if path.is_symlink():
                    found[key] = f"link:{os.readlink(path)}"
                elif path.is_dir():
                    found[key] = "dir"
                else:
                    data = path.read_bytes()
                    found[key] = (
                        f"{oct(path.stat().st_mode)}:{hashlib.sha256(data).hexdigest()[:16]}"
                    )
        return found

    def restarts(self, name: str) -> list[dict[str, Any]]:
        path = self.run / name / "restarts.json"
        found: list[dict[str, Any]] = json.loads(path.read_text()) if path.exists() else []
        return found

    def kill_agent_in_its_wait(self, name: str, timeout: float = 300) -> dict[str, Any]:
        """SIGKILL ``name``'s agent once its kubelet was restarted and did not stay up (the
        agent is then in its health wait), as an OOM kill would: what was killed, and when."""
        seen = len(self.restarts(name))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            fresh = self.restarts(name)[seen:]
            if any(r["exited"] is not None for r in fresh):
                break
            seen += sum(1 for r in fresh if r["exited"] is None)
            time.sleep(0.2)
        else:
            raise RuntimeError(f"{name}'s kubelet was not restarted onto the breaking config")
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"run" in argv and b"agent" in argv and f"NODE_NAME={name}".encode() in environ:
                os.kill(int(pid), signal.SIGKILL)
                return {"pid": int(pid), "at": time.time(), "restarts": len(self.restarts(name))}
        raise RuntimeError(f"{name}'s agent was not found")

    def annotations(self, name: str) -> dict[str, str]:
        found = self.plane.get(f"/api/v1/nodes/{name}") or {}
        return {k: v for k, v in found.get("metadata", {}).get("annotations", {}).items()
                if k.startswith("credprovider.io/")}  # fmt: skip

    def daemonset(self) -> dict[str, Any]:
        found = self.plane.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{RELEASE}-agent")
        return (found or {}).get("status", {})

    def events(self) -> list[dict[str, str]]:
        found = self.plane.get("/api/v1/namespaces/default/events") or {"items": []}
        return [
            {"node": e["involvedObject"]["name"], "reason": e["reason"], "type": e["type"],
             "message": e["message"]}
            for e in found["items"] if e.get("source", {}).get("component") == "credprovider-agent"
        ]  # fmt: skip

    def agent_logs(self) -> dict[str, str]:
        logs = {}
        for name in NODES:
            for path in sorted(
                self.root(name).glob(f"var/log/pods/{NAMESPACE}_{RELEASE}-agent-*/agent/*.log")
            ):
                logs[f"{name}/{path.parent.parent.name}/{path.name}"] = path.read_text(
                    errors="replace"
                )[-3000:]
        return logs

    def wait(self, what: str, ready: Callable[[], bool], timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(1)
        raise RuntimeError(f"timed out waiting for {what}")

    def results(self) -> dict[str, str]:
        return {name: self.annotations(name).get("credprovider.io/result", "") for name in NODES}

    def versions(self) -> dict[str, str]:
        return {name: self.annotations(name).get("credprovider.io/version", "") for name in NODES}

    # -- helm -------------------------------------------------------------------------------------
    def helm(self, verb: str, chart: Path | None, values: dict[str, Any] | None = None,
             timeout: float = 120) -> str:  # fmt: skip
        """``helm VERB RELEASE [CHART -f VALUES]``: its output (a failure raises)."""
        more: list[str] = []
        if chart is not None:
            values_file = self.run / f"values-{time.monotonic_ns()}.json"
            values_file.write_text(json.dumps(values or {}))
            more = [str(chart), "-f", str(values_file)]
        done = subprocess.run(
            [self.spec["helm"], verb, RELEASE, *more, "--namespace", NAMESPACE,
             "--kubeconfig", str(self.plane.admin_kubeconfig), "--timeout", f"{int(timeout)}s"],
            capture_output=True, text=True, timeout=timeout + 60, check=False,
            env={"PATH": "/usr/bin:/bin", "HOME": str(self.run), "HELM_CACHE_HOME": str(self.run / "helm")},
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"helm {verb}: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def pull(self, name: str, pod: str, image: str) -> dict[str, Any]:
        """A pod on ``name`` whose ``image`` is in an emulated cloud registry: how it ended."""
        self.plane.create(
            f"/api/v1/namespaces/{realpulls.NAMESPACE}/pods",
            {"metadata": {"name": pod}, "spec": {
                "nodeName": name, "hostNetwork": True, "restartPolicy": "Never",
                "serviceAccountName": realpulls.SERVICE_ACCOUNT,
                "automountServiceAccountToken": False,
                "containers": [{"name": "c", "image": image, "imagePullPolicy": "Always"}]}},
        )  # fmt: skip
        self.wait(f"{pod} to run or fail its pull", lambda: realpulls.ended(self.plane, pod), 120)
        found = self.plane.get(f"/api/v1/namespaces/{realpulls.NAMESPACE}/pods/{pod}") or {}
        uid = found.get("metadata", {}).get("uid", "")
        printed = [
            line.split(" ", 3)[-1]
            for path in sorted(self.root(name).glob(f"var/log/pods/{realpulls.NAMESPACE}_{pod}_{uid}/c/*.log"))
            for line in path.read_text().splitlines()
        ]  # fmt: skip
        return {"phase": found.get("status", {}).get("phase"), "printed": printed,
                "events": self.plane.events(realpulls.NAMESPACE, pod)}  # fmt: skip


def version_image(tarball: Path, version: str, out: Path, arch: str) -> Path:
    """The release image again as another version: its tarball with the top directory renamed."""
    from release import image

    old_top = tarball.name.split("-linux-")[0]
    repacked = out / f"credprovider-{version}-linux-{arch}.tar.gz"
    with tarfile.open(tarball) as source, tarfile.open(repacked, "w:gz") as target:
        for member in source.getmembers():
            data = source.extractfile(member) if member.isfile() else None
            member.name = member.name.replace(old_top, f"credprovider-{version}", 1)
            if member.islnk():
                member.linkname = member.linkname.replace(old_top, f"credprovider-{version}", 1)
            # a long name is in the PAX header, which would win over the new name
            member.pax_headers = {
                key: value for key, value in member.pax_headers.items()
                if key not in ("path", "linkpath")
            }  # fmt: skip
            target.addfile(member, data)
    from release import oci as release_oci

    built = image.arch_image(repacked, arch, version, "e2e")
    return release_oci.archive(
        out / f"credprovider-{version}-oci.tar", version, built.manifest, built.blobs
    )


def chart_as(version: str, out: Path) -> Path:
    """The chart with appVersion ``version`` (what a release of that version ships)."""
    copy = out / f"chart-{version}"
    if copy.exists():
        return copy
    shutil.copytree(Path(__file__).resolve().parents[2] / "charts" / "credprovider", copy)
    text = (copy / "Chart.yaml").read_text()
    (copy / "Chart.yaml").write_text(
        text.replace('appVersion: "0.1.0"', f'appVersion: "{version}"')
    )
    return copy


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    run = Path(spec["run_dir"])
    isolate(run, real_runtime=True)
    for ip in NODES.values():
        sh("ip", "addr", "add", f"{ip}/32", "dev", "lo")
    subtrees = {name: runtime.subtree_name(run / name) for name in NODES}
    result: dict[str, Any] = {"phases": {}}
    with ExitStack() as stack:
        stack.callback(lambda: result.update(cgroups_left=_stop_everything(subtrees)))
        aws = stack.enter_context(aws_emulator())
        gcp = stack.enter_context(gcp_emulator())
        azure = stack.enter_context(azure_emulator((*ACR_REGISTRIES, ACR_TEAM_B)))
        env = node_environment([aws, gcp, azure], run / "ca-bundle.pem")
        images = sorted(IMAGES.values())
        front = RegistryFront(registries.hosts(images, registries.verifiers(aws, gcp, azure)))
        ca = make_test_ca(run / "registry-ca")
        registries.start(run / "registries", Path(spec["registry"]), front, ca, stack,
                         stack.enter_context((run / "registries.log").open("wb")))  # fmt: skip
        registries.push_all(front, images, Path(spec["busybox"]), spec["arch"])
        # the node file the ACR plugin's shipped args name, in every node's /etc
        Path(AZURE_JSON).parent.mkdir(parents=True, exist_ok=True)
        Path(AZURE_JSON).write_text(Path(azure.files["config"]).read_text())
        layer = testimages.busybox_layer(Path(spec["busybox"]))
        pause = testimages.archive(
            run / "pause.tar", runtime.PAUSE_IMAGE, testimages.pause(layer, spec["arch"])
        )
        Path(CA_IN_ETC).parent.mkdir(parents=True)
        shutil.copy(env["REQUESTS_CA_BUNDLE"], CA_IN_ETC)  # the agents' dry run reads it there
        plane = controlplane.start(
            run / "control-plane", spec["etcd"], spec["apiserver"], NODE_IP, stack,
            stack.enter_context((run / "control-plane.log").open("wb")),
        )  # fmt: skip
        controlplane.start_controller_manager(
            plane, spec["controller_manager"], stack,
            stack.enter_context((run / "controller-manager.log").open("wb")),
        )  # fmt: skip
        controlplane.start_scheduler(
            plane, spec["scheduler"], stack,
            stack.enter_context((run / "scheduler.log").open("wb")),
        )  # fmt: skip
        cluster = Cluster(spec, run, plane)
        image_name = spec["image_name"]
        base = image_name.rsplit(":", 1)[0]
        upgraded = version_image(Path(spec["tarball"]), "0.2.0", run, spec["arch"])
        for name, ip in NODES.items():
            runtime.make_subtree(subtrees[name])
            node_spec = {
                "name": name, "ip": ip, "run_dir": str(run / name), "kubelet": spec["kubelet"],
                "kubeconfig": str(controlplane.node_kubeconfig(plane, name)),
                "containerd": spec["containerd"], "crictl": spec["crictl"], "pause": str(pause),
                "ca_bundle": str(ca.bundle), "cgroup_root": subtrees[name], "env": env,
                "images": [[spec["image_archive"], base], [str(upgraded), base]],
                "break_on": BREAKS_NODE_B if name == "node-b" else "",
            }  # fmt: skip
            (run / f"{name}.json").write_text(json.dumps(node_spec))
            process = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", sys.executable, "-m",
                 "tests.e2e.fleetnode", str(run / f"{name}.json")],
                cwd=spec["repo"], stdout=(run / f"{name}.log").open("wb"), stderr=subprocess.STDOUT,
            )  # fmt: skip
            stack.callback(_terminate, process)
            cluster.wait(f"{name} to start", lambda name=name: (run / name / "ready").exists(), 120)
            cluster.pids[name] = process.pid
        try:
            _phases(cluster, result, env, image_name, run)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            result["error"] = str(exc)
            result["diagnosis"] = {
                "daemonset": cluster.daemonset(),
                "pods": [
                    (
                        p["metadata"]["name"],
                        p["spec"].get("nodeName"),
                        p.get("status", {}).get("phase"),
                    )
                    for p in (plane.get(f"/api/v1/namespaces/{NAMESPACE}/pods") or {"items": []})[
                        "items"
                    ]
                ],
                "events": [
                    (e["involvedObject"].get("name"), e["reason"], e["message"][:300])
                    for e in (plane.get(f"/api/v1/namespaces/{NAMESPACE}/events") or {"items": []})[
                        "items"
                    ]
                ],
                "annotations": {name: cluster.annotations(name) for name in NODES},
                # what keeps a DaemonSet's pods off a node
                "taints": {
                    name: (plane.get(f"/api/v1/nodes/{name}") or {})
                    .get("spec", {})
                    .get("taints", [])
                    for name in NODES
                },
            }
        result["events"] = cluster.events()
        result["agent_logs"] = cluster.agent_logs()
        result["restarts"] = {name: cluster.restarts(name) for name in NODES}
    Path(spec["result"]).write_text(json.dumps(result, default=str))
    return 0


def _phases(
    cluster: Cluster, result: dict[str, Any], env: dict[str, str], image_name: str, run: Path
) -> None:
    plane = cluster.plane
    cluster.wait("both nodes Ready", lambda: all(
        any(c["type"] == "Ready" and c["status"] == "True"
            for c in (plane.get(f"/api/v1/nodes/{n}") or {}).get("status", {}).get("conditions", []))
        for n in NODES), 120)  # fmt: skip
    plane.service_account(realpulls.NAMESPACE, realpulls.SERVICE_ACCOUNT, {})
    before = {name: cluster.snapshot(name) for name in NODES}
    result["before"] = before
    agent_env = {k: v for k, v in env.items() if k != "PATH"} | {
        "REQUESTS_CA_BUNDLE": "/host" + CA_IN_ETC,
    }
    values: dict[str, Any] = {
        "image": {"repository": image_name.rsplit(":", 1)[0], "pullPolicy": "Never"},
        "mode": "flags", "providers": ["aws", "azure", "gcp"],
        # ACR's dry run needs a registry of ours: a sample registry is nobody's
        "providerSettings": {"azure": {"dryRunImage": IMAGES["acr"]}},
        # the sandbox's nodes are kubeadm's on Debian: the narrowed mounts, and the CA the dry run
        # reads (as an operator adds a file a provider needs)
        "flags": {"platform": "kubeadm",
                  "extraHostPaths": [{"path": str(Path(CA_IN_ETC).parent)}],
                  "healthz": "http://$(HOST_IP):10248/healthz",
                  "metrics": "http://$(HOST_IP):10255/metrics", "healthTimeout": 60,
                  "leaseSeconds": 30, "apiServer": {"host": "127.0.0.1", "port": "6443"},
                  "env": agent_env},
    }  # fmt: skip
    chart = Path(cluster.spec["chart"])

    ready: dict[str, Any] = {}  # the DaemonSet's status as the last wait saw it ready

    def seen_ready() -> bool:
        ready.clear()
        ready.update(cluster.daemonset())
        return ready.get("numberReady") == 2

    def phase(name: str, waited: bool = False) -> dict[str, Any]:
        found = {
            "annotations": {n: cluster.annotations(n) for n in NODES},
            "files": {n: cluster.snapshot(n) for n in NODES},
            "restarts": {n: len(cluster.restarts(n)) for n in NODES},
            # what the wait saw: a readiness probe may flap on a busy machine right after
            "daemonset": dict(ready) if waited else cluster.daemonset(),
        }
        result["phases"][name] = found
        return found

    # 1. install: the agents take turns restarting their kubelets, then pass their dry run
    cluster.helm("install", chart, values)
    cluster.wait("both nodes installed and ready", lambda: set(cluster.results().values()) == {"installed"}
                 and seen_ready())  # fmt: skip
    phase("install", waited=True)
    result["pulls"] = {
        f"{name}/{cloud}": cluster.pull(name, f"pull-{name}-{cloud}", image)
        for name in NODES
        for cloud, image in IMAGES.items()
    }
    # 2. a new image version, the same config: no restart
    cluster.helm("upgrade", chart_as("0.2.0", run), values)
    cluster.wait("both nodes on 0.2.0", lambda: set(cluster.versions().values()) == {"0.2.0"}
                 and cluster.daemonset().get("numberReady") == 2
                 and cluster.daemonset().get("updatedNumberScheduled") == 2)  # fmt: skip
    phase("upgrade")
    # 3. values the kubelet would refuse (and the chart's schema cannot tell: annotation keys
    # required of a service account that is not): the first node refuses, the rollout stops there
    refusing = values | {
        "providerSettings": {"aws": {"tokenAttributes": {
            "serviceAccountTokenAudience": "sts", "cacheType": "Token",
            "requireServiceAccount": False, "requiredServiceAccountAnnotationKeys": ["a.io/b"]}}}
    }  # fmt: skip
    cluster.helm("upgrade", chart_as("0.2.0", run), refusing)
    cluster.wait("a node to refuse", lambda: "refused" in cluster.results().values())
    time.sleep(20)  # the rollout does not go on
    phase("refused")
    # 4. values whose kubelet does not come back on node-b: rolled back there
    breaking = values | {
        "providerSettings": values["providerSettings"] | {"aws": {"args": [BREAKS_NODE_B]}}
    }
    cluster.helm("upgrade", chart_as("0.2.0", run), breaking)
    # (the node that refused goes first: if that is node-b, the rollout stops there)
    # node-b's agent is killed in its health wait: with its kubelet down nothing restarts the
    # pod, and the rollback the agent armed on the node puts the config back and restarts the
    # kubelet; the agent then comes back, says so, tries again, and rolls back itself
    result["killed_agent"] = cluster.kill_agent_in_its_wait("node-b")
    cluster.wait("node-b rolled back", lambda: cluster.results()["node-b"] == "rolled back", 420)
    phase("rolled back")
    # 5. helm uninstall alone: its pre-delete hook tells the agents to uninstall and waits for
    # both nodes before helm deletes anything
    result["helm_uninstall"] = cluster.helm("uninstall", None, timeout=600)
    result["hook_ran_on"] = [
        name
        for name in NODES
        if f"{NAMESPACE}/{RELEASE}-uninstall-"
        in (run / name / "kubelet.log").read_text(errors="replace")
    ]
    phase("uninstalled")
    result["release_left"] = {
        "daemonset": cluster.plane.get(
            f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{RELEASE}-agent"
        ),
        "hook_job": cluster.plane.get(
            f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/{RELEASE}-uninstall"
        ),
    }
    cluster.wait("both kubelets Ready again", lambda: all(
        any(c["type"] == "Ready" and c["status"] == "True"
            for c in (plane.get(f"/api/v1/nodes/{n}") or {}).get("status", {}).get("conditions", []))
        for n in NODES), 120)  # fmt: skip
    # the empty directory the kubelet made for the agents' mount, removed by each node's systemd
    # (the agent's tidy) once the pod no longer needs it made again
    cluster.wait("the nodes' tidy", lambda: not any(
        (cluster.root(n) / "var/lib/credprovider").exists() for n in NODES), 60)  # fmt: skip
    result["after"] = {name: cluster.snapshot(name) for name in NODES}
    # each node's journal: the transient services the agents started (rollbacks, the tidy)
    result["journals"] = {
        name: (run / name / "journal.log").read_text(errors="replace")
        for name in NODES
        if (run / name / "journal.log").exists()
    }


def _terminate(process: subprocess.Popen[bytes]) -> None:
    controlplane.stop_process(process)


def _stop_everything(subtrees: dict[str, str]) -> list[str]:
    left = realpulls.stop(subtrees["node-a"])
    for name, subtree in subtrees.items():
        if name != "node-a":
            left += runtime.remove_subtree(subtree)
    return left


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

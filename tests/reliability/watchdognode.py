"""A kubeadm node whose agent dies during the kubelet's health wait
(``python -m tests.reliability.watchdognode SPEC.json``, run by test_commit_confirmed.py in a
mount and pid namespace of its own, ``/run`` a fresh tmpfs).

The node is this namespace's own ``/``: ``/etc`` an overlay, ``/var/lib`` on the run's disk, laid
out as kubeadm leaves a node. Its systemd is the stand-in private socket (emulators/systemd.py): its
``RestartUnit("kubelet")`` "starts" a kubelet with the flags the node's files give it, healthy
(``/healthz`` 200) unless its credential provider config holds ``BROKEN``; its
``StartTransientUnit`` runs a service's command for real. The agent is the built bundle's
``credprovider agent apply --root /``, as the chart's pod runs it (there, ``/host``); the armed
rollback is the bundle's own copy placed on the node, run by the stand-in systemd.

The result is JSON: each step's output, the kubelet's restarts, the node's files, the units the
stand-in systemd started and their journal.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from emulators.http import FakeRequest, FakeResponse, serve
from emulators.systemd import NoSuchUnit, standin_systemd

DROP_IN = "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"
FILES = {
    "/etc/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet\n",
    DROP_IN: "[Service]\nEnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\n"
    "EnvironmentFile=-/etc/default/kubelet\n",
    "/var/lib/kubelet/kubeadm-flags.env": 'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5"\n',
    "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n",
}
WATCHED = (*FILES, "/etc/kubernetes/image-credential-provider-config.yaml")


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True)


def isolate(run: Path) -> None:
    sh("mount", "--make-rprivate", "/")
    # on the run's disk, as a node's /var/lib (the agent refuses a tmpfs home while /etc lasts)
    (run / "var-lib").mkdir(parents=True, exist_ok=True)
    sh("mount", "--bind", str(run / "var-lib"), "/var/lib")
    upper, work = run / "etc-upper", run / "etc-work"
    upper.mkdir()
    work.mkdir()
    sh("mount", "-t", "overlay", "overlay",
       "-o", f"lowerdir=/etc,upperdir={upper},workdir={work}", "/etc")  # fmt: skip
    for path, text in FILES.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    Path("/run/systemd").mkdir(parents=True, exist_ok=True)


def files() -> dict[str, str | None]:
    return {path: Path(path).read_text() if Path(path).is_file() else None for path in WATCHED}


class Kubelet:
    """What the stand-in systemd starts: the flags the node's files give, healthy or not."""

    def __init__(self) -> None:
        self.healthy = True
        self.restarts: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def start(self, unit: str) -> str:
        if unit != "kubelet":
            raise NoSuchUnit(unit)
        args: list[str] = []
        for path in ("/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet"):
            for line in Path(path).read_text().splitlines():
                if "=" in line:  # systemd's EnvironmentFile, then $VAR split at spaces
                    args += [w for v in shlex.split(line.partition("=")[2]) for w in v.split()]
        config = next(
            (
                a.split("=", 1)[1]
                for a in args
                if a.startswith("--image-credential-provider-config=")
            ),
            "",
        )
        text = Path(config).read_text() if config and Path(config).is_file() else ""
        with self.lock:
            self.healthy = "BROKEN" not in text
            self.restarts.append({"at": time.time(), "args": args, "healthy": self.healthy})
        return "done"

    def healthz(self, request: FakeRequest) -> FakeResponse:
        if self.healthy:
            return FakeResponse.text("ok")
        return FakeResponse.text("the kubelet is not running", status=500)


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    run = Path(spec["run_dir"])
    isolate(run)
    kubelet = Kubelet()
    result: dict[str, Any] = {"before": files()}
    journal = run / "journal.log"
    with (
        serve(kubelet.healthz) as health,
        standin_systemd(
            Path("/run/systemd/private"), kubelet.start, journal, run_services=True, root=Path("/")
        ) as systemd,
    ):
        agent = [
            spec["tool"], "agent", "apply", "--root", "/", "--bundle", spec["bundle"],
            "--providers", "aws", "--systemd-socket", "/run/systemd/private",
            "--healthz", f"{health.url}/healthz", "--health-timeout", str(spec["health_timeout"]),
        ]  # fmt: skip
        broken = ["--provider-settings", json.dumps({"aws": {"args": ["BROKEN"]}})]

        def step(name: str, argv: list[str]) -> None:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
            result[name] = {"rc": done.returncode, "out": done.stdout, "err": done.stderr}

        # 1. an install the kubelet comes back from: armed, confirmed, disarmed
        step("install", agent)
        result["installed"] = files()
        result["units_after_install"] = [unit for unit, _ in systemd.started]
        result["live_after_install"] = systemd.live()
        # 2. a config the kubelet does not come back from; the agent killed during its wait
        restarts = len(kubelet.restarts)
        process = subprocess.Popen(
            [*agent, *broken], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 120
        while len(kubelet.restarts) == restarts and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # in its health wait
        process.kill()
        process.communicate()
        killed_at = time.time()
        result["broken_restart"] = (
            kubelet.restarts[-1] if len(kubelet.restarts) > restarts else None
        )
        result["broken_files"] = files()
        # no agent from here: the node's own rollback puts it back and restarts the kubelet
        deadline = time.monotonic() + spec["health_timeout"] + 60
        while time.monotonic() < deadline and not (
            kubelet.healthy and len(kubelet.restarts) > restarts + 1
        ):
            time.sleep(0.1)
        systemd.wait_services(60)
        result["healed_after"] = (
            (kubelet.restarts[-1]["at"] - killed_at) if kubelet.healthy else None
        )
        result["healed_restart"] = kubelet.restarts[-1]
        result["healed_files"] = files()
        result["state"] = json.loads(Path("/var/lib/credprovider/agent/state.json").read_text())
        # 3. the agent's next start says what happened (and finds the node as installed)
        step("next start", [*agent, "--json"])
        step("after", agent)
        # 4. uninstall: the node as before the first install
        step("uninstall", [spec["tool"], "agent", "uninstall", "--root", "/",
                           "--systemd-socket", "/run/systemd/private",
                           "--healthz", f"{health.url}/healthz", "--health-timeout", "5"])  # fmt: skip
        systemd.wait_services(60)
        result["uninstalled"] = files()
        result["home_left"] = Path("/var/lib/credprovider").exists()
        result["units"] = systemd.started
        result["restarts"] = kubelet.restarts
    result["journal"] = journal.read_text() if journal.exists() else ""
    Path(spec["result"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

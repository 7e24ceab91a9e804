"""One kubeadm-style node of the fleet sandbox (tests/e2e/fleetcluster.py starts one per node as
``unshare --mount --propagation private python -m tests.e2e.fleetnode SPEC.json``): its own
mount namespace, so its own ``/etc``, ``/var/lib``, ``/var/log`` and ``/run``, in the sandbox's
network (its kubelet on its own address) and PID namespaces.

It lays out the node as kubeadm does (the kubelet unit, kubeadm's drop-in, ``kubeadm-flags.env``,
``/etc/default/kubelet``), starts containerd, imports the pause and the release's image, and stands
in for systemd: a private socket at ``/run/systemd/private`` (emulators/systemd.py) whose
``RestartUnit("kubelet")`` stops the kubelet and starts it again with the arguments the unit gives
it, read from those files at every start as systemd does. The kubelet runs with the flags the node's
files say, so a flag the agent writes takes effect at the restart and nowhere else.

With ``break_on`` in the spec, a start whose credential provider config contains that text starts a
kubelet that exits at once: the node's kubelet "does not come back" and the agent must roll back.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from emulators.systemd import NoSuchUnit, standin_systemd
from tests.e2e import runtime
from tests.e2e.controlplane import stop_process
from tests.e2e.node import kubelet_config, sh

KUBEADM_DROP_IN = """[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--kubeconfig={kubeconfig}"
Environment="KUBELET_CONFIG_ARGS=--config={config}"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart={kubelet} $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""
ENV_FILES = ("/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet")


def env_file(path: str) -> dict[str, str]:
    """``KEY=value`` lines as systemd's EnvironmentFile reads them (quotes removed)."""
    found: dict[str, str] = {}
    if not Path(path).is_file():
        return found
    for line in Path(path).read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            found[key.strip()] = " ".join(shlex.split(value))
    return found


class Kubelet:
    """The kubelet unit: started with the arguments the node's files give it."""

    def __init__(self, spec: dict[str, Any], run: Path, env: dict[str, str]) -> None:
        self.spec, self.run, self.env = spec, run, env
        self.process: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()
        self.restarts: list[dict[str, Any]] = []

    def argv(self) -> list[str]:
        values: dict[str, str] = {}
        for path in ENV_FILES:
            values |= env_file(path)
        args = [
            self.spec["kubelet"],
            f"--kubeconfig={self.spec['kubeconfig']}",
            f"--config={self.run / 'kubelet.yaml'}",
            *shlex.split(values.get("KUBELET_KUBEADM_ARGS", "")),
            *shlex.split(values.get("KUBELET_EXTRA_ARGS", "")),
        ]
        config = next(
            (
                a.split("=", 1)[1]
                for a in args
                if a.startswith("--image-credential-provider-config=")
            ),
            "",
        )
        breaking = self.spec.get("break_on")
        if breaking and config and Path(config).is_file() and breaking in Path(config).read_text():
            args.append("--no-such-flag-the-kubelet-refuses")
        return args

    def start(self) -> None:
        log = (self.run / "kubelet.log").open("ab")
        self.process = subprocess.Popen(
            self.argv(), env=self.env, stdout=log, stderr=subprocess.STDOUT
        )

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)

    def restart_unit(self, unit: str) -> str:
        """systemd's side of ``RestartUnit``: the job's result."""
        if unit != "kubelet":
            raise NoSuchUnit(unit)
        with self.lock:
            started = time.time()
            self.stop()
            self.start()
            time.sleep(1)
            self.restarts.append(
                {"start": started, "end": time.time(), "argv": self.argv()[3:],
                 "exited": self.process.poll() if self.process else None}
            )  # fmt: skip
            # whole at one rename: the test polls it (a truncated file read as it is written
            # failed a run with "Expecting value")
            written = self.run / ".restarts.json.new"
            written.write_text(json.dumps(self.restarts))
            written.replace(self.run / "restarts.json")
        return "done"


def layout(spec: dict[str, Any], run: Path) -> None:
    """The node's files as kubeadm leaves them."""
    unit = Path("/etc/systemd/system/kubelet.service")
    unit.parent.mkdir(parents=True, exist_ok=True)
    unit.write_text(f"[Service]\nExecStart={spec['kubelet']}\nRestart=always\n")
    drop_in = Path("/etc/systemd/system/kubelet.service.d/10-kubeadm.conf")
    drop_in.parent.mkdir(parents=True, exist_ok=True)
    drop_in.write_text(
        KUBEADM_DROP_IN.format(
            kubeconfig=spec["kubeconfig"], config=run / "kubelet.yaml", kubelet=spec["kubelet"]
        )
    )
    flags = Path("/var/lib/kubelet/kubeadm-flags.env")
    flags.parent.mkdir(parents=True, exist_ok=True)
    flags.write_text(
        f'KUBELET_KUBEADM_ARGS="--node-ip={spec["ip"]} --hostname-override={spec["name"]} '
        f"--root-dir={run / 'kubelet-root'} --cert-dir={run / 'pki'} "
        f'--volume-plugin-dir={run / "volume-plugins"} --v=2"\n'
    )
    Path("/etc/default").mkdir(exist_ok=True)
    Path("/etc/default/kubelet").write_text("KUBELET_EXTRA_ARGS=\n")
    Path("/run/systemd").mkdir(parents=True, exist_ok=True)


def isolate(run: Path) -> None:
    """This node's own /etc (an overlay on the sandbox's), /var/lib (on the run's disk, as a
    node's: the agent refuses to place plugins on a tmpfs while the kubelet's files last),
    /var/log and /run."""
    sh("mount", "--make-rprivate", "/")
    (run / "var-lib").mkdir(parents=True, exist_ok=True)
    sh("mount", "--bind", str(run / "var-lib"), "/var/lib")
    for directory in ("/var/log", "/run"):
        sh("mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", directory)
    upper, work = run / "etc-upper", run / "etc-work"
    upper.mkdir(parents=True)
    work.mkdir()
    sh("mount", "-t", "overlay", "overlay",
       "-o", f"lowerdir=/etc,upperdir={upper},workdir={work}", "/etc")  # fmt: skip


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    run = Path(spec["run_dir"])
    isolate(run)
    layout(spec, run)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # a network configuration, so that the runtime reports its network ready and the node turns
    # Ready (the agents check that after a restart); every pod here is on the node's network, so
    # no CNI plugin ever runs
    cni = run / "containerd" / "cni"
    cni.mkdir(parents=True)
    (cni / "10-e2e.conflist").write_text(
        json.dumps({"cniVersion": "1.0.0", "name": "e2e", "plugins": [{"type": "loopback"}]})
    )
    with ExitStack() as stack:
        started = runtime.start(
            run / "containerd", Path(spec["containerd"]), Path(spec["crictl"]),
            Path(spec["pause"]), Path(spec["ca_bundle"]), stack,
            stack.enter_context((run / "containerd.log").open("wb")),
        )  # fmt: skip
        for archive, name in spec["images"]:
            runtime.import_archive(started, Path(archive), "--base-name", name)
        config = kubelet_config(run, None, started.address, f"/{spec['cgroup_root']}")
        config |= {
            "address": spec["ip"], "healthzBindAddress": spec["ip"],
            "staticPodPath": str(run / "manifests"),
        }  # fmt: skip
        (run / "manifests").mkdir()
        (run / "kubelet.yaml").write_text(json.dumps(config))
        kubelet = Kubelet(spec, run, spec["env"])
        kubelet.start()
        stack.callback(kubelet.stop)
        # the node is this namespace's "/" (its own /etc and /var/lib): the services run here
        private, journal = Path("/run/systemd/private"), run / "journal.log"
        stack.enter_context(
            standin_systemd(private, kubelet.restart_unit, journal, True, Path("/"))
        )
        (run / "ready").write_text(str(Path("/proc/self").resolve().name))
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""A real container runtime inside the e2e sandbox: containerd 2.x with its runc shim (Debian's
runc), its state under the run's directory, a private tmpfs on /run, its own socket, and a cgroup
sub-tree of its own in every hierarchy, removed when the run ends (cgroups are shared with the host).

Settings this kind of machine (a VM without a container engine) needs: ``restrict_oom_score_adj``
(no CAP_SYS_RESOURCE in the bounding set, so runc cannot lower ``oom_score_adj``), a locally imported
pause image pinned as the sandbox image, overlayfs, and no containerd plugin that writes outside the
run (``/opt/containerd``, NRI). Pods use the host's network (the sandbox's), so no CNI is needed.
Registries are trusted through ``SSL_CERT_FILE`` (the test CA bundle) and mirrors are configured in
``certs.d/<host>/hosts.toml``, both in containerd's environment and directory only.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tests.e2e.controlplane import stop_process

PAUSE_IMAGE = "registry.k8s.io/pause:3.10.2"
CGROUP_ROOT = "/sys/fs/cgroup"
RUNC = "/usr/sbin/runc"


@dataclass(frozen=True)
class Runtime:
    socket: Path
    ctr: Path
    crictl: Path
    address: str


def pod_log(namespace: str, pod: str, uid: str, container: str) -> list[str]:
    """What ``container`` of the pod printed: the kubelet's CRI log files, timestamps and streams
    taken off each line."""
    logs = sorted(Path("/var/log/pods").glob(f"{namespace}_{pod}_{uid}/{container}/*.log"))
    return [line.split(" ", 3)[-1] for path in logs for line in path.read_text().splitlines()]


def config(directory: Path) -> str:
    """containerd's config (TOML; version 3, which 2.x reads)."""
    return f"""version = 3
root = "{directory}/root"
state = "{directory}/state"
imports = []
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.nri.v1.nri",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{directory}/containerd.sock"

[ttrpc]
  address = "{directory}/containerd.sock.ttrpc"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "{directory}/certs.d"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  cdi_spec_dirs = []
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = "{RUNC}"
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = []
    conf_dir = "{directory}/cni"
"""


def mirror(directory: Path, host: str, mirror_url: str) -> None:
    """``host``'s pulls go to ``mirror_url`` first (containerd's hosts.toml), then to ``host``."""
    hosts = directory / "certs.d" / host
    hosts.mkdir(parents=True, exist_ok=True)
    (hosts / "hosts.toml").write_text(
        f'server = "https://{host}"\n\n'
        f'[host."{mirror_url}"]\n  capabilities = ["pull", "resolve"]\n'
    )


def start(
    directory: Path,
    containerd: Path,
    crictl: Path,
    pause_archive: Path,
    ca_bundle: Path,
    stack: ExitStack,
    log: IO[bytes],
) -> Runtime:
    """containerd started (stopped with ``stack``) and the pause image imported; ``directory``
    may already hold ``certs.d`` (mirrors)."""
    (directory / "certs.d").mkdir(parents=True, exist_ok=True)
    (directory / "config.toml").write_text(config(directory))
    env = {
        "PATH": f"{containerd.parent}:/usr/sbin:/usr/bin:/sbin:/bin",
        "SSL_CERT_FILE": str(ca_bundle),
    }
    process = subprocess.Popen(
        [str(containerd), f"--config={directory / 'config.toml'}", "--log-level=info"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    stack.callback(stop_process, process)
    runtime = Runtime(
        directory / "containerd.sock",
        containerd.parent / "ctr",
        crictl,
        f"unix://{directory / 'containerd.sock'}",
    )
    deadline = time.monotonic() + 30
    while not runtime.socket.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"containerd did not start ({process.poll()})")
        time.sleep(0.1)
    import_archive(runtime, pause_archive)
    return runtime


def import_archive(runtime: Runtime, archive: Path, *flags: str) -> None:
    """An OCI archive's images into the CRI's namespace (what the kubelet's pods can run)."""
    done = subprocess.run(
        [str(runtime.ctr), f"--address={runtime.socket}", "--namespace=k8s.io",
         "images", "import", *flags, str(archive)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"ctr images import {archive.name}: {done.stderr.strip()}")


# --- the run's own cgroup sub-tree -----------------------------------------------------------------


def subtree_name(run: Path) -> str:
    """The run's cgroup sub-tree: a name no other run shares (cgroups are the host's)."""
    return f"credprovider-e2e-{hashlib.sha256(bytes(run)).hexdigest()[:12]}"


def hierarchies(root: Path = Path(CGROUP_ROOT)) -> list[Path]:
    """Every mounted hierarchy under ``root`` (v1 controllers, named ones, the unified v2)."""
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return sorted(
        Path(mount)
        for mount in mounts
        if Path(mount).parent == root or (Path(mount) == root and _is_cgroup2(root))
    )


def _is_cgroup2(path: Path) -> bool:
    return (path / "cgroup.controllers").exists()


def make_subtree(name: str) -> list[Path]:
    """``name`` created in every hierarchy (the kubelet's ``cgroupRoot``); the directories."""
    made = []
    for hierarchy in hierarchies():
        directory = hierarchy / name
        directory.mkdir(exist_ok=True)
        made.append(directory)
        if hierarchy.name == "cpuset":
            for knob in ("cpuset.cpus", "cpuset.mems"):
                (directory / knob).write_text((hierarchy / knob).read_text())
    return made


def remove_subtree(name: str, timeout: float = 30) -> list[str]:
    """Kill what is left in ``name``'s cgroups and remove them, deepest first; what could not be
    removed (empty when all went)."""
    deadline = time.monotonic() + timeout
    left: list[str] = []
    while True:
        left = []
        for hierarchy in hierarchies():
            top = hierarchy / name
            if not top.exists():
                continue
            for directory in sorted(
                (p for p in [top, *top.rglob("*")] if p.is_dir()),
                key=lambda p: len(p.parts),
                reverse=True,
            ):
                _kill_members(directory)
                try:
                    directory.rmdir()
                except OSError:
                    left.append(str(directory))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _kill_members(directory: Path) -> None:
    try:
        members = (directory / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in members:
        with suppress(OSError, ValueError):
            os.kill(int(pid), signal.SIGKILL)

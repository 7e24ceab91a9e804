"""What every real-kubelet run shares: running tests/e2e/node.py in private namespaces, and the
checks that the host is as it was afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from release.bundle import BUNDLE_DIR, REPO
from tests.e2e.node import AZURE_JSON, KERNEL_SETTINGS
from tests.e2e.scenario import AZURE_JSON_TEAM_B, IDENTITIES
from tests.helpers import config_file, provider_entry


def host_state() -> dict[str, Any]:
    """What a kubelet run could leave behind on the host."""
    state: dict[str, Any] = {
        "sysctl": {name: Path(f"/proc/sys/{name}").read_text() for name in KERNEL_SETTINGS},
        "mounts": sorted(
            " ".join(line.split()[4:])
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
        ),
        "files": {},
        "cgroups": {},
        "network_devices": sorted(p.name for p in Path("/sys/class/net").iterdir()),
    }
    for directory in (
        "/var/lib/kubelet", "/var/lib/containerd", "/var/log/containers", "/var/log/pods",
        "/run/containerd", "/opt/containerd", "/etc/containerd",
    ):  # fmt: skip
        root = Path(directory)
        state["files"][directory] = (
            sorted(str(p) for p in root.rglob("*")) if root.exists() else None
        )
    cgroup_root = Path("/sys/fs/cgroup")
    for controller in sorted(cgroup_root.iterdir()) if cgroup_root.exists() else []:
        if controller.is_dir():
            state["cgroups"][controller.name] = sorted(
                p.name for p in controller.iterdir() if p.is_dir()
            )
    return state


def left_running(*programs: Path) -> list[str]:
    """Processes of this run still alive: one of ``programs`` (the kubelet, the fake CRI, the
    control plane, containerd and its shims, runc, the registry server), or a plugin of the
    bundle. Under pytest-xdist, what another worker runs (a doctor of the bundle, the kubelet
    harness) is its own, not this run's: a process descending from another worker is left out
    (an orphan of this run, re-parented to init, is still counted)."""
    markers = [str(program) for program in programs] + [str(BUNDLE_DIR.resolve())]
    others = _other_workers()
    return sorted(
        cmdline
        for pid, cmdline in ((pid, _cmdline(pid)) for pid in os.listdir("/proc") if pid.isdigit())
        if any(marker in cmdline for marker in markers) and not _descends(int(pid), others)
    )


def _other_workers() -> set[int]:
    """The other pytest-xdist workers: this worker's siblings (the controller starts each)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return set()
    me, controller = os.getpid(), os.getppid()
    return {
        int(pid)
        for pid in os.listdir("/proc")
        if pid.isdigit() and int(pid) != me and _parent(int(pid)) == controller
    }


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])


def _descends(pid: int, ancestors: set[int]) -> bool:
    for _ in range(64):
        if pid in ancestors:
            return True
        if pid <= 1:
            return False
        pid = _parent(pid)
    return False


def _cmdline(pid: str) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def run_kubelet(
    binaries: tuple[Path, Path],
    config: Path,
    tmp_path: Path,
    module: str = "tests.e2e.node",
    **more: Any,
) -> dict[str, Any]:
    """``module``'s run (the real kubelet on the fake CRI, the bundle its bin dir) sandboxed."""
    kubelet, fakecri = binaries
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = {
        "run_dir": str(run_dir),
        "kubelet": str(kubelet),
        "fakecri": str(fakecri),
        "config": str(config),
        "bin_dir": str(BUNDLE_DIR),
        "result": str(tmp_path / "result.json"),
        "timeout": 120,
        **more,
    }
    return run_sandboxed(module, spec, tmp_path, 600)


def run_sandboxed(
    module: str, spec: dict[str, Any], tmp_path: Path, timeout: float
) -> dict[str, Any]:
    """``python -m module SPEC`` in private network, mount and PID namespaces; the JSON it wrote
    to ``spec["result"]``."""
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run(
        ["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc",
         sys.executable, "-m", module, str(tmp_path / "spec.json")],
        cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    result: dict[str, Any] = json.loads(Path(spec["result"]).read_text())
    return result


def run_with_control_plane(
    binaries: tuple[Path, Path],
    control_plane_binaries: tuple[Path, Path],
    config: Path,
    tmp_path: Path,
    **more: Any,
) -> dict[str, Any]:
    """:func:`run_kubelet` with the sandbox's control plane (etcd and kube-apiserver)."""
    etcd, apiserver = control_plane_binaries
    return run_kubelet(
        binaries, config, tmp_path, control_plane=True, etcd=str(etcd), apiserver=str(apiserver),
        **more,
    )  # fmt: skip


def linked_bin_dir(directory: Path, names: Iterable[str]) -> Path:
    """``directory``/bin holding each provider name as a link to the bundle's launcher, as an
    operator installs several providers of one plugin (the kubelet refuses to start when a
    provider's binary is missing)."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True)
    for name in names:
        (bin_dir / name).symlink_to(BUNDLE_DIR.resolve() / "credprovider")
    return bin_dir


def identities_node(directory: Path, cache: Path | None) -> tuple[Path, Path]:
    """The config of the identities run and its bin dir: each provider a link to the bundle's
    launcher under its own name, claiming its own registry, with its own identity."""
    bin_dir = linked_bin_dir(directory, (provider.name for provider in IDENTITIES))
    providers = []
    for provider in IDENTITIES:
        env = {}
        if provider.cloud == "ecr":
            args: list[str] = []
            env = {
                "AWS_ACCESS_KEY_ID": provider.identity,
                "AWS_SECRET_ACCESS_KEY": f"{provider.team}-secret",
            }
        elif provider.cloud == "acr":
            args = [AZURE_JSON_TEAM_B if provider.team == "team-b" else AZURE_JSON]
        else:
            args = ["get-credentials", f"--impersonate-service-account={provider.identity}"]
        if cache is not None:
            env["CREDPROVIDER_CACHE_DIR"] = str(cache)
        providers.append(
            provider_entry(
                name=provider.name,
                matchImages=[provider.match],
                args=args,
                env=[{"name": k, "value": v} for k, v in env.items()],
            )
        )
    return config_file(directory, *providers), bin_dir

"""The binaries every real-kubelet run needs, built once per session (release/gobuild.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from release import debs, gobuild
from release.targets import host_target
from tests.e2e import runtime
from tests.helpers import require_bundle, unavailable


@pytest.fixture(scope="session")
def binaries() -> tuple[Path, Path]:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        unavailable("the real-kubelet run needs root, unshare and ip (private namespaces)")
    require_bundle()
    return _built((gobuild.KUBELET, "kubelet"), (gobuild.FAKE_CRI, "fakecri"))


@pytest.fixture(scope="session")
def control_plane_binaries(binaries: tuple[Path, Path]) -> tuple[Path, Path]:
    """etcd and kube-apiserver, from the kubelet's module and pins."""
    return _built((gobuild.ETCD, "etcd"), (gobuild.KUBE_APISERVER, "kube-apiserver"))


def _built(first: tuple[str, str], second: tuple[str, str]) -> tuple[Path, Path]:
    """Two binaries of the module (``(package, name)`` each), or the run skipped (or failed, where
    the bundle and the Go builds are required) with the build's error."""
    try:
        return gobuild.binary(*first), gobuild.binary(*second)
    except gobuild.GoBuildError as exc:
        unavailable(str(exc))
        raise


@pytest.fixture(scope="session")
def runtime_tools(control_plane_binaries: tuple[Path, Path]) -> dict[str, str]:
    """What the real-runtime sandbox runs besides the kubelet and the control plane: containerd
    (with its shim and ctr), the registry server and crictl from the Go module proxy, Debian's
    runc, and Debian's static busybox (the images' one layer)."""
    if not Path(runtime.RUNC).exists():
        unavailable(f"{runtime.RUNC} is missing: make test installs Debian's runc")
    target = host_target()
    try:
        tools = {
            name: str(gobuild.released(tool))
            for name, tool in (
                ("containerd", gobuild.CONTAINERD),
                ("registry", gobuild.REGISTRY),
                ("crictl", gobuild.CRICTL),
            )
        }
        busybox = debs.unpacked("busybox-static", target, fetch=False) / "bin" / "busybox"
    except (gobuild.GoBuildError, debs.DebError) as exc:
        unavailable(str(exc))
    return {**tools, "busybox": str(busybox), "arch": target.arch}

"""The binaries every real-kubelet run needs, built once per session (emulators/gobuild.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from emulators import gobuild
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

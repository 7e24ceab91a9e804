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
    try:
        return gobuild.binary(gobuild.KUBELET, "kubelet"), gobuild.binary(
            gobuild.FAKE_CRI, "fakecri"
        )
    except gobuild.GoBuildError as exc:
        unavailable(str(exc))
        raise


@pytest.fixture(scope="session")
def control_plane_binaries(binaries: tuple[Path, Path]) -> tuple[Path, Path]:
    """etcd and kube-apiserver, from the kubelet's module and pins."""
    try:
        return gobuild.binary(gobuild.ETCD, "etcd"), gobuild.binary(
            gobuild.KUBE_APISERVER, "kube-apiserver"
        )
    except gobuild.GoBuildError as exc:
        unavailable(str(exc))
        raise

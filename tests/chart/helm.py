"""Rendering charts/credprovider with Helm (built from the module proxy, cached): shared by the
chart's tests and the real-runtime run that starts its agent pod."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from release import gobuild
from release.bundle import REPO
from tests.helpers import unavailable

CHART = REPO / "charts" / "credprovider"
KUBE_VERSION = "1.36.4"


def helm_binary() -> Path:
    try:
        return gobuild.released(gobuild.HELM)
    except gobuild.GoBuildError as exc:
        unavailable(str(exc))
        raise


def render(
    helm: Path, *values: str, namespace: str = "kube-system"
) -> subprocess.CompletedProcess[str]:
    sets = [arg for value in values for arg in ("--set", value)]
    return subprocess.run(
        [str(helm), "template", "fleet", str(CHART), "--namespace", namespace,
         "--kube-version", KUBE_VERSION, *sets],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def documents(helm: Path, *values: str) -> dict[str, dict[str, Any]]:
    """The rendered documents by kind."""
    done = render(helm, *values)
    assert done.returncode == 0, done.stderr
    return {doc["kind"]: doc for doc in yaml.safe_load_all(done.stdout) if doc}


def agent_pod(helm: Path, *values: str) -> dict[str, Any]:
    """The pod spec the chart's DaemonSet makes on each node."""
    spec: dict[str, Any] = documents(helm, *values)["DaemonSet"]["spec"]["template"]["spec"]
    return spec

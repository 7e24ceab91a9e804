"""The fleet chart's agent on the sandbox's node (inside the sandbox, tests/e2e/node.py): the pod of
charts/credprovider's DaemonSet, as ``helm template`` renders it, runs the release image under
containerd with the chart's security context and host mounts. (The sandbox has no controller
manager to make pods from a DaemonSet: the test creates the pod the DaemonSet would, bound to the
node.) The install pod places the bundle, links and config; once it is deleted, the uninstall pod
(``action=uninstall``) puts the node back. What the node's directories held before, between and
after goes to the result.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from credprovider.paths import AGENT_CONFIG
from tests.e2e import controlplane, runtime

NAMESPACE = "kube-system"  # where system-node-critical pods may run
WATCHED = ("/etc/kubernetes", "/var/lib/credprovider")
Wait = Callable[[str, Callable[[], bool], float], None]


def snapshot() -> dict[str, str]:
    """Every path under the watched host directories: a link's target, a file's digest, or dir."""
    found: dict[str, str] = {}
    for top in WATCHED:
        if not os.path.lexists(top):
            continue
        found[top] = "dir"
        for directory, dirs, files in os.walk(top):
            for name in [*dirs, *files]:
                path = Path(directory) / name
                if path.is_symlink():
                    found[str(path)] = f"link:{os.readlink(path)}"
                elif path.is_dir():
                    found[str(path)] = "dir"
                else:
                    found[str(path)] = "file:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return found


def _printed(plane: controlplane.ControlPlane, pod: str) -> tuple[list[str], dict[str, Any]]:
    found = plane.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}") or {}
    uid = found.get("metadata", {}).get("uid", "")
    lines = runtime.pod_log(NAMESPACE, pod, uid, "agent")
    statuses = found.get("status", {}).get("containerStatuses") or [{}]
    return lines, statuses[0].get("state", {})


def _round(
    plane: controlplane.ControlPlane, name: str, pod_spec: dict[str, Any], wait_for: Wait
) -> dict[str, Any]:
    """One agent pod on the node, until it said what it did (or its container ended)."""
    plane.create(
        f"/api/v1/namespaces/{NAMESPACE}/pods",
        {"metadata": {"name": name}, "spec": {**pod_spec, "nodeName": controlplane.NODE_NAME}},
    )

    def said() -> bool:
        lines, state = _printed(plane, name)
        return bool(lines) or "terminated" in state

    wait_for(f"the agent pod {name}", said, 90)
    time.sleep(0.5)  # the rest of its report
    lines, state = _printed(plane, name)
    return {"printed": lines, "state": state, "events": plane.events(NAMESPACE, name)}


def run(
    plane: controlplane.ControlPlane,
    install: dict[str, Any],
    uninstall: dict[str, Any],
    wait_for: Wait,
) -> dict[str, Any]:
    """Install, then (the install pod deleted) uninstall, with the node's files at each point."""
    plane.service_account(NAMESPACE, install["serviceAccountName"], {})
    before = snapshot()
    installed = _round(plane, "fleet-agent-install", install, wait_for)
    between = snapshot()
    config = Path(AGENT_CONFIG)  # the chart's mode files, by default
    config_text = config.read_text() if config.exists() else ""
    plane.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/fleet-agent-install")
    wait_for(
        "the install pod to be gone",
        lambda: plane.get(f"/api/v1/namespaces/{NAMESPACE}/pods/fleet-agent-install") is None,
        60,
    )
    removed = _round(plane, "fleet-agent-uninstall", uninstall, wait_for)
    return {
        "before": before,
        "install": installed,
        "between": between,
        "config": config_text,
        "uninstall": removed,
        "after": snapshot(),
    }

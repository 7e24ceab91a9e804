"""A node's life in the chart's mode files, with the real kubelet, run as ``python -m
tests.e2e.lifecycle SPEC`` in private network, mount and PID namespaces (tests/e2e/sandbox.py):
``/var/lib``, ``/var/log`` and ``/run`` are the run's own, so the documented paths
(/var/lib/credprovider/agent) are used as they are and nothing of the host changes.

Each stage changes the node as an operator or the agent would, then starts the kubelet with the
flags provisioning gives it (docs/fleet.md) and records whether it started: its read-only port
answered with the hash of the config it loaded (``kubelet_credential_provider_config_info``), or it
exited (and its last lines). Stages, in order (``STAGES``):

* ``flags alone``: nothing laid (the docs before the bootstrap): the control, which must not start;
* ``bootstrap``: the provisioning commands as docs/fleet.md prints them, no agent yet;
* ``agent installed``: the bundle's ``credprovider agent apply --files-only``, as the chart's pod;
* ``agent uninstalled``: ``agent uninstall --files-only``, as ``action=uninstall``;
* ``uninstalled without a bootstrap``: the node wiped, the agent installed and uninstalled on the
  flags alone: what uninstall leaves must still start the kubelet.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Final

from credprovider.paths import AGENT_BIN_DIR, AGENT_CONFIG, AGENT_HOME_PARENT
from credprovider.tool.node.kubelet_facts import config_hash, reported_config_hashes
from tests.e2e.node import (
    NODE_IP,
    READ_ONLY_PORT,
    cri_listening,
    isolate,
    kubelet_config,
    start_kubelet,
)

STAGES: Final = (
    "flags alone",
    "bootstrap",
    "agent installed",
    "agent uninstalled",
    "uninstalled without a bootstrap",
)
START_TIMEOUT: Final = 60.0
# The agent's environment: nothing of the test process's.
AGENT_ENV: Final = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/nonexistent"}


def _agent(spec: dict[str, Any], action: str) -> dict[str, Any]:
    """The bundle's agent on this node, as the chart's pod runs it in mode files."""
    more = ["--bundle", spec["bundle"], "--providers", "aws,azure,gcp"] * (action == "apply")
    done = subprocess.run(
        [f"{spec['bundle']}/credprovider", "agent", action, "--root", "/", "--files-only",
         "--config", AGENT_CONFIG, "--bin-dir", AGENT_BIN_DIR, *more],
        capture_output=True, text=True, timeout=120, env=AGENT_ENV, check=False,
    )  # fmt: skip
    return {"exit": done.returncode, "said": (done.stdout + done.stderr)[-2000:]}


def _loaded_hash() -> str | None:
    """The config hash the kubelet reports on its read-only port, once it answers."""
    try:
        url = f"http://{NODE_IP}:{READ_ONLY_PORT}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            hashes = reported_config_hashes(answer.read().decode())
    except (OSError, urllib.error.URLError):
        return None
    return hashes[0] if hashes else None


def _start(spec: dict[str, Any], run: Path, stage: int, env: dict[str, str]) -> dict[str, Any]:
    """The kubelet started with the provisioned flags: the config hash it reports (it started),
    or its exit status and last lines (it did not)."""
    config = Path(AGENT_CONFIG)
    expected = config_hash([config.read_bytes()]) if config.is_file() else None
    log_path = run / f"kubelet-{stage}.log"
    with log_path.open("wb") as log:
        kubelet = start_kubelet(spec, run, env, log, credential_flags=(AGENT_CONFIG, AGENT_BIN_DIR))
        deadline = time.monotonic() + START_TIMEOUT
        loaded = None
        while time.monotonic() < deadline and kubelet.poll() is None and loaded is None:
            time.sleep(0.5)
            loaded = _loaded_hash()
        code = kubelet.poll()
        if code is None:
            kubelet.send_signal(signal.SIGTERM)
            kubelet.wait(timeout=30)
    lines = log_path.read_text(errors="replace").splitlines()
    return {"exit": code, "loaded": loaded, "expected": expected, "log": lines[-5:]}


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    run = Path(spec["run_dir"])
    isolate(run, real_runtime=True)  # /run too: the node's lock, the kubelet's own files
    cri = subprocess.Popen(
        [spec["fakecri"], "--socket", str(run / "cri.sock"), "--pulls", str(run / "pulls.jsonl")],
        stderr=(run / "fakecri.log").open("wb"),
    )
    cri_listening(run / "cri.sock", cri)
    (run / "manifests").mkdir()
    (run / "kubelet.yaml").write_text(json.dumps(kubelet_config(run)))
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    result: dict[str, Any] = {}
    try:
        for index, stage in enumerate(STAGES):
            step: dict[str, Any] = {}
            if stage == "bootstrap":
                done = subprocess.run(
                    ["sh", "-e"], input=spec["bootstrap"], capture_output=True, text=True,
                    check=False,
                )  # fmt: skip
                step["provisioned"] = {"exit": done.returncode, "said": done.stderr[-2000:]}
            elif stage == "agent installed":
                step["agent"] = _agent(spec, "apply")
            elif stage == "agent uninstalled":
                step["agent"] = _agent(spec, "uninstall")
            elif stage == "uninstalled without a bootstrap":
                shutil.rmtree(AGENT_HOME_PARENT)
                step["agent"] = [_agent(spec, "apply"), _agent(spec, "uninstall")]
            step["kubelet"] = _start(spec, run, index, env)
            result[stage] = step
    finally:
        cri.kill()
    Path(spec["result"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""A node of processes named kubelet, made inside a pid and mount namespace of the test's own
(``python -m tests.reliability.redteam.trustnode SPEC``, run under ``unshare``): it starts each
kubelet the spec describes (as which user, in which mount namespace, from which binary, with which
environment and flags), runs one ``credprovider`` command there, and prints what it did as JSON:
exit status, stdout, stderr and each kubelet's pid in the namespace. When it exits, the
namespace's processes end with it: no other run ever sees these kubelets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

_SLEEP = 'exec -a kubelet "$0" -c "import time; time.sleep(300)" "$@"'


def start(kubelet: dict[str, object]) -> subprocess.Popen[bytes]:
    """One process named kubelet, as the spec says."""
    command: list[str] = ["bash", "-c", _SLEEP, str(kubelet["binary"]), *kubelet["flags"]]  # type: ignore[misc]
    if kubelet.get("other_mount_namespace"):
        command = ["unshare", "--mount", "--propagation", "private", *command]
    uid = int(kubelet.get("uid", 0))  # type: ignore[call-overload]
    if uid:
        command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *command]
    process = subprocess.Popen(command, env=dict(kubelet["env"]))  # type: ignore[call-overload]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not _named_kubelet(process.pid):
        time.sleep(0.02)
    return process


def _named_kubelet(pid: int) -> int:
    """The pid (``pid`` or its child, after setpriv or unshare) now running as kubelet, or 0."""
    for found in (pid, *_children(pid)):
        try:
            if Path(f"/proc/{found}/cmdline").read_bytes().startswith(b"kubelet\0"):
                return found
        except OSError:
            continue
    return 0


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    pids = []
    for kubelet in spec["kubelets"]:
        process = start(kubelet)
        pids.append(_named_kubelet(process.pid))
        time.sleep(0.05)  # the next one gets a higher pid and a later start time
    done = subprocess.run(
        spec["command"], capture_output=True, text=True, timeout=150, env=spec["env"], check=False
    )
    print(json.dumps({"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr,
                      "pids": pids}))  # fmt: skip
    sys.stdout.flush()
    os._exit(0)  # the namespace's init: every kubelet ends with it


if __name__ == "__main__":
    main()

"""credprovider/tool/images/startcheck.py: what running a provider's binary proves, over the ways a bin dir goes
wrong (the bundle's own cases, a copied launcher among them, are in tests/integration/cli/
test_operator_path.py). Each case is a real file executed the way the kubelet executes it."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from credprovider.entry import UNKNOWN_PROGRAM_MARK
from credprovider.runtime.child import DRAIN_SECONDS
from credprovider.tool.images.startcheck import (
    LAUNCHER_FAILURE_MARK,
    VERSION_MARK,
    check_start,
)
from release.bundle import REPO

ECR = "ecr-credential-provider"
FOREIGN = "my-registry-plugin"
# Our plugin run from source, the way a node image might wrap it.
FROM_SOURCE = (
    f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m credprovider "$(basename "$0")" "$@"\n'
)

# (name, file content or a symlink target, error part, warning part, proven part)
CASES = {
    "ours from source": (ECR, FROM_SOURCE, None, None, f"{ECR} version"),
    "ours, args passed before --version": (
        "auth-provider-gcp",
        FROM_SOURCE,
        None,
        None,
        "auth-provider-gcp version",
    ),
    "link to /bin/true under our name": (
        ECR,
        "-> /bin/true",
        "it exits 0 and prints nothing on an empty request, as /bin/true does",
        None,
        None,
    ),
    "/bin/true under a foreign name": (
        FOREIGN,
        "-> /bin/true",
        "is not a credprovider plugin: it exits 0 and prints nothing",
        None,
        None,
    ),
    "not executable": (ECR, "", "permission denied (not executable", None, None),
    "a directory": (ECR, "-> /tmp", "cannot be started: permission denied", None, None),
    "interpreter missing": (
        FOREIGN,
        "#!/nonexistent/python3\n",
        "its interpreter or loader is missing: /nonexistent/python3",
        None,
        None,
    ),
    "not a program for this machine": (
        ECR,
        "\x7fELF\x02\x01\x01\x00garbage",
        "exec format error",
        None,
        None,
    ),
    "killed by a signal": (FOREIGN, "#!/bin/sh\nkill -SEGV $$\n", "killed by SIGSEGV", None, None),
    "shell cannot run what it wraps": (
        FOREIGN,
        "#!/bin/sh\nexec /nonexistent/plugin\n",
        "cannot run (exit 127)",
        None,
        None,
    ),
    "our launcher outside its bundle": (
        ECR,
        f'#!/bin/sh\necho "$0: /x/_internal is missing; {LAUNCHER_FAILURE_MARK}0.1.0/" >&2\nexit 1\n',
        "exits 1 when started: ",
        None,
        None,
    ),
    "our executable under a name it does not know": (
        FOREIGN,
        f'#!/bin/sh\necho "$0: {UNKNOWN_PROGRAM_MARK} credprovider" >&2\nexit 1\n',
        "exits 1 when started",
        None,
        None,
    ),
    "a foreign plugin refusing an empty request": (
        FOREIGN,
        '#!/bin/sh\ncat >/dev/null\necho "error decoding request: EOF" >&2\nexit 1\n',
        None,
        "is not a credprovider plugin: it executes (exit 1 on an empty request: "
        "'error decoding request: EOF'); whether it answers a request was not proven",
        "it executes (exit 1 on an empty request)",
    ),
    # before: read to the check's 20 s time-out, a CPU's worth of output for nothing
    "a flood of output": (
        FOREIGN,
        "#!/bin/sh\nexec yes\n",
        "writes more than 64 KiB without end "
        "when started: the kubelet could never decode an answer from it",
        None,
        None,
    ),
    # a log on stderr may be long: stopped at the cap, only unproven
    "a flood on stderr under our name": (
        ECR,
        "#!/bin/sh\nyes >&2\n",
        None,
        "did not end it within the check's time (or its first 64 KiB on stderr)",
        "it executes",
    ),
    "the upstream plugin under our name": (
        ECR,
        '#!/bin/sh\n[ "$1" = --version ] && { echo "Error: unknown flag: --version" >&2; exit 1; }\n'
        'cat >/dev/null\necho "failed to decode" >&2\nexit 1\n',
        None,
        f"{ECR} is not credprovider: it executes (exit 1 on an empty request",
        "it executes",
    ),
}


def _place(bin_dir: Path, name: str, content: str) -> None:
    path = bin_dir / name
    if content.startswith("-> "):
        path.symlink_to(content[3:])
        return
    path.write_bytes(content.encode("latin-1"))
    if content:
        path.chmod(0o755)


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_what_starting_the_binary_proves(tmp_path: Path, case: str) -> None:
    name, content, error, warning, proven = CASES[case]
    _place(tmp_path, name, content)
    args = ["get-credentials"] if name == "auth-provider-gcp" else []
    result = check_start(name, str(tmp_path), args, [])
    assert result.path == str(tmp_path / name)
    for expected, got in ((error, result.error), (warning, result.warning)):
        if expected is None:
            assert got is None, got
        else:
            assert got is not None and expected in got, got
    if proven is None:
        assert not result.proven
    else:
        assert proven in result.proven
    assert (result.version or "").endswith(VERSION_MARK) == (proven or "").endswith("version")


def test_args_and_env_reach_the_binary_as_the_kubelet_passes_them(tmp_path: Path) -> None:
    """The provider's args come first and its env is laid over this environment: a plugin that
    needs both starts only when both reach it."""
    (tmp_path / FOREIGN).write_text(
        '#!/bin/sh\n[ "$1" = /etc/azure.json ] && [ "$MODE" = node ] && [ -n "$PATH" ] '
        '|| { echo "wrong args or env" >&2; exit 127; }\necho "no request" >&2\nexit 1\n'
    )
    (tmp_path / FOREIGN).chmod(0o755)
    right = check_start(FOREIGN, str(tmp_path), ["/etc/azure.json"], [("MODE", "node")])
    assert right.error is None and right.warning and "exit 1" in right.warning
    wrong = check_start(FOREIGN, str(tmp_path), [], [("MODE", "node")])
    assert wrong.error and "cannot run (exit 127): wrong args or env" in wrong.error


def test_a_binary_that_never_ends_is_killed_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    (tmp_path / FOREIGN).write_text(f"#!/bin/sh\nsleep 60 &\necho $$ $! > {pids}\nsleep 60\n")
    (tmp_path / FOREIGN).chmod(0o755)
    result = check_start(FOREIGN, str(tmp_path), [], [], timeout=0.5)
    assert result.error is None
    assert result.warning and "did not end it within the check's time" in result.warning
    for pid in pids.read_text().split():
        assert _ends(int(pid)), pid


def test_a_descendant_that_leaves_the_group_and_keeps_the_pipes_does_not_hang_the_check(
    tmp_path: Path,
) -> None:
    """setsid takes a child out of the killed group; it still holds stdout and stderr. The check
    answers anyway (a plain communicate() would wait for the child's 60 s)."""
    pids = tmp_path / "pids"
    (tmp_path / FOREIGN).write_text(f"#!/bin/sh\nsetsid sleep 60 &\necho $! > {pids}\nsleep 60\n")
    (tmp_path / FOREIGN).chmod(0o755)
    started = time.monotonic()
    try:
        result = check_start(FOREIGN, str(tmp_path), [], [], timeout=0.5)
        assert time.monotonic() - started < 0.5 + DRAIN_SECONDS + 5
        assert result.error is None
        assert result.warning and "did not end it within the check's time" in result.warning
    finally:
        for pid in pids.read_text().split() if pids.exists() else ():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def _ends(pid: int, within: float = 10.0) -> bool:
    """The process is gone or a zombie within ``within`` seconds. A SIGKILLed process is still
    running for a moment while it exits, and an orphan is reaped by whoever adopted it."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


def test_the_launcher_failure_mark_is_the_launchers_own_words() -> None:
    """The mark the check looks for is what release/launcher.c prints: the hint release/bundle.py
    builds it with, which the boot script's damage line uses too."""
    from credprovider.runtime.bundlecheck import install_hint

    launcher = (REPO / "release" / "launcher.c").read_text()
    assert 'fprintf(stderr, "; %s\\n", CREDPROVIDER_INSTALL_HINT);' in launcher
    assert "-DCREDPROVIDER_INSTALL_HINT=" in (REPO / "release" / "bundle.py").read_text()
    assert install_hint("1.2.3", "arm64").startswith(f"{LAUNCHER_FAILURE_MARK}1.2.3/ directory")

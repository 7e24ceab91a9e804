"""run_bounded runs what an operator's config names: whatever the program does, the call returns
by its time-out (plus the drain), keeps at most ``cap`` bytes of each stream, and leaves no
process behind. Each case is a real program."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from credprovider.runtime.child import DRAIN_SECONDS, run_bounded

TIMEOUT = 1.0
CAP = 4096
MIB = 1024 * 1024

# name: (script, request, expected code (None: killed), stdout, stdout cut, stderr start)
CASES: dict[str, tuple[str, bytes, int | None, bytes | None, bool, bytes]] = {
    "answers and exits": ("echo ok; echo why >&2; exit 3", b"", 3, b"ok\n", False, b"why"),
    "echoes a request larger than a pipe": ("cat", b"x" * MIB, 0, None, True, b""),
    "never reads a large request": ("exit 0", b"r" * MIB, 0, b"", False, b""),
    "writes without end": ("yes", b"", None, b"y\n" * (CAP // 2), True, b""),
    "writes to stderr without end": ("yes >&2", b"", None, b"", False, b"y\ny\n"),
    "never ends": ("sleep 60", b"", None, b"", False, b""),
    "closes its pipes and lives on": ("exec >&- 2>&-; sleep 60", b"", None, b"", False, b""),
    "reads the request to its end": (
        "cat >/dev/null; echo done",
        b"req",
        0,
        b"done\n",
        False,
        b"",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_program_is_answered_within_its_time(name: str, tmp_path: Path) -> None:
    script, request, code, stdout, cut, stderr = CASES[name]
    started = time.monotonic()
    done = run_bounded(["/bin/sh", "-c", script], {"PATH": "/usr/bin:/bin"}, request, TIMEOUT, CAP)
    assert time.monotonic() - started < TIMEOUT + DRAIN_SECONDS + 2
    assert done.code == code and done.timed_out == (code is None)
    assert len(done.stdout) <= CAP and len(done.stderr) <= CAP
    if stdout is not None:
        assert done.stdout == stdout
    else:
        assert done.stdout == request[:CAP]
    assert done.stdout_cut == cut
    assert done.stderr.startswith(stderr)


def test_a_descendant_that_leaves_the_group_with_the_pipes_is_given_up(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"setsid sleep 60 & echo $! > {pid_file}; echo started; sleep 60"
    started = time.monotonic()
    try:
        done = run_bounded(["/bin/sh", "-c", script], dict(os.environ), b"", TIMEOUT, CAP)
        assert time.monotonic() - started < TIMEOUT + DRAIN_SECONDS + 2
        assert done.timed_out and done.stdout == b"started\n"
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


def _assert_gone(child: int) -> None:
    """``child`` has ended (a zombie left to its parent counts) within 10 s."""
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and _state(child) not in ("Z", "X"):
        assert time.monotonic() < deadline, f"{child} still runs"
        time.sleep(0.02)


def test_the_group_is_killed_and_the_program_reaped(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    script = f"sleep 60 & echo $$ $! > {pid_file}; sleep 60"
    done = run_bounded(["/bin/sh", "-c", script], dict(os.environ), b"", TIMEOUT, CAP)
    assert done.timed_out
    shell, child = (int(pid) for pid in pid_file.read_text().split())
    assert not Path(f"/proc/{shell}").exists(), "the program itself is reaped: no zombie is left"
    _assert_gone(child)


def test_an_interrupted_run_leaves_nothing_running(tmp_path: Path) -> None:
    """Interrupted (the tool's Ctrl-C, here a relay that raises): the program, in its own
    session, gets none of the terminal's signal; its group is killed and it is reaped before the
    interruption goes on (it was left running)."""
    pid_file = tmp_path / "pids"
    script = f"sleep 60 & echo $$ $! > {pid_file}; echo prompt >&2; sleep 60"

    def interrupt(chunk: bytes) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_bounded(["/bin/sh", "-c", script], dict(os.environ), b"", 30.0, CAP, relay=interrupt)
    shell, child = (int(pid) for pid in pid_file.read_text().split())
    assert not Path(f"/proc/{shell}").exists(), "the program itself is reaped"
    _assert_gone(child)


@pytest.mark.parametrize(
    ("command", "error"),
    [(["/nonexistent/plugin"], FileNotFoundError), (["/bin/sh\0x"], ValueError)],
)
def test_what_cannot_start_raises_what_popen_raises(
    command: list[str], error: type[Exception]
) -> None:
    with pytest.raises(error):
        run_bounded(command, {}, b"", TIMEOUT, CAP)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "X"


def test_a_plugins_helper_is_stopped_at_the_cap_not_at_the_time_out() -> None:
    """``stop_at_cap`` (a plugin's credential helper): a program writing without end is stopped
    as soon as it passes the cap, its group killed, long before its time-out (the tool's checks
    keep reading and dropping instead, to the time-out)."""
    started = time.monotonic()
    done = run_bounded(["/bin/sh", "-c", "yes"], None, b"", 30.0, CAP, stop_at_cap=True, drain=0.1)
    assert time.monotonic() - started < 5
    assert (done.code, done.stdout_cut, len(done.stdout)) == (None, True, CAP)


def test_merged_streams_are_one() -> None:
    done = run_bounded(["/bin/sh", "-c", "echo out; echo err >&2"], None, b"", 5.0, CAP,
                       merge_stderr=True)  # fmt: skip
    assert (done.code, done.stdout, done.stderr) == (0, b"out\nerr\n", b"")
    assert done.complaint() == "out"

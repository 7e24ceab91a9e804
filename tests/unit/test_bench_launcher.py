"""The benchmark's per-exec measurement reports the measured process, not the benchmark itself."""

from __future__ import annotations

import os
import resource
import sys

from bench.measure import run_once


def test_peak_rss_is_the_childs_own() -> None:
    ours_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    _, small_mb, code = run_once(["/bin/true"], b"", dict(os.environ))
    assert code == 0
    assert small_mb < 10 < ours_mb  # the test process (pytest) is far larger than /bin/true
    grow = "b = bytearray(80 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096])"
    _, big_mb, code = run_once([sys.executable, "-S", "-c", grow], b"", dict(os.environ))
    assert code == 0
    assert 80 <= big_mb < 120


def test_wall_time_exit_code_and_stdin_reach_the_child() -> None:
    script = "import sys, time; time.sleep(0.2); sys.exit(len(sys.stdin.read()))"
    wall_ms, _, code = run_once([sys.executable, "-S", "-c", script], b"hello", dict(os.environ))
    assert code == 5
    assert 200 <= wall_ms < 5000

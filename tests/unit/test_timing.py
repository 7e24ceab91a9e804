"""make test's closing summary (tests/timing.py): make's phases, the suite by directory, the
slowest tests; pytest's own closing line stays the last (CI reads it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from release.bundle import REPO
from tests.timing import directory_of, lines, read_phases, summary


def test_directories_phases_and_the_slowest() -> None:
    assert directory_of("tests/unit/tool/test_x.py::test_y[a/b]") == "tests/unit/tool"
    assert directory_of("tests/e2e/test_real_kubelet.py::test") == "tests/e2e"
    assert directory_of("tests/unit/test_docs.py::test") == "tests/unit"
    figures = summary(
        [("lint", 10.0), ("build", 50.0)],
        120.0,
        {
            "tests/e2e/test_a.py::t": 90.0,
            "tests/e2e/test_b.py::t": 20.0,
            "tests/unit/test_c.py::t": 1.0,
        },
    )
    assert figures["total"] == 180.0
    assert [p["phase"] for p in figures["phases"]] == ["lint", "build", "pytest"]
    assert figures["directories"][0] == {"directory": "tests/e2e", "seconds": 110.0}
    assert figures["slowest"][0] == {"test": "tests/e2e/test_a.py::t", "seconds": 90.0}
    assert lines(figures)[0] == "where make test's time went (3.0 min):"


def test_the_summary_comes_before_pytests_closing_line(tmp_path: Path) -> None:
    phases = tmp_path / "phases.tsv"
    phases.write_text("lint\t1500\nbuild\t61000\nnot a phase\n")
    assert read_phases(str(phases)) == [("lint", 1.5), ("build", 61.0)]
    out = tmp_path / "times.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/unit/test_timing.py::test_directories_phases_and_the_slowest"],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=120,
        env={**os.environ, "CREDPROVIDER_TEST_TIMES": str(out),
             "CREDPROVIDER_TEST_PHASES": str(phases)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    shown = done.stdout.splitlines()
    assert shown[-1].startswith("1 passed")
    assert "  0.0 min  lint" in "\n".join(shown) and "  1.0 min  build" in "\n".join(shown)
    kept = json.loads(out.read_text())
    assert [p["phase"] for p in kept["phases"]] == ["lint", "build", "pytest"]
    assert kept["tests"] == 1

"""make test's closing summary (tests/timing.py): make's phases, the suite by directory and module,
the slowest tests; pytest's own closing line stays the last (CI reads it). The workers' order
(tests/schedule.py): the slowest modules first, each module's tests together."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from release.bundle import REPO
from tests.schedule import module_times, scope_of, slowest_first
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
    assert figures["modules"]["tests/e2e/test_a.py"] == 90.0
    assert lines(figures)[0] == "where make test's time went (3.0 min):"
    assert "(3 tests, their own times, on 1 worker):" in "\n".join(lines(figures))


def test_the_slowest_modules_go_first_and_a_module_stays_together(tmp_path: Path) -> None:
    nodeids = [
        "tests/unit/test_a.py::one",
        "tests/e2e/test_b.py::one",
        "tests/unit/test_a.py::two",
        "tests/new/test_c.py::one",
        "tests/e2e/test_b.py::two",
        "tests/unit/test_d.py::one",
    ]
    times = {"tests/unit/test_a.py": 5.0, "tests/e2e/test_b.py": 200.0, "tests/unit/test_d.py": 1}
    order = [nodeids[i] for i in slowest_first(nodeids, times)]
    assert order == [
        "tests/new/test_c.py::one",  # no time known: as if the slowest
        "tests/e2e/test_b.py::one",
        "tests/e2e/test_b.py::two",
        "tests/unit/test_a.py::one",
        "tests/unit/test_a.py::two",
        "tests/unit/test_d.py::one",
    ]
    # the end-to-end tests are one unit (they look at the host's own mounts and cgroups)
    e2e = ["tests/e2e/test_x.py::a", "tests/unit/test_a.py::one", "tests/e2e/test_y.py::b"]
    assert {scope_of(n) for n in e2e} == {"tests/e2e/", "tests/unit/test_a.py"}
    times_e2e = {"tests/e2e/test_x.py": 3.0, "tests/e2e/test_y.py": 3.0, "tests/unit/test_a.py": 5}
    assert slowest_first(e2e, times_e2e) == [0, 2, 1]  # 3 + 3 s together outweigh 5 s
    # the crash points go out test by test, each weighed as its share of the module
    crash = ["tests/reliability/test_crash_points.py::a", "tests/unit/test_a.py::one",
             "tests/reliability/test_crash_points.py::b"]  # fmt: skip
    assert scope_of(crash[0]) == crash[0] and scope_of(crash[2]) == crash[2]
    times_crash = {"tests/reliability/test_crash_points.py": 12.0, "tests/unit/test_a.py": 5.0}
    assert slowest_first(crash, times_crash) == [0, 2, 1]  # 6 s each before 5 s
    times_crash["tests/unit/test_a.py"] = 7.0
    assert slowest_first(crash, times_crash) == [1, 0, 2]
    # nothing known: modules in the order they were first collected, each one's tests together
    assert slowest_first(nodeids, {}) == [0, 2, 1, 4, 3, 5]
    # the last run's figures first, the kept copy when there are none
    last, kept = tmp_path / "last.json", tmp_path / "kept.json"
    kept.write_text(json.dumps({"modules": {"tests/e2e/test_b.py": 3}}))
    assert module_times(last, kept) == {"tests/e2e/test_b.py": 3.0}
    last.write_text(json.dumps({"phases": [], "modules": {"tests/e2e/test_b.py": 7.5}}))
    assert module_times(last, kept) == {"tests/e2e/test_b.py": 7.5}
    last.write_text("{not json")
    assert module_times(last, kept) == {"tests/e2e/test_b.py": 3.0}


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


def test_two_workers_report_every_test_once(tmp_path: Path) -> None:
    """Under pytest-xdist (make test) the controller adds up its workers' tests, once each."""
    out = tmp_path / "times.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
         "--dist", "loadscope", "--no-loadscope-reorder",
         "tests/unit/test_timing.py::test_directories_phases_and_the_slowest",
         "tests/unit/test_errors.py"],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=300,
        env={**os.environ, "CREDPROVIDER_TEST_TIMES": str(out)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    kept = json.loads(out.read_text())
    passed = int(done.stdout.splitlines()[-1].split()[0])
    assert kept["workers"] == 2 and kept["tests"] == passed > 1
    assert set(kept["modules"]) == {"tests/unit/test_timing.py", "tests/unit/test_errors.py"}

"""Where ``make test``'s time went (issue #60), said at the end of its run and kept in a file.

A pytest plugin (``tests/conftest.py`` loads it). Each test's time (setup, call and teardown: a
session fixture's build counts in the first test that needs it) is added to its directory's
(``tests/e2e``, ``tests/unit/tool`` ...: the first two levels under ``tests/``). With
``CREDPROVIDER_TEST_TIMES=FILE`` (make test sets it) the summary is printed before pytest's own
closing line and written to FILE as JSON: make's phases before the suite (read from
``CREDPROVIDER_TEST_PHASES``, the tab-separated ``phase<TAB>milliseconds`` lines the Makefile
writes), the suite's wall time, each directory's and each module's total and the slowest tests.
docs/development.md's figures are read from it, and tests/schedule.py its modules' times. Under
pytest-xdist the controller adds up its workers' reports: a directory's time is its tests' own (on
whichever worker), the suite's the wall time of the whole run.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Final

import pytest

TIMES_ENV: Final = "CREDPROVIDER_TEST_TIMES"
PHASES_ENV: Final = "CREDPROVIDER_TEST_PHASES"
SLOWEST: Final = 15


def directory_of(nodeid: str) -> str:
    """``tests/unit/tool/test_x.py::t`` -> ``tests/unit/tool``; a module directly in ``tests/``
    (or below one level) keeps its directory."""
    parts = nodeid.split("::", 1)[0].split("/")[:-1]
    return "/".join(parts[:3]) if parts else "."


def module_of(nodeid: str) -> str:
    """``tests/unit/tool/test_x.py::t[a]`` -> ``tests/unit/tool/test_x.py``."""
    return nodeid.split("::", 1)[0]


def read_phases(path: str) -> list[tuple[str, float]]:
    """The Makefile's timed phases, in order: (name, seconds)."""
    found = []
    for line in Path(path).read_text().splitlines():
        name, _, millis = line.partition("\t")
        if name and millis.strip().isdigit():
            found.append((name, int(millis) / 1000))
    return found


def summary(
    phases: list[tuple[str, float]], suite: float, durations: dict[str, float], workers: int = 1
) -> dict[str, Any]:
    """The figures: phases (make's, then the suite's), per directory and module, the slowest
    tests, and how many workers ran them."""
    per_directory: dict[str, float] = defaultdict(float)
    per_module: dict[str, float] = defaultdict(float)
    for nodeid, seconds in durations.items():
        per_directory[directory_of(nodeid)] += seconds
        per_module[module_of(nodeid)] += seconds
    slowest = sorted(durations.items(), key=lambda item: item[1], reverse=True)[:SLOWEST]
    every = [*phases, ("pytest", suite)]
    return {
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "total": round(sum(seconds for _, seconds in every), 1),
        "phases": [{"phase": name, "seconds": round(seconds, 1)} for name, seconds in every],
        "directories": [
            {"directory": name, "seconds": round(seconds, 1)}
            for name, seconds in sorted(per_directory.items(), key=lambda i: i[1], reverse=True)
        ],
        "tests": len(durations),
        "workers": workers,
        "slowest": [{"test": nodeid, "seconds": round(s, 1)} for nodeid, s in slowest],
        "modules": {name: round(seconds, 1) for name, seconds in sorted(per_module.items())},
    }


def lines(figures: dict[str, Any]) -> list[str]:
    """The summary as make test prints it."""
    shown = [f"where make test's time went ({figures['total'] / 60:.1f} min):"]
    shown += [f"  {p['seconds'] / 60:6.1f} min  {p['phase']}" for p in figures["phases"]]
    shown.append(
        f"the suite by directory ({figures['tests']} tests, their own times, "
        f"on {figures['workers']} worker{'s' * (figures['workers'] != 1)}):"
    )
    shown += [f"  {d['seconds'] / 60:6.1f} min  {d['directory']}" for d in figures["directories"]]
    shown.append(f"the {len(figures['slowest'])} slowest tests:")
    shown += [f"  {t['seconds']:6.0f} s    {t['test']}" for t in figures["slowest"]]
    return shown


class Timing:
    def __init__(self, out: str, phases: str, workers: int) -> None:
        self.out, self.phases, self.workers = out, phases, workers
        self.started = time.monotonic()
        self.durations: dict[str, float] = defaultdict(float)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.durations[report.nodeid] += report.duration

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        phases = read_phases(self.phases) if self.phases and os.path.isfile(self.phases) else []
        figures = summary(
            phases, time.monotonic() - self.started, dict(self.durations), self.workers
        )
        Path(self.out).parent.mkdir(parents=True, exist_ok=True)
        Path(self.out).write_text(json.dumps(figures, indent=2) + "\n")
        terminalreporter.section("time")
        for line in lines(figures):
            terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    out = os.environ.get(TIMES_ENV, "")
    if out and not hasattr(config, "workerinput"):  # the controller adds up the workers' reports
        workers = int(getattr(config.option, "numprocesses", 0) or 1)
        config.pluginmanager.register(
            Timing(out, os.environ.get(PHASES_ENV, ""), workers), "timing"
        )

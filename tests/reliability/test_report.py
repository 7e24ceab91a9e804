"""make reliability-report adds up one run's figures: its one file, or one per pytest-xdist worker
(make test's), never a file an earlier run's worker left behind."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.reliability import checks
from tests.reliability.checks import Figures, Outcome, figures_file, recorded_outcomes


def outcome(scenario: str) -> Outcome:
    return Outcome("fault", scenario, 0, 0.1, 60.0, True)


def test_one_runs_workers_add_up_and_an_older_runs_file_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checks, "FIGURES_DIR", tmp_path)
    assert recorded_outcomes() is None
    old = Figures()
    old.record(outcome("from a 4-worker run"))
    old.write(figures_file("gw3"), "run-1")
    past = time.time() - 60
    os.utime(figures_file("gw3"), (past, past))
    for worker, name in (("gw0", "a"), ("gw1", "b")):
        figures = Figures()
        figures.record(outcome(name))
        figures.write(figures_file(worker), "run-2")
    assert sorted(o["scenario"] for o in recorded_outcomes() or []) == ["a", "b"]
    (tmp_path / "figures-gw2.json").write_text("{torn")  # a worker killed while writing
    assert sorted(o["scenario"] for o in recorded_outcomes() or []) == ["a", "b"]
    serial = Figures()
    serial.record(outcome("alone"))
    serial.write(figures_file(""), "serial")
    assert figures_file("").name == "figures.json"
    assert [o["scenario"] for o in recorded_outcomes() or []] == ["alone"]
    assert json.loads(figures_file("").read_text())["run"] == "serial"

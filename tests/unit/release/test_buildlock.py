"""One builder at a time (release/buildlock.py): a second build of the same thing waits for the
first, then finds it built (a clone's make build beside another's make test once built one
interpreter twice in one work directory, and both failed)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from release.buildlock import one_builder
from release.bundle import REPO

HOLD = """
import sys, time
from pathlib import Path
from release.buildlock import one_builder
with one_builder(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(1.5)
    Path(sys.argv[2]).write_text("built")
"""


def test_a_second_builder_waits_for_the_first(tmp_path: Path) -> None:
    lock, built = tmp_path / "python" / "amd64.lock", tmp_path / "built"
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock), str(built)],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert first.stdout is not None and first.stdout.readline() == "held\n"
    started = time.monotonic()
    with one_builder(lock):
        waited = time.monotonic() - started
        assert built.read_text() == "built"  # the first one's work is there: nothing to build
    assert waited > 0.5
    assert first.wait(timeout=30) == 0

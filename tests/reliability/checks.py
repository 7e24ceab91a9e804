"""What every reliability scenario must hold, in one place, and the figures the report prints."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from emulators.kubelet_exec import PluginRun
from release.bundle import REPO

FIGURES_DIR = REPO / "build" / "reliability"
# Grace for process start-up and exit on top of the plugin's own deadline (2 noisy cores).
DEADLINE_GRACE_SECONDS = 3.0


@dataclass
class Outcome:
    category: str  # fault | hostile | spoofing | hygiene | redteam
    scenario: str
    code: int
    seconds: float
    deadline: float | None
    ok: bool
    detail: str = ""


@dataclass
class Figures:
    outcomes: list[Outcome] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, outcome: Outcome) -> None:
        with self.lock:
            self.outcomes.append(outcome)

    def write(self, path: Path, run: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        outcomes = [asdict(o) for o in self.outcomes]
        path.write_text(json.dumps({"run": run, "outcomes": outcomes}, indent=1))


def figures_file(worker: str) -> Path:
    """Where one pytest process keeps its outcomes: ``figures.json``, or one file per
    pytest-xdist worker (``figures-gw0.json``), the report adding up one run's."""
    return FIGURES_DIR / (f"figures-{worker}.json" if worker else "figures.json")


def recorded_outcomes() -> list[dict[str, Any]] | None:
    """Every outcome of the last run: the newest file's, and those of the files its workers
    wrote (the same run id; a file an earlier run's worker left is not added). None: no run."""
    found = []
    for path in FIGURES_DIR.glob("figures*.json"):
        try:
            found.append((path.stat().st_mtime, json.loads(path.read_text())))
        except (OSError, ValueError):
            continue
    found = [(when, kept) for when, kept in found if isinstance(kept, dict) and "run" in kept]
    if not found:
        return None
    run = max(found, key=lambda item: item[0])[1]["run"]
    return [o for _, kept in found if kept["run"] == run for o in kept["outcomes"]]


def answer_violations(run: PluginRun, deadline: float | None) -> list[str]:
    """The contract of every exec: one JSON response or (exit 1, nothing on stdout, one error line,
    no traceback), and an answer before the deadline."""
    problems = []
    if run.code not in (0, 1):
        problems.append(f"exit status {run.code}")
    if run.code == 0:
        try:
            body = json.loads(run.stdout)
        except ValueError:
            problems.append("stdout is not one JSON document")
        else:
            if body.get("kind") != "CredentialProviderResponse" or run.stdout.count(b"\n") != 1:
                problems.append("stdout is not exactly one CredentialProviderResponse line")
    else:
        if run.stdout:
            problems.append(f"failure wrote {len(run.stdout)} bytes to stdout")
        if len(run.error_lines) != 1:
            problems.append(f"failure printed {len(run.error_lines)} stderr lines, not one")
    if "Traceback" in run.stderr:
        problems.append("a traceback on stderr")
    if deadline is not None and run.seconds > deadline + DEADLINE_GRACE_SECONDS:
        problems.append(f"answered after {run.seconds:.1f}s, deadline {deadline:g}s")
    return problems


def leaked_secrets(secrets: Iterable[str], *texts: str) -> list[str]:
    """Which secrets appear verbatim in any of ``texts`` (shown redacted)."""
    from credprovider.runtime.redact import redact

    return [
        redact(secret) for secret in secrets if secret and any(secret in text for text in texts)
    ]

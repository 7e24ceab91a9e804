"""What every reliability scenario must hold, in one place, and the figures the report prints."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

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

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([asdict(o) for o in self.outcomes], indent=1))


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

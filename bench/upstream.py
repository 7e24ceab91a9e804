"""The upstream Go plugins, built from the Go module proxy where they are served, for comparison."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench.common import NOT_COMPARABLE, UPSTREAM_DIR, UPSTREAM_MODULES, log


def build_upstream() -> dict[str, str]:
    """Build the upstream plugins from the Go module proxy into build/upstream (cached)."""
    notes: dict[str, str] = {}
    go = shutil.which("go")
    for key, (module, package, version) in UPSTREAM_MODULES.items():
        name = package.rsplit("/", 1)[1]
        binary = UPSTREAM_DIR / f"{key}-{name}"
        if version is None:
            notes[key] = NOT_COMPARABLE[key]
            continue
        if binary.exists():
            notes[key] = f"{module}@{version} {package} (cached build)"
            continue
        if go is None:
            notes[key] = "Go is not installed: upstream not built"
            continue
        log(f"building upstream {module}@{version} {package} from the Go module proxy")
        with tempfile.TemporaryDirectory() as work:
            (Path(work) / "go.mod").write_text("module bench/upstream\n\ngo 1.26.0\n")
            steps = [
                [go, "get", f"{module}/{package}@{version}"],
                [
                    go,
                    "build",
                    "-trimpath",
                    "-ldflags=-s -w",
                    "-o",
                    str(binary),
                    f"{module}/{package}",
                ],
            ]
            UPSTREAM_DIR.mkdir(parents=True, exist_ok=True)
            for step in steps:
                proc = subprocess.run(
                    step,
                    cwd=work,
                    capture_output=True,
                    text=True,
                    timeout=1500,
                    env={**os.environ, "CGO_ENABLED": "0"},
                    check=False,
                )
                if proc.returncode != 0:
                    notes[key] = f"build failed: {proc.stderr.strip().splitlines()[-1:]}"
                    break
            else:
                notes[key] = f"{module}@{version} {package}"
    return notes

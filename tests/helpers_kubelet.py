"""Running the kubelet harness (emulators/kubelet) and reading its per-lookup JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class HarnessRun:
    code: int
    results: list[dict[str, Any]]
    klog: str


def run_harness(
    harness: Path,
    config: Path | str,
    bin_dir: Path | str,
    lookups: list[dict[str, Any]],
    env: Mapping[str, str] | None = None,
    verbosity: int = 2,
    timeout: float = 300,
) -> HarnessRun:
    """Register the config like the kubelet, then Lookup() each image; one process per config."""
    proc = subprocess.run(
        [str(harness), "--config", str(config), "--bin-dir", str(bin_dir), f"--v={verbosity}"],
        input=json.dumps(lookups).encode(),
        capture_output=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )
    results = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]
    return HarnessRun(proc.returncode, results, proc.stderr.decode("utf-8", "replace"))


def validate_with_kubelet(harness: Path, config: Path | str) -> dict[str, Any]:
    proc = subprocess.run(
        [str(harness), "--validate-only", "--config", str(config)],
        capture_output=True,
        timeout=120,
        check=False,
    )
    result: dict[str, Any] = json.loads(proc.stdout)
    return result

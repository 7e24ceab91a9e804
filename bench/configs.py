"""Large configs through ``credprovider validate`` (the built bundle): ten thousand providers, a
hundred thousand matchImages, neither with a YAML alias (the kubelet reads both, so the tool
must, in seconds), and a "billion laughs" (refused at once). Each is timed against a one-provider
config in the same run: the budget is that ratio."""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from release.bundle import BUNDLE_DIR

HEAD = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"


def provider_yaml(name: str, images: list[str]) -> str:
    """One provider of a config (after :data:`HEAD`), its matchImages quoted (a glob may start
    with ``*``, which YAML would read as an alias); the tests build large configs with it too."""
    listed = "".join(f"      - '{image}'\n" for image in images)
    return (
        f"  - name: {name}\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        f"    defaultCacheDuration: 1h\n    matchImages:\n{listed}"
    )


def _laughs() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        previous, name = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return HEAD + "  []\n" + "\n".join(lines) + "\n"


CONFIGS = {
    "one provider": lambda: HEAD + provider_yaml("ecr-credential-provider", ["registry.example"]),
    "10,000 providers": lambda: (
        HEAD + "".join(provider_yaml(f"p{i}", [f"r{i}.example"]) for i in range(10_000))
    ),
    "100,000 matchImages": lambda: (
        HEAD + provider_yaml("ecr-credential-provider", [f"r{i}.example" for i in range(100_000)])
    ),
    "a billion laughs": _laughs,
}


def large_configs() -> dict[str, Any]:
    """Seconds each config takes to validate (best of 3), its verdict's first word, and the
    multiple of the one-provider config."""
    tool = str(BUNDLE_DIR / "credprovider")
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as directory:
        for name, make in CONFIGS.items():
            path = Path(directory) / "config.yaml"
            path.write_text(make())
            best, verdict = float("inf"), ""
            for _ in range(3):
                start = time.perf_counter()
                done = subprocess.run(
                    [tool, "validate", str(path), "--bin-dir", directory],
                    capture_output=True,
                    text=True,
                    timeout=300,
                    check=False,
                )
                best = min(best, time.perf_counter() - start)
                verdict = (done.stdout + done.stderr).strip().split("\n")[0][:120]
            figures[name] = {"seconds": round(best, 2), "verdict": verdict}
    base = figures["one provider"]["seconds"]
    for entry in figures.values():
        entry["x_one"] = round(entry["seconds"] / base, 1)
    return figures

"""Exec cost: interleaved timed runs of the bundle (through a small launcher that reads the child's
wall time and peak RSS), bundle sizes, and where an exec's imports go."""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.common import NOT_COMPARABLE, RUNS, UPSTREAM_DIR, Target, clean_env
from release import native
from release import package as release_package
from release.targets import TARGETS, host_target
from tests.helpers import BUNDLE_DIR, REPO, request_bytes

# Runs the measured command as its own child and reports its wall time and peak RSS on the last
# stderr line. Measuring from the benchmark's own process would report the benchmark's RSS: Linux
# carries the peak RSS of the process that forks (or vforks) into the child's ru_maxrss across exec.
# This launcher is small, so the figure is the plugin's own (never below the launcher's ~5 MB).
_LAUNCHER = """
import os, sys, time
start = time.perf_counter_ns()
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter_ns() - start
os.write(2, f"\\n{_MARK} {wall} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}\\n".encode())
"""


_MARK = "@@bench-launcher"


def run_once(command: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float, int]:
    """Wall ms, peak RSS (MB) and exit code of one exec of ``command`` (see ``_LAUNCHER``)."""
    launcher = [sys.executable, "-S", "-c", f"_MARK = {_MARK!r}\n{_LAUNCHER}"]
    proc = subprocess.run(
        [*launcher, *command], input=stdin, capture_output=True, env=env, check=False
    )
    fields = proc.stderr.rstrip(b"\n").rsplit(b"\n", 1)[-1].decode().split()
    if len(fields) != 4 or fields[0] != _MARK:
        raise RuntimeError(f"bench launcher failed for {command}: {proc.stderr[-300:]!r}")
    _, wall_ns, maxrss_kb, code = fields
    return int(wall_ns) / 1e6, int(maxrss_kb) / 1024, int(code)


def summarize(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {
        "median": round(statistics.median(ordered), 1),
        "p90": round(p90, 1),
        "runs": len(ordered),
    }


def measure_targets(targets: dict[str, Target], cache_dir: Path) -> dict[str, Any]:
    """Interleaved rounds (the machine is noisy): miss, hit and upstream for each provider."""
    samples: dict[str, dict[str, list[tuple[float, float]]]] = {
        key: {"miss": [], "hit": []} for key in targets
    }
    upstream: dict[str, list[tuple[float, float]]] = {}
    floor: list[tuple[float, float]] = []
    bare: list[tuple[float, float]] = []
    # The floor: the bundle starting and exiting (--version), no request, no provider.
    variants: list[tuple[str, str, list[str], dict[str, str]]] = [
        ("aws", "floor", [str(BUNDLE_DIR / "ecr-credential-provider"), "--version"], clean_env({}))
    ]
    # The bare start of the interpreter the bundle was built from: what every ratio is taken to.
    interpreter = native.python_prefix(host_target())
    if (interpreter / "bin" / "python3.11").exists():
        command = [str(interpreter / "bin" / "python3.11"), "-I", "-S", "-c", "pass"]
        env = clean_env({"LD_LIBRARY_PATH": str(interpreter / "lib")})
        variants.append(("aws", "bare", command, env))
    for key, target in targets.items():
        env = clean_env(target.env)
        variants.append((key, "miss", target.command + target.args, env))
        variants.append(
            (
                key,
                "hit",
                target.command + target.args,
                {**env, "CREDPROVIDER_CACHE_DIR": str(cache_dir / key)},
            )
        )
        upstream_binary = UPSTREAM_DIR / f"{key}-{target.name}"
        if upstream_binary.exists():
            upstream[key] = []
            variants.append(
                (
                    key,
                    "upstream",
                    [str(upstream_binary)],
                    {k: v for k, v in env.items() if not k.startswith("CREDPROVIDER_")},
                )
            )
    for key, target in targets.items():  # warm up, and fill the caches
        for _, kind, command, env in [
            v for v in variants if v[0] == key and v[1] not in ("floor", "bare")
        ]:
            for _ in range(2):
                _, _, code = run_once(command, request_bytes(target.image), env)
                if code != 0:
                    raise SystemExit(f"{key} {kind} failed during warm-up (exit {code})")
    for round_index in range(RUNS):
        order = variants[:]
        random.Random(round_index).shuffle(order)
        for key, kind, command, env in order:
            wall, rss, code = run_once(command, request_bytes(targets[key].image), env)
            if code != 0:
                raise SystemExit(f"{key} {kind} failed (exit {code})")
            if kind in ("floor", "bare"):
                (floor if kind == "floor" else bare).append((wall, rss))
            else:
                (upstream[key] if kind == "upstream" else samples[key][kind]).append((wall, rss))
    results: dict[str, Any] = {}
    for key in targets:
        entry: dict[str, Any] = {}
        for kind in ("miss", "hit"):
            walls = [w for w, _ in samples[key][kind]]
            entry[kind] = {
                "ms": summarize(walls),
                "rss_mb": round(max(r for _, r in samples[key][kind]), 1),
            }
        if key in upstream:
            walls = [w for w, _ in upstream[key]]
            entry["upstream"] = {
                "ms": summarize(walls),
                "rss_mb": round(max(r for _, r in upstream[key]), 1),
            }
            entry["ratio_miss"] = round(
                entry["miss"]["ms"]["median"] / entry["upstream"]["ms"]["median"], 1
            )
            entry["ratio_hit"] = round(
                entry["hit"]["ms"]["median"] / entry["upstream"]["ms"]["median"], 1
            )
        else:
            entry["upstream"] = None
            entry["upstream_note"] = NOT_COMPARABLE.get(key, "not built")
        results[key] = entry
    results["floor"] = {
        "ms": summarize([w for w, _ in floor]),
        "rss_mb": round(max(r for _, r in floor), 1),
    }
    if bare:
        results["bare"] = {
            "ms": summarize([w for w, _ in bare]),
            "rss_mb": round(max(r for _, r in bare), 1),
        }
    return results


def bundle_size(directory: Path) -> dict[str, float]:
    files = [p for p in directory.rglob("*") if p.is_file() and not p.is_symlink()]
    return {"mib": round(sum(p.stat().st_size for p in files) / (1 << 20), 1), "files": len(files)}


def bundle_sizes() -> dict[str, dict[str, float]]:
    """Every architecture's bundle that is built (make release builds them all): the size budget
    holds for each; exec times are this machine's architecture only (another runs under qemu)."""
    return {
        arch: bundle_size(release_package.bundle_dir(arch))
        for arch in sorted(TARGETS)
        if (release_package.bundle_dir(arch) / "credprovider").exists()
    }


def import_profile(
    target: Target, extra_env: dict[str, str] | None = None
) -> list[tuple[str, float]]:
    """Top self import times (ms) of one exec from source (``-X importtime``), by top-level package.

    With ``extra_env`` (a cache directory) the cache is warmed first, so this profiles a cache hit.
    Without it the credential cache is off, so this profiles a cache miss.
    """
    env = {
        **clean_env(target.env),
        "PYTHONPATH": str(REPO),
        # The bundle ships compiled bytecode: profile with a warm bytecode cache, not compile time.
        "PYTHONPYCACHEPREFIX": str(REPO / "build" / "pycache"),
        **(extra_env or {}),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-m", "credprovider", target.name, *target.args]
    # The first run writes the bytecode cache (and, with a cache directory, warms the credential cache).
    subprocess.run(
        command, input=request_bytes(target.image), env=env, capture_output=True, check=False
    )
    if extra_env:
        # A cache hit makes no connection: profile it without the test-mode loopback guard,
        # as it runs on a node.
        env = {k: v for k, v in env.items() if not k.startswith("CREDPROVIDER_TEST_")}
    startup = {module for module, _ in _importtime([command[0], "-c", "pass"], b"", env)}
    rows = _importtime(command, request_bytes(target.image), env)
    top: dict[str, float] = {}
    for module, ms in rows:
        if module in startup:  # the interpreter's own start (site, encodings): not ours to trim
            continue
        root = module.split(".")[0]
        top[root] = top.get(root, 0.0) + ms
    return sorted(top.items(), key=lambda item: -item[1])[:6]


def _importtime(command: list[str], stdin: bytes, env: dict[str, str]) -> list[tuple[str, float]]:
    """(module, self ms) for every import of one run under ``-X importtime``."""
    proc = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]],
        input=stdin,
        capture_output=True,
        env=env,
        check=False,
    )
    rows = []
    for line in proc.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            parts = [p.strip() for p in line.split(":", 1)[1].split("|")]
            if parts[0].isdigit():
                rows.append((parts[2].strip(), int(parts[0]) / 1000))
    return rows

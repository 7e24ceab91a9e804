"""Exec cost: interleaved timed runs of the bundle (through a small launcher that reads the child's
wall time and peak RSS), bundle sizes, and where an exec's imports go."""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

from bench.common import NOT_COMPARABLE, RUNS, UPSTREAM_DIR, Target, clean_env
from release import native
from release import package as release_package
from release.bundle import BUNDLE_DIR, REPO
from release.targets import TARGETS, host_target

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


def run_once(
    command: list[str], stdin: bytes, env: dict[str, str], own_network: bool = False
) -> tuple[float, float, int]:
    """Wall ms, peak RSS (MB) and exit code of one exec of ``command`` (see ``_LAUNCHER``);
    ``own_network``: in a network namespace of its own (outside the timed exec), where nothing
    but a loopback that is down exists."""
    launcher = [sys.executable, "-S", "-c", f"_MARK = {_MARK!r}\n{_LAUNCHER}"]
    isolate = ["unshare", "--net"] if own_network else []
    proc = subprocess.run(
        [*isolate, *launcher, *command], input=stdin, capture_output=True, env=env, check=False
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


class Variant(NamedTuple):
    key: str  # the provider whose request it is sent (the floor and bare start use aws's)
    kind: str  # miss, hit, upstream, floor or bare
    command: list[str]
    env: dict[str, str]
    own_network: bool = False


# A hit is measured as it runs on a node: without the test mode's loopback guard (which costs a
# hit about 1 ms to arm), so in a network namespace of its own, where a hit that turned into a
# miss could reach nothing (as root; otherwise in test mode, and the report says so).
HIT_AS_ON_A_NODE = os.geteuid() == 0


def on_a_node(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("CREDPROVIDER_TEST_")}


Samples = dict[tuple[str, str], list[tuple[float, float]]]  # (key, kind): (wall ms, peak RSS MB)


def measure_targets(targets: dict[str, Target], cache_dir: Path) -> dict[str, Any]:
    """Interleaved rounds (the machine is noisy): miss, hit and upstream for each provider."""
    variants = _variants(targets, cache_dir)
    _warm_up(targets, variants)
    samples = _sample(targets, variants)
    results: dict[str, Any] = {key: _provider_entry(key, samples) for key in targets}
    results["floor"] = _stats(samples[("aws", "floor")])
    if samples.get(("aws", "bare")):
        results["bare"] = _stats(samples[("aws", "bare")])
    return results


def _variants(targets: dict[str, Target], cache_dir: Path) -> list[Variant]:
    # The floor: the bundle starting and exiting (--version), no request, no provider.
    variants = [
        Variant(
            "aws",
            "floor",
            [str(BUNDLE_DIR / "ecr-credential-provider"), "--version"],
            clean_env({}),
        )
    ]
    # The bare start of the interpreter the bundle was built from: what every ratio is taken to.
    interpreter = native.python_prefix(host_target())
    if (interpreter / "bin" / "python3.11").exists():
        command = [str(interpreter / "bin" / "python3.11"), "-I", "-S", "-c", "pass"]
        env = clean_env({"LD_LIBRARY_PATH": str(interpreter / "lib")})
        variants.append(Variant("aws", "bare", command, env))
    for key, target in targets.items():
        env = clean_env(target.env)
        command = target.command + target.args
        variants.append(Variant(key, "miss", command, env))
        if target.token:  # no cache-hit exec (common.Target)
            continue
        hit_env = {**env, "CREDPROVIDER_CACHE_DIR": str(cache_dir / key)}
        if HIT_AS_ON_A_NODE:
            variants.append(Variant(key, "hit", command, on_a_node(hit_env), True))
        else:
            variants.append(Variant(key, "hit", command, hit_env))
        upstream_binary = UPSTREAM_DIR / f"{key}-{target.name}"
        if upstream_binary.exists():
            upstream_env = {k: v for k, v in env.items() if not k.startswith("CREDPROVIDER_")}
            variants.append(Variant(key, "upstream", [str(upstream_binary)], upstream_env))
    return variants


def _warm_up(targets: dict[str, Target], variants: list[Variant]) -> None:
    """Two runs of each provider variant: warms the page cache and fills the hit caches."""
    for key, target in targets.items():
        for variant in variants:
            if variant.key != key or variant.kind in ("floor", "bare"):
                continue
            if variant.own_network:  # the hit's entry is written by a miss in test mode first
                cache = variant.env["CREDPROVIDER_CACHE_DIR"]
                filled = {**clean_env(target.env), "CREDPROVIDER_CACHE_DIR": cache}
                run_once(variant.command, target.request(), filled)
            for _ in range(2):
                _, _, code = run_once(
                    variant.command, target.request(), variant.env, variant.own_network
                )
                if code != 0:
                    raise SystemExit(f"{key} {variant.kind} failed during warm-up (exit {code})")


def _sample(targets: dict[str, Target], variants: list[Variant]) -> Samples:
    """:data:`RUNS` rounds, each running every variant once in a shuffled (seeded) order."""
    samples: Samples = {(v.key, v.kind): [] for v in variants}
    for round_index in range(RUNS):
        order = variants[:]
        random.Random(round_index).shuffle(order)
        for key, kind, command, env, own_network in order:
            wall, rss, code = run_once(command, targets[key].request(), env, own_network)
            if code != 0:
                raise SystemExit(f"{key} {kind} failed (exit {code})")
            samples[(key, kind)].append((wall, rss))
    return samples


def _stats(runs: list[tuple[float, float]]) -> dict[str, Any]:
    return {"ms": summarize([w for w, _ in runs]), "rss_mb": round(max(r for _, r in runs), 1)}


def _provider_entry(key: str, samples: Samples) -> dict[str, Any]:
    entry: dict[str, Any] = {
        kind: _stats(samples[(key, kind)]) if (key, kind) in samples else None
        for kind in ("miss", "hit")
    }
    if (key, "upstream") not in samples:
        entry["upstream"] = None
        entry["upstream_note"] = NOT_COMPARABLE.get(key, "not built")
        return entry
    entry["upstream"] = _stats(samples[(key, "upstream")])
    upstream_median = entry["upstream"]["ms"]["median"]
    entry["ratio_miss"] = round(entry["miss"]["ms"]["median"] / upstream_median, 1)
    entry["ratio_hit"] = round(entry["hit"]["ms"]["median"] / upstream_median, 1)
    return entry


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
    subprocess.run(command, input=target.request(), env=env, capture_output=True, check=False)
    if extra_env:
        # A cache hit makes no connection: profile it without the test-mode loopback guard,
        # as it runs on a node.
        env = {k: v for k, v in env.items() if not k.startswith("CREDPROVIDER_TEST_")}
    startup = {module for module, _ in _importtime([command[0], "-c", "pass"], b"", env)}
    rows = _importtime(command, target.request(), env)
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

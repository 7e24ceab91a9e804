"""A scale-out storm against a rate-limited ECR: every new node execs its plugin at once, the
token API serves a few calls a second (a token bucket, as ECR's 20 a second with a burst of 200
per account and region, scaled to this machine) and answers ThrottlingException beyond. Ours and
the upstream Go plugin in the same run, each exec killed at 60 s as the kubelet would."""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import ECR_IMAGE, clean_env, log
from emulators.harness import Emulator
from emulators.kubelet_exec import request_bytes
from emulators.ratelimit import TokenBucket

KUBELET_KILL_SECONDS = 60.0
# 200 execs against 4 calls a second with a burst of 40: 1,000 nodes against ECR's 20 and 200.
# The bucket can serve burst + rate x 50 s (the plugins' own deadline) = 240 in time.
STORMS = ((200, 4.0, 40.0), (20, 2.0, 5.0))


def throttle_storm(
    plugin: Path, emulator: Emulator, execs: int, rate: float, burst: float, upstream: bool
) -> dict[str, Any]:
    """``execs`` plugins started within one second, the bucket fresh: how many answered in
    time, when, and how many calls the token API saw."""
    fake = emulator.fakes["ecr"]
    bucket = TokenBucket(rate, burst)
    fake.bucket = bucket  # type: ignore[attr-defined]
    env = clean_env(emulator.env)
    if upstream:
        env = {k: v for k, v in env.items() if not k.startswith("CREDPROVIDER_")}
    request = request_bytes(ECR_IMAGE)
    processes: list[tuple[float, subprocess.Popen[bytes]]] = []
    start = time.monotonic()
    try:
        for number in range(execs):
            time.sleep(max(0.0, start + number / execs - time.monotonic()))
            process = subprocess.Popen(
                [str(plugin)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, env=env,
            )  # fmt: skip
            assert process.stdin is not None
            process.stdin.write(request)
            process.stdin.close()
            processes.append((time.monotonic(), process))
        answered: list[float] = []
        for began, process in processes:
            left = began + KUBELET_KILL_SECONDS - time.monotonic()
            try:
                process.wait(timeout=max(0.0, left))  # its answer is far below a pipe's buffer
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                continue
            took = time.monotonic() - began
            assert process.stdout is not None
            out = process.stdout.read()
            if process.returncode == 0 and json.loads(out or b"{}").get("auth"):
                answered.append(took)
    finally:
        fake.bucket = None  # type: ignore[attr-defined]
        for _, process in processes:
            if process.poll() is None:
                process.kill()
    answered.sort()
    return {
        "execs": execs,
        "rate": rate,
        "burst": burst,
        "answered": len(answered),
        "calls": bucket.served + bucket.throttled,
        "p50_s": round(statistics.median(answered), 1) if answered else None,
        "p99_s": round(answered[min(len(answered) - 1, int(0.99 * len(answered)))], 1)
        if answered
        else None,
    }


def throttle_storms(ours: Path, upstream: Path, emulator: Emulator) -> list[dict[str, Any]]:
    """Each storm of :data:`STORMS`, ours then upstream's (when it was built)."""
    results = []
    for execs, rate, burst in STORMS:
        for side, plugin in (("ours", ours), ("upstream", upstream)):
            if not plugin.exists():
                continue
            log(f"throttled storm: {execs} execs against {rate:g}/s, burst {burst:g} ({side})")
            results.append(
                {
                    "side": side,
                    **throttle_storm(plugin, emulator, execs, rate, burst, side == "upstream"),
                }
            )
    return results

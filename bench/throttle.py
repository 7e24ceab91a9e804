"""A scale-out storm against a rate-limited token API: every new node execs its plugin at once, the
token API serves a few calls a second (a token bucket, as ECR's 20 a second with a burst of 200
per account and region, scaled to this machine) and throttles beyond. ECR answers
ThrottlingException: ours and the upstream Go plugin in the same run. ACR's exchange answers 429
with Retry-After: ours alone (the upstream Azure plugin cannot be built here). Each exec is killed
at 60 s as the kubelet would."""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from dataclasses import dataclass
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


# ACR's exchange throttled: 429 with Retry-After of a second.
ACR_RETRY_AFTER = 1


@dataclass(frozen=True)
class StormTarget:
    """One cloud's plugin in a storm: what it is run as, the image asked for, the emulator and
    which of its fakes holds the rate-limited token API."""

    cloud: str
    command: list[str]
    image: str
    emulator: Emulator
    fake: str


def throttle_storm(
    target: StormTarget, execs: int, rate: float, burst: float, upstream: bool
) -> dict[str, Any]:
    """``execs`` plugins started within one second, the bucket fresh: how many answered in
    time, when, and how many calls the token API saw."""
    fake = target.emulator.fakes[target.fake]
    bucket = TokenBucket(rate, burst)
    fake.bucket = bucket  # type: ignore[attr-defined]
    env = clean_env(target.emulator.env)
    if upstream:
        env = {k: v for k, v in env.items() if not k.startswith("CREDPROVIDER_")}
    request = request_bytes(target.image)
    processes: list[tuple[float, subprocess.Popen[bytes]]] = []
    start = time.monotonic()
    try:
        for number in range(execs):
            time.sleep(max(0.0, start + number / execs - time.monotonic()))
            process = subprocess.Popen(
                target.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
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
        "cloud": target.cloud,
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


def throttle_storms(
    ours: Path, upstream: Path, ecr: Emulator, acr: StormTarget | None = None
) -> list[dict[str, Any]]:
    """Each storm of :data:`STORMS` against ECR, ours then upstream's (when it was built); then
    the same storms against ACR's exchange (429 with Retry-After), ours alone."""
    results = []
    sides = [("ours", ours), ("upstream", upstream)]
    for execs, rate, burst in STORMS:
        for side, plugin in sides:
            if not plugin.exists():
                continue
            log(
                f"throttled storm (ECR): {execs} execs against {rate:g}/s, burst {burst:g} ({side})"
            )
            target = StormTarget("ecr", [str(plugin)], ECR_IMAGE, ecr, "ecr")
            storm = throttle_storm(target, execs, rate, burst, side == "upstream")
            results.append({"side": side, **storm})
    if acr is not None:
        acr.emulator.fakes[acr.fake].retry_after = ACR_RETRY_AFTER  # type: ignore[attr-defined]
        try:
            for execs, rate, burst in STORMS:
                log(f"throttled storm (ACR): {execs} execs against {rate:g}/s, burst {burst:g}")
                results.append({"side": "ours", **throttle_storm(acr, execs, rate, burst, False)})
        finally:
            acr.emulator.fakes[acr.fake].retry_after = None  # type: ignore[attr-defined]
    return results

"""A boot storm through the real kubelet code (the harness), and execs over a simulated day."""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import clean_env, log
from emulators.harness import Emulator
from release import gobuild


def harness_binary() -> Path:
    log("the kubelet harness (built once per source)")
    return gobuild.binary(gobuild.HARNESS, "kubelet-harness")


def run_harness(
    config: Path,
    bin_dir: Path,
    script: list[dict[str, Any]],
    env: dict[str, str],
    in_flight: int = 10,
) -> list[dict[str, Any]]:
    """The kubelet harness on ``script`` (its lookups, ``in_flight`` at a time): one result each."""
    proc = subprocess.run(
        [
            str(harness_binary()),
            "--config",
            str(config),
            "--bin-dir",
            str(bin_dir),
            "--concurrency",
            str(in_flight),
        ],
        input=json.dumps(script).encode(),
        capture_output=True,
        env=env,
        timeout=600,
        check=False,
    )
    return [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]


def storm_images() -> list[str]:
    registries = [
        "123456789012.dkr.ecr.us-east-1.amazonaws.com",
        "210987654321.dkr.ecr.us-west-2.amazonaws.com",
        "public.ecr.aws",
    ]
    return [f"{registries[i % 3]}/team/app-{i}" for i in range(30)]


def boot_storm(
    variant: str, real_plugin: Path, emulator: Emulator, cache_dir: Path | None
) -> dict[str, Any]:
    """30 distinct images over 3 registries, 10 lookups in flight, a fresh kubelet (cache empty)."""
    fake = emulator.fakes["ecr"]
    calls_before = len(fake.calls)  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as work:
        bin_dir = Path(work) / "bin"
        bin_dir.mkdir()
        cpu_log = Path(work) / "cpu.log"
        wrapper = bin_dir / "ecr-credential-provider"
        wrapper.write_text(
            f'#!/bin/bash\n"{real_plugin}" "$@"\nrc=$?\ntimes >> "{cpu_log}"\nexit $rc\n'
        )
        wrapper.chmod(0o755)
        config = Path(work) / "config.json"
        config.write_text(json.dumps(_STORM_CONFIG))
        env = clean_env(emulator.env)
        if cache_dir is not None:
            env["CREDPROVIDER_CACHE_DIR"] = str(cache_dir)
        if variant == "upstream":
            env = {k: v for k, v in env.items() if not k.startswith("CREDPROVIDER_")}
        start = time.perf_counter()
        results = run_harness(config, bin_dir, [{"image": image} for image in storm_images()], env)
        total = time.perf_counter() - start
        execs, cpu = _exec_cpu(cpu_log)
        latencies = sorted(r["seconds"] * 1000 for r in results)
        return {
            "found": sum(1 for r in results if r["found"]),
            "lookups": len(results),
            "cloud_calls": len(fake.calls) - calls_before,  # type: ignore[attr-defined]
            "execs": execs,
            "exec_cpu_s": round(cpu, 2),
            "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
            "p99_ms": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))], 1)
            if latencies
            else None,
            "total_s": round(total, 2),
        }


def ecr_config(match_images: list[str], **fields: Any) -> dict[str, Any]:
    """A CredentialProviderConfig of one ECR provider claiming ``match_images``, with ``fields``."""
    provider = {
        "name": "ecr-credential-provider",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "defaultCacheDuration": "12h",
        "matchImages": match_images,
        **fields,
    }
    return {
        "apiVersion": "kubelet.config.k8s.io/v1",
        "kind": "CredentialProviderConfig",
        "providers": [provider],
    }


_STORM_CONFIG = ecr_config(["*.dkr.ecr.*.amazonaws.com", "public.ecr.aws"])


def _exec_cpu(cpu_log: Path) -> tuple[int, float]:
    """How many execs the wrapper logged, and their children's CPU seconds (user + system)."""
    if not cpu_log.exists():
        return 0, 0.0
    lines = cpu_log.read_text().splitlines()
    cpu = 0.0
    for child_line in lines[1::2]:  # `times`: shell line, then children line
        for part in child_line.split():
            minutes, _, seconds = part.rstrip("s").partition("m")
            cpu += float(minutes) * 60 + float(seconds)
    return len(lines) // 2, cpu


@dataclass(frozen=True)
class CachePolicy:
    key_type: str  # Image | Registry | Global
    seconds: float  # cacheDuration the plugin answers


POLICIES = {
    "aws": {
        "ours": CachePolicy("Registry", 6 * 3600),
        "upstream": CachePolicy("Registry", 6 * 3600),
    },
    "azure": {
        "ours": CachePolicy("Registry", 1.5 * 3600),
        "upstream": CachePolicy("Registry", 3600),
    },
    "gcp": {"ours": CachePolicy("Global", 1800), "upstream": CachePolicy("Image", 0)},
}


def simulated_day(policy: CachePolicy, pulls: int = 1000, seed: int = 7) -> int:
    """Execs the kubelet makes for ``pulls`` cache-missed pulls spread over 24h (3 registries, 30
    images), honouring cacheKeyType and cacheDuration as the kubelet's cache does."""
    rng = random.Random(seed)
    times = sorted(rng.uniform(0, 86400) for _ in range(pulls))
    expiry: dict[str, float] = {}
    execs = 0
    for now in times:
        image = rng.randrange(30)
        registry = image % 3
        keys = [f"image-{image}", f"registry-{registry}", "global"]
        if any(expiry.get(key, -1.0) >= now for key in keys):
            continue
        execs += 1
        stored = {"Image": keys[0], "Registry": keys[1], "Global": keys[2]}[policy.key_type]
        if policy.seconds > 0:
            expiry[stored] = now + policy.seconds
    return execs

"""``make bench``: exec cost, cache, a boot storm through the real kubelet code, and a simulated day,
ours against the upstream Go plugins where they can be built and pointed at loopback.

Writes bench/results.json and bench/results.md. Budgets (from the speed issue) are checked and
reported, never asserted by unit tests. Everything runs against the loopback emulators.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import (
    ECR_IMAGE,
    RESULTS_JSON,
    RESULTS_MD,
    RUNS,
    UPSTREAM_DIR,
    Target,
    all_emulators,
    log,
)
from bench.configs import large_configs
from bench.measure import HIT_AS_ON_A_NODE, bundle_sizes, import_profile, measure_targets
from bench.report import check_budgets, render
from bench.storm import POLICIES, boot_storm, simulated_day
from bench.throttle import StormTarget, throttle_storms
from bench.tokens import PODS, token_storms
from bench.upstream import build_upstream
from emulators.harness import ACR_REGISTRY, GCP_PULLER, Emulator
from release.bundle import BUNDLE_DIR
from release.targets import host_target


def main() -> int:
    if not (BUNDLE_DIR / "credprovider").exists():
        raise SystemExit("build the bundle first (make build)")
    upstream_notes = build_upstream()
    with all_emulators() as emulators, tempfile.TemporaryDirectory() as cache_root:
        targets = _targets(emulators)
        log(f"measuring exec cost ({RUNS} rounds)")
        execs = measure_targets(targets, Path(cache_root))
        log("boot storm through the kubelet harness")
        storm = _boot_storms(emulators["aws"], Path(cache_root) / "storm")
        azure = targets["azure"]
        throttled = throttle_storms(
            BUNDLE_DIR / "ecr-credential-provider",
            UPSTREAM_DIR / "aws-ecr-credential-provider",
            emulators["aws"],
            StormTarget("acr", azure.command + azure.args, azure.image, emulators["azure"], "acr"),
        )
        log(f"token mode at boot: {PODS} pods of one service account through the kubelet harness")
        token_mode = token_storms(
            BUNDLE_DIR / "ecr-credential-provider", UPSTREAM_DIR / "aws-ecr-credential-provider"
        )
        sizes = bundle_sizes()
        hit_profile = import_profile(
            targets["aws"], {"CREDPROVIDER_CACHE_DIR": str(Path(cache_root) / "profile")}
        )
        # What a cache miss pays for, per provider (reported for every provider, met budget or not).
        profiles = {key: import_profile(target) for key, target in targets.items()}
    log("large configs through credprovider validate")
    configs = large_configs()
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "runs": RUNS,
        "execs": execs,
        "upstream": upstream_notes,
        "arch": host_target().arch,
        "bundles": sizes,
        "hits_as_on_a_node": HIT_AS_ON_A_NODE,
        "boot_storm": storm,
        "throttled_storms": throttled,
        "token_mode": token_mode,
        "simulated_day": {
            key: {side: simulated_day(policy) for side, policy in sides.items()}
            for key, sides in POLICIES.items()
        },
        "large_configs": configs,
        "budgets": check_budgets(execs, sizes, storm, configs, throttled),
        "profiles": profiles,
        "hit_profile": hit_profile,
    }
    RESULTS_JSON.write_text(json.dumps(results, indent=2) + "\n")
    RESULTS_MD.write_text(render(results))
    print(RESULTS_MD.read_text())
    failed = [check["budget"] for check in results["budgets"] if not check["ok"]]
    if failed:
        log(f"{len(failed)} budget(s) not met: " + "; ".join(failed))
        return 1
    return 0


def _targets(emulators: dict[str, Emulator]) -> dict[str, Target]:
    """One measured exec per plugin, each against its cloud's emulator."""
    registries = emulators["registries"]
    return {
        "aws": Target(
            "aws",
            "ecr-credential-provider",
            ECR_IMAGE,
            [],
            emulators["aws"].env,
            [str(BUNDLE_DIR / "ecr-credential-provider")],
        ),
        "gcp": Target(
            "gcp",
            "auth-provider-gcp",
            "us-docker.pkg.dev/p/r/app",
            ["get-credentials"],
            emulators["gcp"].env,
            [str(BUNDLE_DIR / "auth-provider-gcp")],
        ),
        # The same pull impersonating a service account: one more call (IAM Credentials, over TLS
        # through google-auth) after the metadata server's token.
        "gcp-impersonated": Target(
            "gcp-impersonated",
            "auth-provider-gcp",
            "us-docker.pkg.dev/p/r/app",
            ["get-credentials", f"--impersonate-service-account={GCP_PULLER}"],
            emulators["gcp"].env,
            [str(BUNDLE_DIR / "auth-provider-gcp")],
        ),
        "azure": Target(
            "azure",
            "acr-credential-provider",
            f"{ACR_REGISTRY}/team/app",
            [emulators["azure"].files["config"]],
            emulators["azure"].env,
            [str(BUNDLE_DIR / "acr-credential-provider")],
        ),
        # The fourth plugin: the pod's token traded at Quay's robot federation over TLS.
        "registries": Target(
            "registries",
            "registry-credential-provider",
            "registry.example.test/team/app",
            [
                "--backend",
                "quay",
                "--url",
                registries.servers["quay"].url.rstrip("/"),
                "--robot",
                "team+puller",
                "--registry",
                "registry.example.test",
                "--ca-file",
                registries.files["ca"],
            ],
            registries.env,
            [str(BUNDLE_DIR / "registry-credential-provider")],
            token=registries.fakes["issuer"].token(  # type: ignore[attr-defined]
                audience="registry.example.test", expires_in=24 * 3600
            ),
        ),
    }


def _boot_storms(emulator: Emulator, cache: Path) -> dict[str, Any]:
    """The boot storm with our plugin (cache off, then on) and upstream's when it was built."""
    variants: list[tuple[str, Path, Path | None]] = [
        ("ours, cache off", BUNDLE_DIR / "ecr-credential-provider", None),
        ("ours, cache on", BUNDLE_DIR / "ecr-credential-provider", cache),
    ]
    upstream_ecr = UPSTREAM_DIR / "aws-ecr-credential-provider"
    if upstream_ecr.exists():
        variants.append(("upstream Go", upstream_ecr, None))
    return {
        variant: boot_storm(
            "upstream" if variant.startswith("upstream") else variant, plugin, emulator, cache_dir
        )
        for variant, plugin, cache_dir in variants
    }


if __name__ == "__main__":
    sys.exit(main())

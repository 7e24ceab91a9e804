"""Token mode (KEP-4412) at boot: 50 pods of one service account, each with its own bound token,
through the real kubelet code (the harness), with the provider's ``cacheType`` Token or
ServiceAccount. Counts the plugin's execs and the cloud calls they make (STS
AssumeRoleWithWebIdentity, counted in front of moto, and ECR)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from bench.common import clean_env
from bench.storm import ecr_config, run_harness
from emulators.aws import StsRecorder
from emulators.harness import aws_emulator
from emulators.http import serve

PODS = 50
IN_FLIGHT = 10
REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
ROLE = "arn:aws:iam::123456789012:role/puller"
# a service account token's shape; "{pod}" becomes the pod's name (one token per pod, as bound
# tokens are)
TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZGVmYXVsdDpwdWxsZXIifQ.{pod}"


def _config(cache_type: str) -> dict[str, Any]:
    return ecr_config(
        ["*.dkr.ecr.*.amazonaws.com"],
        tokenAttributes={
            "serviceAccountTokenAudience": "sts.amazonaws.com",
            "cacheType": cache_type,
            "requireServiceAccount": True,
            "optionalServiceAccountAnnotationKeys": ["eks.amazonaws.com/ecr-role-arn"],
        },
    )


def _script() -> list[dict[str, Any]]:
    account = {
        "name": "puller",
        "uid": "0b1c2d3e-0000-4000-8000-000000000001",
        "annotations": {"eks.amazonaws.com/ecr-role-arn": ROLE},
        "token": TOKEN,
    }
    return [
        {
            "image": f"{REGISTRY}/team/app-{i}",
            "namespace": "default",
            "pod": f"pod-{i}",
            "podUID": f"0b1c2d3e-0000-4000-8000-{i:012d}",
            "serviceAccount": account,
        }
        for i in range(PODS)
    ]


def token_storms(bundle_plugin: Path, upstream_plugin: Path) -> dict[str, Any]:
    """Ours for both cache types, and upstream's where it was built."""
    found = {}
    for cache_type in ("Token", "ServiceAccount"):
        found[f"ours, cacheType {cache_type}"] = token_storm(bundle_plugin, cache_type)
        if upstream_plugin.exists():
            found[f"upstream Go, cacheType {cache_type}"] = token_storm(
                upstream_plugin, cache_type, upstream=True
            )
    return found


def token_storm(plugin: Path, cache_type: str, upstream: bool = False) -> dict[str, Any]:
    """One boot of :data:`PODS` pods through the harness: lookups served, execs, cloud calls."""
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log
    with aws_emulator() as aws, tempfile.TemporaryDirectory() as work:
        ecr: Any = aws.fakes["ecr"]
        recorder = StsRecorder(str(aws.fakes["moto"]))
        with serve(recorder) as sts:
            bin_dir = Path(work) / "bin"
            bin_dir.mkdir()
            execs_log = Path(work) / "execs.log"
            wrapper = bin_dir / "ecr-credential-provider"
            wrapper.write_text(f'#!/bin/bash\necho x >> "{execs_log}"\nexec "{plugin}" "$@"\n')
            wrapper.chmod(0o755)
            config = Path(work) / "config.json"
            config.write_text(json.dumps(_config(cache_type)))
            env = clean_env({**aws.env, "AWS_ENDPOINT_URL_STS": sts.url})
            if upstream:
                env = {k: v for k, v in env.items() if not k.startswith("CREDPROVIDER_")}
            results = run_harness(config, bin_dir, _script(), env, IN_FLIGHT)
        execs = len(execs_log.read_text().splitlines()) if execs_log.exists() else 0
        return {
            "pods": PODS,
            "found": sum(1 for r in results if r["found"]),
            "execs": execs,
            "sts_calls": sum(1 for a in recorder.actions if a == "AssumeRoleWithWebIdentity"),
            "ecr_calls": len(ecr.calls),
        }

"""What the red-team cases share: the ECR image they ask for, the env that points the plugin at
the ECR fake, and how a case records its outcome."""

from __future__ import annotations

import json
from pathlib import Path

from emulators.aws import FakeEcr
from emulators.aws import ecr_env as node_env
from emulators.harness import SAFE_ENV
from emulators.http import FakeServer
from emulators.kubelet_exec import PluginRun, request_bytes, run_plugin
from tests.reliability.checks import Figures, Outcome, answer_violations

ECR = "ecr-credential-provider"
REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
IMAGE = f"{REGISTRY}/team/app"
OTHER_UID = 65534  # nobody
PLANTED = "planted-password-from-another-user"


def ecr_env(server: FakeServer, **extra: str) -> dict[str, str]:
    return {**SAFE_ENV, **node_env(server.url, **extra)}


def record(
    figures: Figures, scenario: str, run: PluginRun, problems: list[str], verbose: bool = True
) -> None:
    """Record the outcome; the exec contract is checked too (its one-line rule only at -v=0)."""
    violations = answer_violations(run, 50.0)
    if verbose:
        violations = [v for v in violations if "stderr lines, not one" not in v]
    problems = [*problems, *violations]
    figures.record(
        Outcome("redteam", scenario, run.code, run.seconds, 50.0, not problems, "; ".join(problems))
    )
    assert not problems, problems


def cached_run(server: FakeServer, cache: Path, *args: str) -> PluginRun:
    env = ecr_env(server, CREDPROVIDER_CACHE_DIR=str(cache))
    return run_plugin(ECR, request_bytes(IMAGE), ["-v=1", *args], env)


def answered_by_the_registry(run: PluginRun, fake: FakeEcr) -> list[str]:
    if run.code != 0:
        return [f"exit {run.code}: {run.stderr[-300:]}"]
    auth = run.response["auth"]
    if auth != {REGISTRY: {"username": "AWS", "password": fake.password}}:
        return [f"answered {json.dumps(auth)[:200]}"]
    return []

"""What the kubelet-code tests share: a node's bin dir of recording wrappers, provider entries, and
how a lookup's result is read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulators.aws import NOWHERE, ecr_env
from emulators.http import FakeServer
from tests.helpers import API_VERSIONS
from tests.helpers_kubelet import HarnessRun

ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/app"
ROLE = "arn:aws:iam::123456789012:role/image-puller"
SA_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YXBwczpwdWxsZXIifQ.c2ln"
IDP = "https://container.googleapis.com/v1/projects/p/locations/l/clusters/c"


@dataclass
class Node:
    """A kubelet bin dir whose plugins are counting wrappers around the bundle."""

    bin_dir: Path
    exec_log: Path
    directory: Path

    def execs(self, name: str | None = None) -> int:
        if not self.exec_log.exists():
            return 0
        lines = self.exec_log.read_text().splitlines()
        return len([line for line in lines if name is None or line.split()[0] == name])

    def config(self, providers: list[dict[str, Any]], name: str = "config.json") -> Path:
        path = self.directory / name
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "kubelet.config.k8s.io/v1",
                    "kind": "CredentialProviderConfig",
                    "providers": providers,
                }
            )
        )
        return path

    def script(self, name: str, body: str) -> None:
        """A hand-written plugin (for responses the kubelet must reject)."""
        path = self.bin_dir / name
        path.write_text("#!/bin/sh\ncat >/dev/null\n" + body)
        path.chmod(0o755)


def provider(
    name: str,
    match_images: list[str],
    api_version: str = API_VERSIONS[0],
    args: list[str] | None = None,
    cache: str = "1m",
    **extra: Any,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "apiVersion": api_version,
        "matchImages": match_images,
        "defaultCacheDuration": cache,
        **extra,
    }
    if args:
        entry["args"] = args
    return entry


def aws_env(server: FakeServer, sts: str = NOWHERE, **extra: str) -> dict[str, str]:
    return ecr_env(server.url, sts, **extra)


def found(run: HarnessRun) -> list[tuple[bool, list[str]]]:
    assert run.code == 0, run.klog[-2000:]
    return [(r["found"], [c["password"] for c in r["credentials"]]) for r in run.results]

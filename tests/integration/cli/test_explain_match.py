"""``credprovider explain`` and ``match``: offline answers about an image."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from release.bundle import REPO
from tests.helpers import fake_kubelet
from tests.helpers import run_cli as cli
from tests.integration.cli.conftest import ECR_IMAGE

# --- explain / match ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            [f"{ECR_IMAGE}:v1"],
            {
                "provider": "aws",
                "recognized": True,
                "region": "us-east-1",
                "public": False,
                "registry": "123456789012.dkr.ecr.us-east-1.amazonaws.com",
            },
        ),
        (
            ["public.ecr.aws/nginx/nginx"],
            {"provider": "aws", "recognized": True, "region": "us-east-1", "public": True},
        ),
        (
            ["myreg.eastus.geo.azurecr.io/app"],
            {"provider": "azure", "recognized": True, "loginServer": "myreg.eastus.geo.azurecr.io"},
        ),
        (["us-central1-docker.pkg.dev/p/r/app"], {"provider": "gcp", "recognized": True}),
        (
            ["nginx"],
            {
                "provider": None,
                "recognized": False,
                "image": "docker.io/library/nginx",
                "registry": "docker.io",
            },
        ),
        (
            ["quay.io/org/app", "--provider", "aws"],
            {"provider": "aws", "recognized": False, "region": None},
        ),
        (
            ["myreg.azurecr.io.evil.net/x", "--provider", "azure"],
            {"provider": "azure", "recognized": False, "loginServer": None},
        ),
    ],
)
def test_explain_json(args: list[str], expected: dict[str, Any]) -> None:
    result = cli("explain", *args, "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 0
    assert {key: report[key] for key in expected} == expected


def test_explain_imports_no_sdk() -> None:
    probe = (
        "import sys; from credprovider.tool.cli import main\n"
        "try:\n    main(['explain', 'myreg.azurecr.io/x', '--json'])\nexcept SystemExit:\n    pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'botocore', 'azure', 'google', 'msal', 'requests'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("args", "code", "out"),
    [
        (["*.dkr.ecr.*.amazonaws.com", ECR_IMAGE], 0, "match\n"),
        (
            ["*.dkr.ecr.*.amazonaws.com", "123456789012.dkr.ecr.us-east-1.amazonaws.com:443/app"],
            1,
            "no match: port differs: pattern has no port, image has 443 (ports must be equal): "
            "add '*.dkr.ecr.*.amazonaws.com:443'\n",
        ),
        (["registry.io/team", "registry.io/teammates/app"], 0, "match\n"),
        (
            ["*.io", "a.b.io/x"],
            1,
            "no match: host label count differs (2 vs 3): each '*' matches exactly one label\n",
        ),
        (
            ["*.gcr.io", "gcr.io/p/app:v1"],
            1,
            "no match: host label count differs (3 vs 2): each '*' matches exactly one label\n"
            "(image as the kubelet passes it: gcr.io/p/app)\n",
        ),
        (
            ["docker.io", "nginx"],
            0,
            "match\n(image as the kubelet passes it: docker.io/library/nginx)\n",
        ),
        (
            ["*.azurecr.io", "myreg.azurecr.cn/app"],
            1,
            "no match: host label 3 'cn' does not match 'io'\n",
        ),
        (
            ["registry.io/team", "registry.io/other/app"],
            1,
            "no match: the image path does not start with the pattern's path '/team'\n",
        ),
        (["only-one-argument"], 2, ""),
    ],
)
def test_match(args: list[str], code: int, out: str) -> None:
    result = cli("match", *args)
    assert (result.returncode, result.stdout) == (code, out)


def test_match_with_its_arguments_swapped_says_the_order() -> None:
    result = cli("match", "123456789012.dkr.ecr.us-east-1.amazonaws.com/app", "*.dkr.ecr.*.com")
    assert (result.returncode, result.stdout) == (2, "")
    assert (
        result.stderr.endswith(" (the pattern comes first: credprovider match PATTERN IMAGE)\n")
        and len(result.stderr.splitlines()) == 1
    )


def test_explain_asks_for_the_repository_of_a_bare_registry_host() -> None:
    result = cli("explain", "myreg.azurecr.io")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "credprovider explain: 'myreg.azurecr.io' names only a registry host, no repository (as an "
        "image, the kubelet would pull docker.io/library/myreg.azurecr.io from Docker Hub): did "
        "you mean myreg.azurecr.io/<repository>?\n"
    )


AZURE_IMAGE = "myreg.azurecr.io/team/app:v1"


@pytest.mark.skipif(os.geteuid() != 0, reason="a fake kubelet needs root (a pid namespace)")
def test_explain_uses_the_config_this_nodes_kubelet_uses(tmp_path: Path) -> None:
    """As validate, get and doctor do: on an AWS-only node an ACR image is claimed by no
    provider; --shipped asks about the shipped matchImages instead."""
    config = tmp_path / "config.yaml"
    shutil.copy(REPO / "config" / "aws.yaml", config)
    kubelet = fake_kubelet(
        [f"--image-credential-provider-config={config}",
         f"--image-credential-provider-bin-dir={tmp_path}"],
        os.environ,
    )  # fmt: skip
    try:
        on_node = cli("explain", AZURE_IMAGE, "--json")
        shipped = cli("explain", AZURE_IMAGE, "--json", "--shipped")
        given = cli(
            "explain", AZURE_IMAGE, "--json", "--config", str(REPO / "config" / "azure.yaml")
        )
    finally:
        kubelet.kill()
    assert on_node.returncode == 0, on_node.stderr
    found = json.loads(on_node.stdout)
    assert (found["plugin"], found["config"]) == (None, str(config))
    assert f"credprovider explain: --config {config} (running kubelet (pid 1))" in on_node.stderr
    assert json.loads(shipped.stdout)["plugin"] == "acr-credential-provider"
    assert json.loads(shipped.stdout)["config"] is None
    assert json.loads(given.stdout)["plugin"] == "acr-credential-provider"
    assert given.stderr == ""


def test_explain_without_a_node_config_says_it_used_the_shipped_patterns() -> None:
    result = cli("explain", AZURE_IMAGE)
    assert result.returncode == 0, result.stderr
    assert "config:   none on this node: the shipped matchImages\n" in result.stdout
    assert "provider: acr-credential-provider\n" in result.stdout

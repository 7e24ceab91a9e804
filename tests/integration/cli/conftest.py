"""What the ``credprovider`` subcommands' tests share: the bundle's plugins in a bin dir."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from credprovider.catalog import PLUGINS
from tests.helpers import BUNDLE_DIR
from tests.integration.conftest import REQUIRE_BUNDLE_ENV

ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/app"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    if not (BUNDLE_DIR / "credprovider").exists():
        if os.environ.get(REQUIRE_BUNDLE_ENV) == "1":
            pytest.fail("the bundle is missing: run make build")
        pytest.skip("bundle not built (make build)")
    directory = tmp_path / "bin"
    directory.mkdir()
    for plugin in PLUGINS.values():
        (directory / plugin.name).symlink_to(BUNDLE_DIR / plugin.name)
    return directory


def provider_entry(**fields: Any) -> dict[str, Any]:
    entry = {
        "name": "ecr-credential-provider",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "defaultCacheDuration": "12h",
        "matchImages": list(PLUGINS["aws"].match_images),
    }
    entry.update(fields)
    return entry


def config_file(tmp_path: Path, *providers: dict[str, Any]) -> Path:
    return write(
        tmp_path / "c.json",
        json.dumps(
            {
                "apiVersion": "kubelet.config.k8s.io/v1",
                "kind": "CredentialProviderConfig",
                "providers": list(providers),
            }
        ),
    )

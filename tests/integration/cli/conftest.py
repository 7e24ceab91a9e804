"""What the ``credprovider`` subcommands' tests share: the bundle's plugins in a bin dir."""

from __future__ import annotations

import os
from pathlib import Path

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

"""What the ``credprovider`` subcommands' tests share: the bundle's plugins in a bin dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from credprovider.catalog import PLUGINS
from tests.helpers import BUNDLE_DIR, require_bundle

ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/app"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    require_bundle()
    directory = tmp_path / "bin"
    directory.mkdir()
    for plugin in PLUGINS.values():
        (directory / plugin.name).symlink_to(BUNDLE_DIR / plugin.name)
    return directory

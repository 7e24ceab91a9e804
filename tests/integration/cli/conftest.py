"""What the ``credprovider`` subcommands' tests share: the bundle's plugins in a bin dir."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from credprovider.tool.catalog import PLUGINS
from release.bundle import BUNDLE_DIR
from tests.helpers import require_bundle, run_cli

ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/app"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def doctor(*args: str) -> tuple[int, dict[str, Any]]:
    """``credprovider doctor --json ARGS`` from source: its exit status (0 or 1, never a
    traceback) and its report."""
    result = run_cli("doctor", "--json", *args)
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    require_bundle()
    directory = tmp_path / "bin"
    directory.mkdir()
    for plugin in PLUGINS.values():
        (directory / plugin.name).symlink_to(BUNDLE_DIR / plugin.name)
    return directory


def fake_bundle(directory: Path, version: str) -> Path:
    """A stand-in credprovider bundle: a launcher that answers --version as credprovider does (under
    the name it is run as) and refuses anything else, next to _internal/ and its manifest."""
    (directory / "_internal").mkdir(parents=True)
    (directory / "_internal" / "credprovider.files").write_text(f"0 version-{version}\n")
    exe = directory / "credprovider"
    exe.write_text(
        "#!/bin/sh\n"
        'for arg; do [ "$arg" = --version ] && '
        f'{{ echo "$(basename "$0") version {version} (credprovider)"; exit 0; }}; done\n'
        'echo "$(basename "$0"): no request" >&2\nexit 1\n'
    )
    exe.chmod(0o755)
    for plugin in PLUGINS.values():  # the plugin names, as the bundle links them
        (directory / plugin.name).symlink_to("credprovider")
    return exe

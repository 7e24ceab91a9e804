"""Adding a cloud is one folder and one line: tests/fakes/examplecloud (a descriptor and a plugin),
and its line in ``entry.PLUGIN_PACKAGES``, added here through ``entry.register_cloud`` before the
product runs.

With nothing else changed, every part of the tool knows the new cloud (install with its own
``--example-config``, validate with its lint, explain, get), the kubelet's bin dir dispatches to its
plugin by name, and the kubelet's own code gets its credential through it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from credprovider.tool.catalog import PLUGINS
from emulators.kubelet_exec import request_bytes
from release.bundle import REPO
from tests.fakes.examplecloud.descriptor import DESCRIPTOR
from tests.helpers import private
from tests.helpers_kubelet import run_harness

# Runs the product as the bundle's executable would (argv[0] names the program), with the example
# cloud's line added to entry's table through its seam.
WITH_THE_LINE = f"""
import sys
from credprovider import entry
entry.register_cloud({DESCRIPTOR.name!r}, "tests.fakes.examplecloud")
entry.main(sys.argv[1:])
"""
IMAGE = "eu.registry.example.test/team/app"
TOKEN = "example-token-0123456789abcdefghij"


@pytest.fixture
def tool(tmp_path: Path) -> Path:
    """An executable that is the product with the example cloud's line in its table."""
    script = tmp_path / "with_the_line.py"
    script.write_text(WITH_THE_LINE)
    executable = tmp_path / "credprovider-with-example"
    executable.write_text(
        f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} {script} "$0" "$@"\n'
    )
    executable.chmod(0o755)
    return executable


def _run(command: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # in namespaces of its own: install takes its node lock in its /run
        private(command),
        input=stdin.decode(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def installed(tool: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """``install`` of the example cloud and Azure, each given its own node file."""
    token_file = tmp_path / "example-token"
    token_file.write_text(TOKEN + "\n")
    bin_dir, config = tmp_path / "bin", tmp_path / "config.yaml"
    run = _run(
        [
            str(tool),
            "credprovider",
            "install",
            "--providers=example,azure",
            f"--bin-dir={bin_dir}",
            f"--config-out={config}",
            f"--target={tool}",
            f"--example-config={token_file}",
            "--azure-config=/srv/azure.json",
            "--json",
        ]
    )
    assert run.returncode == 0, run.stderr
    return bin_dir, config, token_file


def test_the_tool_offers_the_new_cloud(tool: Path) -> None:
    shown = _run([str(tool), "credprovider", "install", "--help"])
    assert "comma list of aws, azure, gcp, registries, example" in shown.stdout  # last in the table
    assert "--example-config" in shown.stdout and "--azure-config" in shown.stdout
    explained = _run([str(tool), "credprovider", "explain", IMAGE, "--json"])
    assert explained.returncode == 0, explained.stderr
    claims = json.loads(explained.stdout)
    assert DESCRIPTOR.name in json.dumps(claims)
    assert "read the node's token file" in explained.stdout
    assert "example" not in PLUGINS  # this process never had the line


def test_install_writes_each_plugin_its_own_node_file(installed: tuple[Path, Path, Path]) -> None:
    bin_dir, config, token_file = installed
    providers = {p["name"]: p for p in yaml.safe_load(config.read_text())["providers"]}
    assert providers[DESCRIPTOR.name]["args"] == [str(token_file)]
    assert providers[DESCRIPTOR.name]["matchImages"] == list(DESCRIPTOR.match_images)
    assert providers["acr-credential-provider"]["args"] == ["/srv/azure.json"]
    assert (bin_dir / DESCRIPTOR.name).is_symlink()


def test_validate_runs_the_new_clouds_lint(
    tool: Path, installed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, config, _ = installed
    valid = _run([str(tool), "credprovider", "validate", str(config)])
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert "needs the node's token file" not in valid.stdout + valid.stderr
    bare = tmp_path / "bare.yaml"
    bare.write_text(_without_example_args(config))
    linted = _run([str(tool), "credprovider", "validate", str(bare)])
    assert f"{DESCRIPTOR.name} has no args" in linted.stdout + linted.stderr


def test_the_bin_dir_runs_the_new_plugin_by_name(installed: tuple[Path, Path, Path]) -> None:
    bin_dir, _, token_file = installed
    run = _run([str(bin_dir / DESCRIPTOR.name), str(token_file)], request_bytes(IMAGE))
    assert run.returncode == 0, run.stderr
    answer = json.loads(run.stdout)
    assert answer["auth"] == {
        "eu.registry.example.test": {"username": "example", "password": TOKEN}
    }
    assert TOKEN not in run.stderr


def test_get_and_the_kubelet_code_find_the_credential(
    tool: Path, installed: tuple[Path, Path, Path], kubelet_harness: Path
) -> None:
    bin_dir, config, _ = installed
    get = [str(tool), "credprovider", "get", f"--config={config}", f"--bin-dir={bin_dir}"]
    got = _run([*get, IMAGE, "--json"])
    assert got.returncode == 0, got.stderr
    assert TOKEN not in got.stdout  # masked without --show-password
    run = run_harness(kubelet_harness, config, bin_dir, [{"image": IMAGE}])
    assert run.code == 0, run.klog[-2000:]
    assert [c["password"] for c in run.results[0]["credentials"]] == [TOKEN]


def _without_example_args(config: Path) -> str:
    document = yaml.safe_load(config.read_text())
    for provider in document["providers"]:
        if provider["name"] == DESCRIPTOR.name:
            del provider["args"]
    return yaml.safe_dump(document, sort_keys=False)

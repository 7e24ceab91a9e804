"""``get``, ``validate`` and ``install`` without their paths: the config and bin dir this node's
kubelet uses, found as ``doctor`` finds them (here: a running kubelet whose flags name paths no
default would guess), said on stderr with where they came from."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from credprovider.tool.catalog import PLUGINS
from tests.helpers import config_file, fake_kubelet, provider_entry
from tests.helpers import run_cli as cli
from tests.integration.cli.conftest import fake_bundle


@pytest.fixture
def kubelet_paths(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    bin_dir, config = tmp_path / "node" / "plugins", tmp_path / "node" / "providers.json"
    bin_dir.mkdir(parents=True)
    config.write_text(config_file(tmp_path, provider_entry()).read_text())
    kubelet = fake_kubelet(
        [
            f"--image-credential-provider-config={config}",
            f"--image-credential-provider-bin-dir={bin_dir}",
        ],
        os.environ,
    )
    try:
        yield config, bin_dir
    finally:
        kubelet.kill()
        kubelet.wait()


def test_validate_with_no_path_checks_the_running_kubelets_config_and_plugins(
    kubelet_paths: tuple[Path, Path],
) -> None:
    config, bin_dir = kubelet_paths
    result = cli("validate", "--json")
    assert result.returncode == 1, result.stderr  # the bin dir holds no plugin yet
    report = json.loads(result.stdout)
    assert report["errors"] and str(bin_dir / "ecr-credential-provider") in report["errors"][0]
    first, second = result.stderr.splitlines()[:2]
    assert first.startswith(f"credprovider validate: PATH {config} (running kubelet (pid ")
    assert second.startswith(f"credprovider validate: --bin-dir {bin_dir} (running kubelet")


def test_get_with_no_paths_uses_the_running_kubelets(kubelet_paths: tuple[Path, Path]) -> None:
    config, bin_dir = kubelet_paths
    result = cli("get", "123456789012.dkr.ecr.us-west-2.amazonaws.com/app", "--json")
    assert f"credprovider get: --config {config} (running kubelet (pid " in result.stderr
    report = json.loads(result.stdout)
    [provider] = report["providers"]
    assert provider["matched"] and str(bin_dir / "ecr-credential-provider") in provider["error"]


def test_install_with_no_paths_installs_where_the_kubelet_looks(
    kubelet_paths: tuple[Path, Path], tmp_path: Path
) -> None:
    config, bin_dir = kubelet_paths
    target = fake_bundle(tmp_path / "bundle", "0.2.0")
    result = cli("install", "--providers", "aws", "--target", str(target))
    assert result.returncode == 0, result.stderr
    assert os.readlink(bin_dir / PLUGINS["aws"].name) == str(target)
    assert "ecr-credential-provider" in config.read_text()
    assert f"--bin-dir {bin_dir} (running kubelet (pid " in result.stderr


def test_install_will_not_guess_a_file_in_a_config_directory(tmp_path: Path) -> None:
    directory = tmp_path / "providers.d"
    directory.mkdir()
    (directory / "a.json").write_text(config_file(tmp_path, provider_entry()).read_text())
    kubelet = fake_kubelet(
        [
            f"--image-credential-provider-config={directory}",
            f"--image-credential-provider-bin-dir={tmp_path}",
        ],
        os.environ,
    )
    try:
        result = cli("install", "--providers", "aws", "--target", str(tmp_path))
    finally:
        kubelet.kill()
        kubelet.wait()
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.endswith(
        f"give --config-out (the kubelet reads the directory {directory}: name the file in it "
        "to write)\n"
    )


def test_install_into_a_config_directory_checks_it_whole(tmp_path: Path) -> None:
    """Told to name a file in the kubelet's config directory (1.34+: it reads each file there,
        and refuses a provider named in two), install checked only that file: ecr-credential-provider
        written into b.json beside an a.json that names it too, and the kubelet would not start
        ("duplicate provider name"). Refused now, nothing changed; a provider not named there is
        added, checked with the others, and the kubelet's flags (naming the directory) are in place. A
    file it would never read there (``b.conf``) is refused."""
    directory = tmp_path / "providers.d"
    directory.mkdir()
    (directory / "a.json").write_text(config_file(tmp_path, provider_entry()).read_text())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    target = fake_bundle(tmp_path / "bundle", "0.2.0")
    (bin_dir / "ecr-credential-provider").symlink_to(target)  # a.json's plugin
    kubelet = fake_kubelet(
        [
            f"--image-credential-provider-config={directory}",
            f"--image-credential-provider-bin-dir={bin_dir}",
        ],
        os.environ,
    )
    written = directory / "b.yaml"
    try:
        twice = cli("install", "--providers", "aws", "--target", str(target),
                    "--config-out", str(written))  # fmt: skip
        unread = cli("install", "--providers", "gcp", "--target", str(target),
                     "--config-out", str(directory / "b.conf"))  # fmt: skip
        left = (written.exists(), sorted(p.name for p in bin_dir.iterdir()))
        added = cli("install", "--providers", "gcp", "--target", str(target),
                    "--config-out", str(written))  # fmt: skip
    finally:
        kubelet.kill()
        kubelet.wait()
    assert twice.returncode == 1, twice.stderr
    assert (
        f"the kubelet reads the directory {directory} whole, and with {written} written there, "
        f"would not start with the config {directory}: duplicate provider name "
        f'"ecr-credential-provider" found in configuration file(s) (in {directory / "a.json"} '
        f"and in {written}); nothing is written that it would refuse" in twice.stderr
    ), twice.stderr
    assert left == (False, ["ecr-credential-provider"])  # nothing was changed
    assert unread.returncode == 1 and (
        f"the kubelet reads only the .json, .yaml, .yml files of its config directory "
        f"{directory}, and would never read b.conf: give it one of those endings" in unread.stderr
    ), unread.stderr
    assert not (directory / "b.conf").exists()
    assert added.returncode == 0, added.stdout + added.stderr
    assert "the kubelet's flags already name this config and bin dir" in added.stdout
    assert "auth-provider-gcp" in written.read_text()

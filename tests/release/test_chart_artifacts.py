"""The fleet chart in the release (release/chart.py): the packaged chart is the chart directory
under ``credprovider/``, byte for byte and reproducible, and Helm lints it; the plain manifests of
each mode are Helm's rendering with the image pinned by the digest of the release's OCI index; all
are in SHA256SUMS."""

from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from release import bundle, chart, image
from tests.chart.helm import helm_binary
from tests.release.conftest import required_arches

RELEASE = bundle.REPO / "dist" / "release"


@pytest.fixture
def version() -> str:
    found = bundle.project_version()
    if not (RELEASE / chart.package_name(found)).exists():
        if required_arches():
            pytest.fail("the packaged chart is missing: make release")
        pytest.skip("make release packages the chart")
    return found


def test_the_packaged_chart_is_the_chart_directory(version: str, tmp_path: Path) -> None:
    packaged = RELEASE / chart.package_name(version)
    with tarfile.open(packaged) as tar:
        files = [m for m in tar.getmembers() if m.isfile()]
        members = {m.name: tar.extractfile(m).read() for m in files}  # type: ignore[union-attr]
    expected = {
        f"credprovider/{path.relative_to(chart.CHART).as_posix()}": path.read_bytes()
        for path in chart.CHART.rglob("*")
        if path.is_file()
    }
    assert members == expected
    again = tmp_path / "again"
    again.mkdir()
    epoch = files[0].mtime
    assert chart.package(again, version, epoch).read_bytes() == packaged.read_bytes()
    done = subprocess.run(
        [str(helm_binary()), "lint", str(packaged), "--strict", "--set", "image.repository=r/c"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("mode", chart.MODES)
def test_the_manifests_pin_the_release_image_by_digest(version: str, mode: str) -> None:
    with tarfile.open(RELEASE / image.archive_name(version)) as tar:
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
    [entry] = index["manifests"]
    text = (RELEASE / chart.manifests_name(version, mode)).read_text()
    assert text.startswith(f"# credprovider {version}, chart mode {mode}")
    docs = [doc for doc in yaml.safe_load_all(text) if doc]
    [daemonset] = [doc for doc in docs if doc["kind"] == "DaemonSet"]
    [container] = daemonset["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"credprovider@{entry['digest']}"
    assert f"--version={version}" in container["args"]
    kinds = {doc["kind"] for doc in docs}
    assert ("ClusterRole" in kinds) is (mode == "flags")  # mode files asks the API server nothing
    # no helm hook: kubectl apply would run helm uninstall's pre-delete Job at once
    assert "Job" not in kinds and "helm.sh/hook" not in text


def test_the_chart_artifacts_are_in_the_checksums(version: str) -> None:
    sums = dict(
        reversed(line.split("  ")) for line in (RELEASE / "SHA256SUMS").read_text().splitlines()
    )
    for name in (
        chart.package_name(version),
        *(chart.manifests_name(version, m) for m in chart.MODES),
    ):
        assert sums[name] == hashlib.sha256((RELEASE / name).read_bytes()).hexdigest()

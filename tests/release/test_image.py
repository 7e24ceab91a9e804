"""The release's OCI image (release/image.py): each architecture's image is its release tarball and
nothing else, runs as a non-root user, has an SBOM naming it, and ``python -m release push`` (what
``make release REGISTRY=...`` runs) puts the index and every image in a registry.

Running the image under containerd is tests/e2e/test_real_runtime.py's (the ``config/`` run).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from release import bundle, gobuild, image, oci
from release.targets import Target
from tests.helpers import unavailable

RELEASE = bundle.REPO / "dist" / "release"


def archive_members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {
            member.name: extracted.read()
            for member in tar.getmembers()
            if (extracted := tar.extractfile(member)) is not None
        }


def blob(members: dict[str, bytes], digest: str) -> bytes:
    data = members[f"blobs/sha256/{digest.split(':')[1]}"]
    assert f"sha256:{hashlib.sha256(data).hexdigest()}" == digest
    return data


@pytest.fixture
def archive(tarball: Path) -> Path:
    path = RELEASE / image.archive_name(bundle.project_version())
    assert path.exists(), f"{path} is missing beside {tarball.name}: make release writes both"
    return path


def arch_manifest(members: dict[str, bytes], arch: str) -> dict[str, Any]:
    [top] = json.loads(members["index.json"])["manifests"]
    assert top["mediaType"] == oci.INDEX
    version = bundle.project_version()
    # a tag, no registry: the operator names it (ctr import --base-name, skopeo copy)
    assert top["annotations"] == {oci.REF_NAME: version}
    platforms = {
        entry["platform"]["architecture"]: entry
        for entry in json.loads(blob(members, top["digest"]))["manifests"]
    }
    assert {p["platform"]["os"] for p in platforms.values()} == {"linux"}
    found: dict[str, Any] = json.loads(blob(members, platforms[arch]["digest"]))
    found["digest"] = platforms[arch]["digest"]
    return found


def test_each_image_is_its_tarball_run_as_a_non_root_user(
    target: Target, tarball: Path, archive: Path
) -> None:
    members = archive_members(archive)
    manifest = arch_manifest(members, target.arch)
    [layer] = manifest["layers"]
    assert layer["mediaType"] == oci.LAYER
    assert blob(members, layer["digest"]) == tarball.read_bytes()  # byte for byte
    config = json.loads(blob(members, manifest["config"]["digest"]))
    assert (config["os"], config["architecture"]) == ("linux", target.arch)
    top = f"/credprovider-{bundle.project_version()}"
    assert config["config"]["User"] == "65532:65532"
    assert config["config"]["Entrypoint"] == [f"{top}/credprovider"]
    assert config["config"]["Env"] == [f"PATH={top}"]
    uncompressed = gzip.decompress(tarball.read_bytes())
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(uncompressed).hexdigest()}"]
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    # the bundle and its papers under one directory: no shell, no package manager, no /etc
    assert {name.split("/")[0] for name in names} == {top.lstrip("/")}
    assert not [
        n for n in names if n.rsplit("/", 1)[-1] in ("sh", "bash", "busybox", "apt", "dpkg")
    ]
    for plugin in ("ecr-credential-provider", "acr-credential-provider", "auth-provider-gcp"):
        assert f"{top.lstrip('/')}/{plugin}" in names


def test_the_image_has_an_sbom_and_a_checksum(target: Target, archive: Path) -> None:
    members = archive_members(archive)
    manifest = arch_manifest(members, target.arch)
    version = bundle.project_version()
    sbom = json.loads((RELEASE / image.sbom_name(version, target.arch)).read_text())
    digest = manifest["digest"].replace(":", "%3A")
    assert (
        sbom["metadata"]["component"]["purl"] == f"pkg:oci/credprovider@{digest}?arch={target.arch}"
    )
    assert len(sbom["components"]) > 10
    sums = (RELEASE / "SHA256SUMS").read_text().splitlines()
    listed = {line.split("  ")[1]: line.split("  ")[0] for line in sums}
    assert listed[archive.name] == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert image.sbom_name(version, target.arch) in listed


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def registry_server(tmp_path: Path) -> tuple[Path, int]:
    """The registry server (distribution), its config written to ``tmp_path/registry.json`` (its
    storage beside it), and the loopback port it will listen on."""
    try:
        server = gobuild.released(gobuild.REGISTRY)
    except gobuild.GoBuildError as exc:
        unavailable(str(exc))
    port = _free_port()
    config = {
        "version": 0.1,
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(tmp_path / "storage")}},
        "http": {"addr": f"127.0.0.1:{port}"},
    }
    (tmp_path / "registry.json").write_text(json.dumps(config))
    return server, port


def _push(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "release", "push", *args],
        cwd=bundle.REPO, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "CREDPROVIDER_REGISTRY_AUTH": ""},
    )  # fmt: skip


def test_push_puts_the_index_and_every_image_in_a_registry(archive: Path, tmp_path: Path) -> None:
    """A registry server (distribution, as the sandbox's) on loopback receives the index as
    ``:<version>`` and each image by digest, with every blob."""
    server, port = registry_server(tmp_path)
    process = subprocess.Popen(
        [str(server), "serve", str(tmp_path / "registry.json")],
        env={"PATH": "/usr/bin:/bin", "OTEL_TRACES_EXPORTER": "none"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{base}/v2/", timeout=2).close()
                break
            except OSError:
                time.sleep(0.1)
        version = bundle.project_version()
        pushed = _push("--registry", f"{base}/team/credprovider", "--archive", str(archive))
        assert pushed.returncode == 0, pushed.stderr
        members = archive_members(archive)
        [top] = json.loads(members["index.json"])["manifests"]
        assert pushed.stderr.strip().endswith(f"({top['digest']})")

        def get(path: str, accept: str) -> tuple[str, bytes]:
            request = urllib.request.Request(f"{base}/v2/team/credprovider/{path}")
            request.add_header("Accept", accept)
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.headers["Docker-Content-Digest"], answer.read()

        digest, body = get(f"manifests/{version}", oci.INDEX)
        assert (digest, body) == (top["digest"], blob(members, top["digest"]))
        for entry in json.loads(body)["manifests"]:
            digest, manifest = get(f"manifests/{entry['digest']}", oci.MANIFEST)
            assert digest == entry["digest"]
            for part in (*json.loads(manifest)["layers"], json.loads(manifest)["config"]):
                assert get(f"blobs/{part['digest']}", "*/*")[0] == part["digest"]
        # a second push finds every blob there and changes nothing
        assert (
            _push("--registry", f"{base}/team/credprovider", "--archive", str(archive)).returncode
            == 0
        )
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize(
    ("registry", "said"),
    [
        ("ftp://example.com/repo", "ftp://example.com/repo: a registry is host[:port]/repository"),
        ("example.com", "example.com: a registry is host[:port]/repository"),
        ("http://example.com/repo", "http://example.com/repo: http:// is for a registry on loopback only; use HTTPS"),
    ],
)  # fmt: skip
def test_push_refuses_a_registry_it_must_not_send_to(
    archive: Path, registry: str, said: str
) -> None:
    pushed = _push("--registry", registry, "--archive", str(archive))
    assert (pushed.returncode, pushed.stdout, pushed.stderr) == (1, "", f"release push: {said}\n")

"""The OCI image signed with cosign (``make release REGISTRY=... COSIGN_KEY=...``, issue #51):
``release push --cosign-key`` pushes the release's image to a registry (distribution, as the
sandbox's) and signs it and each architecture's image; ``cosign verify --key`` (docs/release.md)
then passes on the tag and on each image a node pulls, and fails on an index re-pushed under the
same tag with one byte added, and on another key.

Everything runs in a network namespace of its own holding only loopback: cosign is built with
no way to reach Rekor, Fulcio or TUF, and signs and verifies without them (no transparency log)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from release import bundle, gobuild, image
from tests.helpers import unavailable
from tests.release.test_image import registry_server

RELEASE = bundle.REPO / "dist" / "release"
PASSWORD = "release-test-password"


@dataclass(frozen=True)
class Registry:
    """A registry on loopback in a network namespace of its own; ``run`` runs a command there."""

    pid: int
    port: int
    home: Path  # cosign's own files (its TUF cache, never used here): not the user's

    def run(
        self, *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["nsenter", f"--net=/proc/{self.pid}/ns/net", "--", *argv],
            cwd=cwd, capture_output=True, text=True, timeout=600, check=False,
            env={**os.environ, "COSIGN_PASSWORD": PASSWORD, "CREDPROVIDER_REGISTRY_AUTH": "",
                 "TUF_ROOT": str(self.home / "tuf"), **(env or {})},
        )  # fmt: skip


@pytest.fixture
def cosign() -> Path:
    if os.geteuid() != 0:
        pytest.skip("a network namespace of its own needs root")
    try:
        return gobuild.released(gobuild.COSIGN)
    except gobuild.GoBuildError as exc:
        unavailable(str(exc))


@contextlib.contextmanager
def serving(tmp_path: Path, login: str = "") -> Iterator[Registry]:
    """The registry, in a network namespace of its own; with ``login`` (``user:password``), one
    that answers only that user (basic auth, its htpasswd bcrypt as distribution reads it)."""
    server, port = registry_server(tmp_path)  # the namespace has no other listener on it
    if login:
        user, password = login.split(":", 1)
        with warnings.catch_warnings():  # crypt: the standard library's bcrypt, until 3.13
            warnings.simplefilter("ignore", DeprecationWarning)
            import crypt

            hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))
        (tmp_path / "htpasswd").write_text(f"{user}:{hashed}\n")
        config = json.loads((tmp_path / "registry.json").read_text())
        config["auth"] = {"htpasswd": {"realm": "test", "path": str(tmp_path / "htpasswd")}}
        (tmp_path / "registry.json").write_text(json.dumps(config))
    process = subprocess.Popen(
        ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" serve "$1"',
         str(server), str(tmp_path / "registry.json")],
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "OTEL_TRACES_EXPORTER": "none"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    found = Registry(process.pid, port, tmp_path)
    up = (  # any answer, a 401 too
        "import urllib.request as u, urllib.error as e\n"
        f"try: u.urlopen('http://127.0.0.1:{port}/v2/', timeout=2)\n"
        "except e.HTTPError: pass"
    )
    try:
        for _ in range(100):
            if found.run(sys.executable, "-c", up).returncode == 0:
                break
            time.sleep(0.1)
        yield found
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def registry(tmp_path: Path, cosign: Path) -> Iterator[Registry]:
    with serving(tmp_path) as found:
        yield found


@pytest.fixture
def archive() -> Path:
    path = RELEASE / image.archive_name(bundle.project_version())
    if not path.exists():
        unavailable(f"the release's image {path} is not built: run make release")
    return path


def key_pair(registry: Registry, cosign: Path, where: Path) -> Path:
    where.mkdir()
    made = registry.run(str(cosign), "generate-key-pair", cwd=where)
    assert made.returncode == 0, made.stderr
    return where


def changed_byte(archive: Path, out: Path) -> Path:
    """``archive`` with one byte added to its top index (a newline after the JSON: the same
    images, another index digest)."""
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        contents = {
            name: extracted.read()
            for name, m in members.items()
            if (extracted := tar.extractfile(m)) is not None
        }
    layout = json.loads(contents["index.json"])
    old = layout["manifests"][0]["digest"]
    data = contents[f"blobs/sha256/{old.split(':')[1]}"] + b"\n"
    new = f"blobs/sha256/{hashlib.sha256(data).hexdigest()}"
    layout["manifests"][0] |= {"digest": f"sha256:{new.rsplit('/', 1)[1]}", "size": len(data)}
    members[new], contents[new] = tarfile.TarInfo(new), data
    contents["index.json"] = json.dumps(layout).encode()
    with tarfile.open(out, "w") as tar:
        for name, info in members.items():
            if name in contents:
                info.size = len(contents[name])
                tar.addfile(info, io.BytesIO(contents[name]))
            else:
                tar.addfile(info)
    return out


def test_the_pushed_image_is_signed_and_verified_and_a_changed_byte_is_not(
    registry: Registry, cosign: Path, archive: Path, tmp_path: Path
) -> None:
    keys = key_pair(registry, cosign, tmp_path / "keys")
    repository = f"127.0.0.1:{registry.port}/team/credprovider"
    version = bundle.project_version()
    release = [sys.executable, "-m", "release", "push", "--archive", str(archive)]
    pushed = registry.run(
        *release, "--registry", f"http://{repository}", "--cosign-key", str(keys / "cosign.key"),
        cwd=bundle.REPO,
    )  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr
    digest = pushed.stderr.split("(")[1].split(")")[0]
    assert f"[release] signed http://{repository}@{digest} with cosign" in pushed.stderr

    # docs/release.md's command (--allow-http-registry: this registry is on loopback, over HTTP)
    verify = [str(cosign), "verify", "--key", str(keys / "cosign.pub"),
              "--insecure-ignore-tlog=true", "--allow-http-registry"]  # fmt: skip
    checked = registry.run(*verify, f"{repository}:{version}", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    [claim] = json.loads(checked.stdout)
    assert claim["critical"]["image"]["docker-manifest-digest"] == digest
    with tarfile.open(archive) as tar:
        index = json.loads(tar.extractfile(f"blobs/sha256/{digest.split(':')[1]}").read())  # type: ignore[union-attr]
    for entry in index["manifests"]:  # what a node of each architecture pulls
        one = registry.run(*verify, f"{repository}@{entry['digest']}", cwd=tmp_path)
        assert one.returncode == 0, (entry["platform"], one.stderr)

    other = key_pair(registry, cosign, tmp_path / "other")
    wrong = registry.run(str(cosign), "verify", "--key", str(other / "cosign.pub"),
                         "--insecure-ignore-tlog=true", "--allow-http-registry",
                         f"{repository}:{version}", cwd=tmp_path)  # fmt: skip
    assert wrong.returncode != 0 and "no matching signatures" in wrong.stderr, wrong.stderr

    # the tag re-pushed with one byte added (unsigned): the tag no longer verifies
    tampered = changed_byte(archive, tmp_path / "tampered.tar")
    again = registry.run(*release[:-1], str(tampered), "--registry", f"http://{repository}",
                         cwd=bundle.REPO)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert digest not in again.stderr
    refused = registry.run(*verify, f"{repository}:{version}", cwd=tmp_path)
    assert refused.returncode != 0, refused.stdout
    assert "no signatures found" in refused.stderr, refused.stderr


def test_a_key_that_is_not_a_file_or_no_password_pushes_nothing(
    registry: Registry, cosign: Path, archive: Path, tmp_path: Path
) -> None:
    repository = f"http://127.0.0.1:{registry.port}/team/credprovider"
    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo)
    push = [sys.executable, "-m", "release", "push", "--archive", str(archive),
            "--registry", repository, "--cosign-key"]  # fmt: skip
    refused = registry.run(*push, str(fifo), cwd=bundle.REPO)
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        f"release push: COSIGN_KEY {fifo} is not a cosign private key (not a regular file)\n"
    )
    keys = key_pair(registry, cosign, tmp_path / "keys")
    unset = subprocess.run(
        ["nsenter", f"--net=/proc/{registry.pid}/ns/net", "--", *push, str(keys / "cosign.key")],
        cwd=bundle.REPO, capture_output=True, text=True, timeout=300, check=False,
        env={k: v for k, v in os.environ.items() if k != "COSIGN_PASSWORD"},
    )  # fmt: skip
    assert unset.returncode == 1 and "COSIGN_PASSWORD is not set" in unset.stderr
    listed = registry.run(sys.executable, "-c", f"import urllib.request as u; print(u.urlopen('{repository.replace('/team/credprovider', '')}/v2/_catalog').read().decode())")  # fmt: skip
    assert json.loads(listed.stdout) == {"repositories": []}  # nothing was pushed
    wrong_password = registry.run(
        *push, str(keys / "cosign.key"), cwd=bundle.REPO, env={"COSIGN_PASSWORD": "not it"}
    )
    assert wrong_password.returncode == 1 and "Traceback" not in wrong_password.stderr
    assert "release push: cosign could not sign" in wrong_password.stderr


def test_a_registry_that_needs_a_login_gets_the_pushs_login(
    cosign: Path, archive: Path, tmp_path: Path
) -> None:
    """The push's CREDPROVIDER_REGISTRY_AUTH reaches cosign too (in a Docker config of the run's
    own, never on a command line); a verifier logged in verifies, one that is not cannot read."""
    login = "ci:a-registry-password"
    with serving(tmp_path, login) as registry:
        keys = key_pair(registry, cosign, tmp_path / "keys")
        repository = f"127.0.0.1:{registry.port}/team/credprovider"
        pushed = registry.run(
            sys.executable, "-m", "release", "push", "--archive", str(archive),
            "--registry", f"http://{repository}", "--cosign-key", str(keys / "cosign.key"),
            cwd=bundle.REPO, env={"CREDPROVIDER_REGISTRY_AUTH": login},
        )  # fmt: skip
        assert pushed.returncode == 0, pushed.stderr
        assert "signed" in pushed.stderr and "a-registry-password" not in pushed.stderr
        docker = tmp_path / "docker"  # what docker login (or cosign login) leaves
        docker.mkdir()
        auth = base64.b64encode(login.encode()).decode()
        (docker / "config.json").write_text(
            json.dumps({"auths": {repository.split("/")[0]: {"auth": auth}}})
        )
        verify = [str(cosign), "verify", "--key", str(keys / "cosign.pub"),
                  "--insecure-ignore-tlog=true", "--allow-http-registry",
                  f"{repository}:{bundle.project_version()}"]  # fmt: skip
        checked = registry.run(*verify, cwd=tmp_path, env={"DOCKER_CONFIG": str(docker)})
        assert checked.returncode == 0, checked.stderr
        anonymous = registry.run(*verify, cwd=tmp_path, env={"DOCKER_CONFIG": str(tmp_path)})
        assert anonymous.returncode != 0 and "UNAUTHORIZED" in anonymous.stderr, anonymous.stderr

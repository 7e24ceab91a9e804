"""Test-wide safety: nothing leaves loopback, nothing reads this machine's cloud credentials."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from credprovider.runtime import loopback, redact
from release.native import cache_root as release_cache_root
from tests.helpers import RUN_SETTINGS, require_bundle

# Variables that could point an SDK at real credentials or real endpoints.
_CLOUD_ENV_PREFIXES = (
    "AWS_",
    "AZURE_",
    "GOOGLE_",
    "GCE_",
    "CLOUDSDK_",
    "IDENTITY_",
    "MSI_",
    "IMDS_",
    "KUBE_SIDECAR_",
    "CREDPROVIDER_",
    "MSAL_",
)
_SAFE_ENV = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "NO_GCE_CHECK": "true",
    # Unroutable-by-design loopback port (discard): a missed override fails fast on loopback.
    "GCE_METADATA_HOST": "127.0.0.1:9",
    "GCE_METADATA_IP": "127.0.0.1:9",
    "AZURE_POD_IDENTITY_AUTHORITY_HOST": "http://127.0.0.1:9",
    "CREDPROVIDER_TEST_LOOPBACK_ONLY": "1",
    "NO_PROXY": "*",
    # a bug in the tool raises with its traceback, not one line: it fails a test that only
    # asks for "no traceback" (tool/cli.py; test_cli.py tests the one line)
    "CREDPROVIDER_TRACEBACK": "1",
}


class NonLoopbackConnection(AssertionError):
    """A test tried to open a connection to an address that is not loopback."""


@pytest.fixture(autouse=True, scope="session")
def _loopback_only() -> Iterator[None]:
    """Fail any socket connect to a non-loopback address from the test process itself: the
    plugins' own test-mode guard (credprovider/runtime/loopback.py), refusing with an AssertionError."""
    remove = loopback.install_connect_guard(
        lambda host: NonLoopbackConnection(f"test tried to connect to {host!r}")
    )
    yield
    remove()


@pytest.fixture(autouse=True, scope="session")
def _clean_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Remove cloud settings inherited from the machine; point HOME at an empty directory."""
    saved = dict(os.environ)
    for key in list(os.environ):
        if key in RUN_SETTINGS:
            continue  # how this run was asked to behave, not a cloud setting
        if key.startswith(_CLOUD_ENV_PREFIXES) or key.lower() in ("http_proxy", "https_proxy"):
            del os.environ[key]
    home = tmp_path_factory.mktemp("home")
    # The release tests reuse the build cache (root filesystems, interpreters) under the real HOME.
    os.environ["CREDPROVIDER_BUILD_CACHE"] = str(release_cache_root())
    os.environ.update(_SAFE_ENV)
    os.environ["HOME"] = str(home)
    os.environ["AWS_CONFIG_FILE"] = str(home / "no-aws-config")
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(home / "no-aws-credentials")
    os.environ["CLOUDSDK_CONFIG"] = str(home / "no-gcloud")
    os.environ["AZURE_CONFIG_DIR"] = str(home / "no-azure")
    yield
    os.environ.clear()
    os.environ.update(saved)


# What a test that changes the host (rule 8) would touch: the node lock of a run on the host's
# /run; a node's files written over the host's (a copy into / follows the host's
# /etc/os-release link to /usr/lib/os-release, and sets the times of every directory it copies
# into); the directories install or the agent would make entries in.
HOST_PATHS = (
    "/run/credprovider/node.lock",
    "/usr/lib/os-release",
    *("/", "/etc", "/etc/default", "/etc/systemd/system", "/usr", "/usr/lib", "/usr/local/bin"),
    *("/var", "/var/lib", "/opt", "/etc/kubernetes", "/var/lib/kubelet", "/var/lib/credprovider"),
)


@pytest.fixture(autouse=True)
def _host_untouched() -> Iterator[None]:
    """Rule 8: a test that runs install, migrate --write or the agent on the host (not in
    namespaces of its own, tests/helpers.py private), or copies a node's files into them, would
    leave the host changed."""
    before = {path: _stamp(path) for path in HOST_PATHS}
    yield
    changed = [path for path in HOST_PATHS if _stamp(path) != before[path]]
    assert not changed, f"this test (or one beside it) changed the host's {changed}: use private()"


def _stamp(path: str) -> tuple[int, int] | None:
    """Which file ``path`` is and when it was last written (a run that takes the lock writes who
    holds it), or None when there is none."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    return found.st_ino, found.st_mtime_ns


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    yield
    redact.forget_secrets()


@pytest.fixture(params=["source", "bundle"])
def use_bundle(request: pytest.FixtureRequest) -> bool:
    """Run a plugin test from source and through the built executable in dist/credprovider."""
    if request.param == "source":
        return False
    require_bundle()
    return True


@pytest.fixture
def tmp_home(tmp_path: Path) -> Path:
    return tmp_path

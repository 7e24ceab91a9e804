"""Fixtures for the release tests: the bundles and tarballs of each architecture, when built.

``make test`` builds this machine's bundle and tarball and sets CREDPROVIDER_REQUIRE_ARCHES to its
architecture; ``make release-check`` requires every architecture. A required artifact that is
missing fails; one that is not required and not built skips.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from release import bundle, package
from release.targets import TARGETS, Target
from tests.helpers import REQUIRE_ARCHES_ENV


def required_arches() -> set[str]:
    return set(os.environ.get(REQUIRE_ARCHES_ENV, "").split())


def missing(what: str, arch: str) -> None:
    if arch in required_arches():
        pytest.fail(f"{what} for {arch} is missing: make release (or make test for this machine's)")
    pytest.skip(f"{what} for {arch} not built (make release builds it)")


@pytest.fixture(params=sorted(TARGETS))
def target(request: pytest.FixtureRequest) -> Target:
    return TARGETS[request.param]


@pytest.fixture
def bundle_dir(target: Target) -> Path:
    path = package.bundle_dir(target.arch)
    if not (path / "credprovider").exists():
        missing("the bundle", target.arch)
    return path


@pytest.fixture
def tarball(target: Target) -> Path:
    version = bundle.project_version()
    path = (
        bundle.REPO / "dist" / "release" / f"{package.artifact_name(version, target.arch)}.tar.gz"
    )
    if not path.exists():
        missing("the tarball", target.arch)
    return path

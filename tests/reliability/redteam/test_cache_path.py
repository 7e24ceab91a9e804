"""1. The cache path: a directory another user could swap is refused; root's own links are followed."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from emulators.aws import FakeEcr
from emulators.http import FakeServer
from tests.reliability.checks import Figures
from tests.reliability.redteam.common import (
    ECR,
    OTHER_UID,
    PLANTED,
    REGISTRY,
    answered_by_the_registry,
    cached_run,
    record,
)


def _other_users_dir(path: Path) -> Path:
    path.mkdir(mode=0o700)
    os.chown(path, OTHER_UID, OTHER_UID)
    return path


def _plant_entry(directory: Path, name: str) -> None:
    entry = directory / name
    entry.write_text(
        json.dumps(
            {
                "version": 1,
                "provider": ECR,
                "registry": REGISTRY,
                "writtenAt": 0,
                "expiresAt": 4_000_000_000,
                "cacheKeyType": "Registry",
                "auth": {"evil.example.com": {"username": "AWS", "password": PLANTED}},
            }
        )
    )


def _entry_name(server: FakeServer, tmp_path: Path) -> str:
    """The entry file name for IMAGE under the test env (found by caching once)."""
    probe = tmp_path / "probe-cache"
    assert cached_run(server, probe).code == 0
    (entry,) = probe.glob("*.json")
    return entry.name


PathSetup = Callable[[Path, str], Path]


def _sticky_parent_with_foreign_link(tmp: Path, entry: str) -> Path:
    sticky = tmp / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    attacker = _other_users_dir(tmp / "attacker")
    _plant_entry(attacker, entry)
    link = sticky / "cache"
    link.symlink_to(attacker)
    os.lchown(link, OTHER_UID, OTHER_UID)
    return link


def _foreign_link_to_a_root_directory(tmp: Path, entry: str) -> Path:
    real = tmp / "root-owned"
    real.mkdir(mode=0o700)
    _plant_entry(real, entry)
    os.chmod(real / entry, 0o600)
    holder = tmp / "holder"
    holder.mkdir(mode=0o755)
    link = holder / "cache"
    link.symlink_to(real)
    os.lchown(link, OTHER_UID, OTHER_UID)
    return link


def _group_writable_parent(tmp: Path, entry: str) -> Path:
    shared = tmp / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    return shared / "cache"


def _foreign_directory_on_the_path(tmp: Path, entry: str) -> Path:
    return _other_users_dir(tmp / "theirs") / "cache"


@pytest.mark.parametrize(
    ("scenario", "setup", "reason"),
    [
        (
            "symlink of another user in a sticky world-writable parent",
            _sticky_parent_with_foreign_link,
            f"owned by uid {OTHER_UID}",
        ),
        (
            "symlink of another user to a root-owned 0700 directory",
            _foreign_link_to_a_root_directory,
            f"owned by uid {OTHER_UID}",
        ),
        ("a parent writable by others, not sticky", _group_writable_parent, "writable by group"),
        ("a parent directory of another user", _foreign_directory_on_the_path, "owned by uid"),
    ],
)
def test_an_unsafe_cache_path_is_refused(
    ecr: tuple[FakeEcr, FakeServer],
    tmp_path: Path,
    figures: Figures,
    scenario: str,
    setup: PathSetup,
    reason: str,
) -> None:
    fake, server = ecr
    cache = setup(tmp_path, _entry_name(server, tmp_path))
    run = cached_run(server, cache)
    problems = answered_by_the_registry(run, fake)
    if reason not in run.stderr or "running uncached" not in run.stderr:
        problems.append(f"no refusal saying {reason!r}: {run.stderr[-300:]}")
    if PLANTED in run.stdout.decode():
        problems.append("served the planted entry")
    if [lock for lock in tmp_path.rglob("*.lock") if "probe-cache" not in lock.parts]:
        problems.append("created a lock file on an unsafe path")
    record(figures, f"cache path: {scenario}", run, problems)


def test_root_owned_links_on_the_path_are_followed(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, figures: Figures
) -> None:
    """The checks refuse what another user controls, not symlinks as such (/var/lib -> /data)."""
    fake, server = ecr
    (tmp_path / "data").mkdir(mode=0o755)
    (tmp_path / "var").symlink_to(tmp_path / "data")
    first = cached_run(server, tmp_path / "var" / "cache")
    second = cached_run(server, tmp_path / "var" / "cache")
    problems = answered_by_the_registry(second, fake)
    if "cache: hit" not in second.stderr or len(fake.calls) != 1:
        problems.append(f"not served from the cache: {second.stderr[-300:]}")
    record(figures, "cache path: root-owned symlink followed", second, problems)
    assert first.code == 0

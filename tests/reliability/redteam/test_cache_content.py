"""2. Cache content that must not fail or delay a request."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from emulators.aws import FakeEcr
from emulators.http import FakeServer
from tests.reliability.checks import Figures
from tests.reliability.redteam.common import (
    OTHER_UID,
    PLANTED,
    REGISTRY,
    answered_by_the_registry,
    cached_run,
    record,
)


def _rewrite(field: str, raw_value: str) -> Callable[[Path], None]:
    def apply(entry: Path) -> None:
        text = entry.read_text()
        data = json.loads(text)
        marker = "__VALUE__"
        data[field] = marker
        entry.write_text(json.dumps(data).replace(f'"{marker}"', raw_value))

    return apply


def _replace_with(make: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(entry: Path) -> None:
        entry.unlink()
        make(entry)

    return apply


TAMPERING: list[tuple[str, Callable[[Path], None]]] = [
    ("expiresAt 1e300", _rewrite("expiresAt", "1e300")),
    ("expiresAt Infinity", _rewrite("expiresAt", "Infinity")),
    ("expiresAt NaN", _rewrite("expiresAt", "NaN")),
    ("expiresAt a string", _rewrite("expiresAt", '"tomorrow"')),
    ("expiresAt in 10 years", _rewrite("expiresAt", "2100000000")),
    # the node's clock went back since the entry was written: its lifetime, counted from the
    # clock now, would be longer than the credential's by as much
    ("written in the future", _rewrite("writtenAt", "1e10")),
    ("writtenAt NaN", _rewrite("writtenAt", "NaN")),
    ("deeply nested JSON", _replace_with(lambda p: p.write_text("[" * 200_000 + "]" * 200_000))),
    ("a FIFO", _replace_with(lambda p: os.mkfifo(p, 0o600))),
    ("a symlink to /dev/zero", _replace_with(lambda p: p.symlink_to("/dev/zero"))),
    ("a symlink to another file", _replace_with(lambda p: p.symlink_to("/etc/hostname"))),
    ("a directory", _replace_with(lambda p: p.mkdir())),
    (
        "an auth key for another host",
        _rewrite("auth", json.dumps({"evil.example.com": {"username": "u", "password": PLANTED}})),
    ),
    ("an extra auth key", _rewrite("auth", json.dumps({REGISTRY: {}, "evil.example.com": {}}))),
    (
        "an empty password",
        _rewrite("auth", json.dumps({REGISTRY: {"username": "AWS", "password": ""}})),
    ),
    ("70 kB of padding", _rewrite("padding", json.dumps("x" * 70_000))),
    ("another user's file", lambda p: os.chown(p, OTHER_UID, OTHER_UID)),
]


@pytest.mark.parametrize(("scenario", "tamper"), TAMPERING, ids=[t[0] for t in TAMPERING])
def test_bad_cache_content_is_ignored_and_replaced(
    ecr: tuple[FakeEcr, FakeServer],
    tmp_path: Path,
    figures: Figures,
    scenario: str,
    tamper: Callable[[Path], None],
) -> None:
    fake, server = ecr
    cache = tmp_path / "cache"
    assert cached_run(server, cache).code == 0
    (entry,) = cache.glob("*.json")
    tamper(entry)
    run = cached_run(server, cache)
    problems = answered_by_the_registry(run, fake)
    if "cache: ignoring" not in run.stderr:
        problems.append(f"no -v=1 line about the ignored entry: {run.stderr[-300:]}")
    if len(fake.calls) != 2:
        problems.append(f"{len(fake.calls)} registry calls, expected a fresh fetch")
    again = cached_run(server, cache)
    if "cache: hit" not in again.stderr or not stat.S_ISREG(entry.lstat().st_mode):
        problems.append("the entry was not replaced by a good one")
    record(figures, f"cache entry: {scenario}", run, problems)


def test_a_planted_lock_symlink_runs_uncached(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, figures: Figures
) -> None:
    fake, server = ecr
    cache = tmp_path / "cache"
    assert cached_run(server, cache).code == 0
    (lock,) = cache.glob("*.lock")
    target = tmp_path / "elsewhere"
    target.write_text("not a lock")
    lock.unlink()
    lock.symlink_to(target)
    for entry in cache.glob("*.json"):  # a fresh entry is served without the lock: make a miss
        entry.unlink()
    run = cached_run(server, cache)
    problems = answered_by_the_registry(run, fake)
    if "cannot lock" not in run.stderr:
        problems.append(f"no warning about the lock: {run.stderr[-300:]}")
    if target.read_text() != "not a lock":
        problems.append("wrote through the planted link")
    record(figures, "cache lock: a planted symlink", run, problems)

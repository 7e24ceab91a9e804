"""``make release`` twice gives the same bytes: the release built again from the same commit (every
bundle it holds, then every artifact, as make release builds them, into dist/reproduce) is
``dist/release`` byte for byte, SHA256SUMS first (release/reproduce.py names the file, the byte and
the member that differ, if any)."""

from __future__ import annotations

import re
import shutil

import pytest

from release import bundle, reproduce

RELEASE = bundle.REPO / "dist" / "release"


def test_a_second_release_of_the_same_commit_is_byte_identical() -> None:
    if not (RELEASE / "SHA256SUMS").exists():
        pytest.skip("no release built (make release)")
    if (RELEASE / "SHA256SUMS").exists() and (RELEASE / "SHA256SUMS.asc").exists():
        pytest.skip("dist/release is signed: signatures carry their time (make release without "
                    "SIGNING_KEY is what is compared)")  # fmt: skip
    arches = sorted(
        set(re.findall(r"-linux-(\w+)\.tar\.gz$", (RELEASE / "SHA256SUMS").read_text(), re.M))
    )
    again = reproduce.rebuild(arches)
    differences = reproduce.compare(RELEASE, again)
    assert differences == [], "\n".join(differences)
    shutil.rmtree(reproduce.AGAIN)  # 400 MiB: kept only when it differs, to look at

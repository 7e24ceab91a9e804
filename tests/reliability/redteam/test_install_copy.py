"""7. install --copy and a planted symlink: only what install made is replaced."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import run_cli
from tests.reliability.checks import Figures, Outcome


def _planted_symlink(bin_dir: Path, attacker: Path) -> None:
    (bin_dir / ".credprovider").symlink_to(attacker)


def _planted_file(bin_dir: Path, attacker: Path) -> None:
    (bin_dir / ".credprovider").write_text("not a bundle")


def _directory_without_manifest(bin_dir: Path, attacker: Path) -> None:
    (bin_dir / ".credprovider").mkdir()
    (bin_dir / ".credprovider" / "credprovider").write_text("#!/bin/sh\necho pwned\n")


PLANTS: list[tuple[str, Callable[[Path, Path], None]]] = [
    ("a symlink to another directory", _planted_symlink),
    ("a regular file", _planted_file),
    ("a directory without the bundle's manifest", _directory_without_manifest),
]


@pytest.mark.parametrize(("scenario", "plant"), PLANTS, ids=[p[0] for p in PLANTS])
def test_install_copy_replaces_only_what_it_made(
    tmp_path: Path, figures: Figures, scenario: str, plant: Callable[[Path, Path], None]
) -> None:
    from release.bundle import BUNDLE_DIR

    bundle = BUNDLE_DIR / "credprovider"
    if not bundle.exists():
        pytest.skip("needs the bundle (make build)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    (attacker / "credprovider").write_text("#!/bin/sh\necho pwned\n")
    plant(bin_dir, attacker)
    args = [
        "install", "--copy", "--bin-dir", str(bin_dir), "--config-out", str(tmp_path / "c.yaml"),
        "--target", str(bundle), "--providers", "aws",
    ]  # fmt: skip
    refused = run_cli(*args)
    problems = [] if refused.returncode == 1 else [f"exit {refused.returncode}"]
    if "not a bundle copy this tool made" not in refused.stderr:
        problems.append(f"no refusal: {refused.stderr[-300:]}")
    if (bin_dir / "ecr-credential-provider").is_symlink():
        problems.append("linked a plugin name to what was planted")
    forced = run_cli(*args, "--force")
    copy = bin_dir / ".credprovider"
    if forced.returncode != 0 or copy.is_symlink() or not (copy / "_internal").is_dir():
        problems.append(f"--force did not put a real copy there: {forced.stderr[-300:]}")
    if sorted(p.name for p in attacker.iterdir()) != ["credprovider"]:
        problems.append("wrote into the planted directory")
    again = run_cli(*args)
    if again.returncode != 0 or "unchanged" not in again.stdout:
        problems.append(f"its own copy was not recognised: {again.stderr[-300:]}")
    figures.record(
        Outcome("redteam", f"install --copy: {scenario}", refused.returncode, 0.0, None,
                not problems, "; ".join(problems))
    )  # fmt: skip
    assert not problems, problems

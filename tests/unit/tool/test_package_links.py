"""install from a distribution package: what it links to, and the record the package's removal reads
(the whole lifecycle runs through dpkg and rpm in tests/release/test_packages.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from credprovider.tool.change.engine import perform
from credprovider.tool.change.install_apply import package_links_op
from credprovider.tool.change.render import stable_launcher
from credprovider.tool.node.access import FileProblem


def package_tree(root: Path, version: str) -> tuple[Path, Path]:
    """``root``/lib/credprovider/<version>/credprovider and the package's bin dir linking to it."""
    lib = root / "lib" / "credprovider"
    (lib / version).mkdir(parents=True)
    (lib / version / "credprovider").write_text("launcher")
    (lib / "bin").mkdir()
    (lib / "bin" / "credprovider").symlink_to(f"../{version}/credprovider")
    return lib, lib / "bin"


def test_a_packages_versioned_launcher_is_linked_through_the_package_bin_dir(
    tmp_path: Path,
) -> None:
    lib, bin_dir = package_tree(tmp_path, "0.1.0")
    launcher = (lib / "0.1.0" / "credprovider").resolve()
    assert stable_launcher(launcher, str(lib), str(bin_dir)) == bin_dir / "credprovider"


def test_any_other_launcher_is_linked_as_it_is(tmp_path: Path) -> None:
    lib, bin_dir = package_tree(tmp_path, "0.1.0")
    unpacked = tmp_path / "opt" / "credprovider-0.1.0" / "credprovider"
    unpacked.parent.mkdir(parents=True)
    unpacked.write_text("launcher")
    assert stable_launcher(unpacked, str(lib), str(bin_dir)) == unpacked
    # an older version left in the package directory, which the bin dir no longer points to
    (lib / "0.0.9").mkdir()
    old = lib / "0.0.9" / "credprovider"
    old.write_text("launcher")
    assert stable_launcher(old, str(lib), str(bin_dir)) == old


def record_package_links(links: list[Path], record: str) -> None:
    perform(package_links_op(links, record))


def test_the_record_keeps_every_link_once_sorted(tmp_path: Path) -> None:
    record = tmp_path / "var" / "lib" / "credprovider" / "package-links"
    first = [Path("/etc/eks/image-credential-provider/ecr-credential-provider")]
    record_package_links(first, str(record))
    assert record.read_text() == f"{first[0]}\n"
    second = [Path("/var/lib/rancher/credentialprovider/bin/auth-provider-gcp"), *first]
    record_package_links(second, str(record))
    assert record.read_text().splitlines() == sorted(str(p) for p in second)
    assert record.stat().st_mode & 0o777 == 0o644


def test_a_record_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO planted where the record lives is never read (it would block install)."""
    record = tmp_path / "package-links"
    os.mkfifo(record)
    with pytest.raises(FileProblem, match="package-links"):
        record_package_links([Path("/etc/kubernetes/bin/x")], str(record))


@pytest.mark.parametrize(
    ("text", "as_json"),
    [
        ('{"apiVersion": "kubelet.config.k8s.io/v1"}', True),
        ("apiVersion: kubelet.config.k8s.io/v1\n", False),
        ("[1]", False),
        ("{not json", False),
        ('{"a":' * 200_000, False),  # RecursionError in json's decoder once
        (None, False),
    ],
)
def test_a_config_is_kept_in_its_own_format(text: str | None, as_json: bool) -> None:
    from credprovider.tool.change.render import written_as_json

    assert written_as_json(text) is as_json

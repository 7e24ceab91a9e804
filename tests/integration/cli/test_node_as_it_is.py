"""Verdicts true for the node as it is: ``--root`` follows an install's links inside the root,
``get`` runs the plugins in the running kubelet's environment, what this user cannot read is a
verdict of its own (never a default), and an image no configured provider serves is no failure."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import config_file, provider_entry
from tests.integration.cli.conftest import doctor, fake_bundle


def test_root_follows_an_installs_absolute_links_inside_the_root(tmp_path: Path) -> None:
    """The README's tarball install links each plugin name to /opt/credprovider-VERSION: under
    --root that is the image's /opt, never this machine's (before: 'cannot be started: no such
    file or directory', a FAIL for a node that is right)."""
    root = tmp_path / "image"
    fake_bundle(root / "opt/credprovider-0.1.0", "0.1.0")
    bin_dir = root / "etc/kubernetes/image-credential-provider"
    bin_dir.mkdir(parents=True)
    for name in ("ecr-credential-provider", "auth-provider-gcp"):
        (bin_dir / name).symlink_to(f"/opt/credprovider-0.1.0/{name}")
    config = config_file(root / "etc/kubernetes", provider_entry())
    code, report = doctor(
        "--root", str(root), "--offline",
        "--config", f"/etc/kubernetes/{config.name}",
        "--bin-dir", "/etc/kubernetes/image-credential-provider",
    )  # fmt: skip
    binary = [c for c in report["checks"] if c["area"] == "binary"]
    assert code == 0 and [c["status"] for c in binary] == ["pass"], binary
    assert "version 0.1.0 (credprovider)" in binary[0]["message"]

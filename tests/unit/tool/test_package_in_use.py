"""Which of the kubelet's plugins the distribution package holds (credprovider/tool/node/inuse.py):
what its removal must not take away. The package's scripts themselves are run by dpkg and rpm in
tests/release/test_packages.py."""

from __future__ import annotations

from pathlib import Path

from credprovider.tool.node.inuse import InUse, package_plugins


def test_a_plugin_is_the_packages_when_its_path_resolves_into_the_package(tmp_path: Path) -> None:
    package = tmp_path / "usr/lib/credprovider"
    (package / "0.2.0").mkdir(parents=True)
    (package / "0.2.0/credprovider").write_text("launcher\n")
    (package / "bin").mkdir()
    (package / "bin/ecr-credential-provider").symlink_to("../0.2.0/credprovider")
    bin_dir = tmp_path / "etc/kubernetes/bin"
    bin_dir.mkdir(parents=True)
    # install's link to the package's bin dir, a copy of one's own, and one missing
    (bin_dir / "ecr-credential-provider").symlink_to(package / "bin/ecr-credential-provider")
    (bin_dir / "auth-provider-gcp").write_text("a copy\n")
    names = ["ecr-credential-provider", "auth-provider-gcp", "acr-credential-provider"]
    assert package_plugins(names, str(bin_dir), str(package)) == [
        InUse("ecr-credential-provider", str(bin_dir / "ecr-credential-provider"))
    ]
    # the kubelet pointed at the package's own bin dir: every name there is the package's
    assert [u.name for u in package_plugins(names, str(package / "bin"), str(package))] == names
    # a directory whose name only starts like the package's is not it
    other = tmp_path / "usr/lib/credprovider-old"
    other.mkdir()
    assert package_plugins(names, str(other), str(package)) == []

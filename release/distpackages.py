"""Distribution packages: one ``.deb`` and one ``.rpm`` per target, from the tarball's own staged tree.

Both install the same files (the paths are credprovider.paths', which ``credprovider install``
knows too), and nothing else:

    /usr/lib/credprovider/<version>/     the bundle (launcher, plugin-name links, _internal/), LICENSE,
                                         THIRD_PARTY_NOTICES, sbom.cdx.json
    /usr/lib/credprovider/bin/<name>     -> ../<version>/<name>: the kubelet's bin dir
    /usr/bin/credprovider                -> ../lib/credprovider/bin/credprovider
    /usr/share/doc/credprovider/         copyright, README, INSTALL and config/ (the example configs)

No configuration file, nothing in a kubelet directory, no service restarted: an upgrade replaces the
versioned directory and re-points the links in one package transaction (the package manager removes
the old version's files after the new ones are in place), and a removal takes the links with the
bundle. One maintainer script, run on removal only (not on upgrade): it first asks the package's
own tool whether the node's kubelet runs the package's plugins, and stops the removal if it does
(``credprovider package-removal-check``; ``CREDPROVIDER_FORCE_REMOVE=1`` removes anyway); then
it deletes the links
``credprovider install`` made in other bin dirs to this package (it lists them in
PACKAGE_LINKS_FILE), each only while it still points into the package, so that no bin dir is left
with a dangling link; the operator's config is left alone. Neither package depends on anything: the
bundle carries its own C library (release/glibc.py). Debian's own tools build them: ``dpkg-deb``,
and ``rpmbuild`` from Debian's ``rpm`` package.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from credprovider.paths import (
    PACKAGE_BIN_DIR,
    PACKAGE_DOC_DIR,
    PACKAGE_LIB_DIR,
    PACKAGE_LINKS_FILE,
    PACKAGE_TOOL_LINK,
)

NAME: Final = "credprovider"
MAINTAINER: Final = "credprovider maintainers <credprovider@users.noreply.github.com>"
HOMEPAGE: Final = "https://github.com/credprovider/credprovider"
LICENSE: Final = "Apache-2.0"
SUMMARY: Final = "Kubelet image credential provider plugins for ECR, ACR and Google registries"
DESCRIPTION: Final = """\
ecr-credential-provider, acr-credential-provider and auth-provider-gcp: drop-in
replacements for the upstream kubelet image credential provider plugins (same
names, arguments and configs), and the credprovider tool (validate, doctor,
install, migrate). Self-contained: it carries its own Python and C library.
Point the kubelet's --image-credential-provider-bin-dir at /usr/lib/credprovider/bin."""
# Files of the staged tarball that go to the documentation directory, not the bundle's.
DOC_FILES: Final = ("INSTALL", "config")
RPM_ARCH: Final = {"amd64": "x86_64", "arm64": "aarch64"}


@dataclass(frozen=True)
class Release:
    version: str  # the package version (also the directory's name)
    arch: str  # Debian's name: amd64, arm64
    epoch: int  # SOURCE_DATE_EPOCH: every file's time
    readme: str  # the documentation directory's README


def deb_name(release: Release) -> str:
    return f"{NAME}_{release.version}_{release.arch}.deb"


def rpm_name(release: Release) -> str:
    return f"{NAME}-{release.version}-1.{RPM_ARCH[release.arch]}.rpm"


def purl(package: Path, release: Release) -> str:
    """The package URL of a built ``.deb`` or ``.rpm`` (the root of its SBOM)."""
    if package.suffix == ".deb":
        return f"pkg:deb/{NAME}@{release.version}?arch={release.arch}"
    return f"pkg:rpm/{NAME}@{release.version}-1?arch={RPM_ARCH[release.arch]}"


def readme_text(version: str) -> str:
    return f"""credprovider {version}, installed by the distribution package.

The kubelet's flags (point them at the package's bin dir and at a config of your own):
  --image-credential-provider-bin-dir={PACKAGE_BIN_DIR}
  --image-credential-provider-config=/etc/kubernetes/image-credential-provider-config.yaml

Example configs: {PACKAGE_DOC_DIR}/config/ (one file per cloud; config/examples/ holds the others).
Copy one, then check it:  credprovider validate CONFIG --bin-dir {PACKAGE_BIN_DIR}
To link the plugins into your distribution's own bin dir instead (links to the package's bin dir,
which every upgrade keeps valid):  credprovider install --bin-dir DIR
Upgrades replace {PACKAGE_LIB_DIR}/<version>/ and re-point the links; the kubelet starts the plugin
anew on each cache miss, so no restart is needed. Removing the package leaves your config alone.
"""


def unlink_script() -> str:
    """What removal runs (not upgrade): first the package's own check that the kubelet does not run
    its plugins (``credprovider package-removal-check``: exit 1 stops the removal, changing
    nothing); then the links install recorded, deleted while they still point into the package;
    said on stderr, one line each."""
    return f"""\
if [ -x {PACKAGE_BIN_DIR}/credprovider ]; then
  {PACKAGE_BIN_DIR}/credprovider package-removal-check || exit 1
fi
list={PACKAGE_LINKS_FILE}
if [ -f "$list" ]; then
  while IFS= read -r link; do
    case "$(readlink "$link" 2>/dev/null)" in
      {PACKAGE_LIB_DIR}/*)
        rm -f "$link" && echo "credprovider: removed $link, a link to this package (the kubelet's config may still name it)" >&2
        ;;
    esac
  done < "$list"
  rm -f "$list"
  rmdir "$(dirname "$list")" 2>/dev/null || true
fi
"""


def stage_tree(bundle_tree: Path, release: Release, root: Path) -> None:
    """The package's files under ``root``, from the staged tarball directory ``bundle_tree``."""
    lib = root / PACKAGE_LIB_DIR.lstrip("/")
    versioned = lib / release.version
    shutil.copytree(bundle_tree, versioned, symlinks=True, ignore=_doc_files(bundle_tree))
    doc = root / PACKAGE_DOC_DIR.lstrip("/")
    doc.mkdir(parents=True)
    for name in DOC_FILES:
        source = bundle_tree / name
        if source.is_dir():
            shutil.copytree(source, doc / name, symlinks=True)
        else:
            shutil.copy2(source, doc / name)
    shutil.copy2(bundle_tree / "LICENSE", doc / "copyright")
    (doc / "README").write_text(release.readme)
    bin_dir = root / PACKAGE_BIN_DIR.lstrip("/")
    bin_dir.mkdir(parents=True)
    for entry in sorted(bundle_tree.iterdir()):
        if entry.name == NAME or (entry.is_symlink() and entry.readlink() == Path(NAME)):
            (bin_dir / entry.name).symlink_to(f"../{release.version}/{entry.name}")
    tool = root / PACKAGE_TOOL_LINK.lstrip("/")
    tool.parent.mkdir(parents=True)
    tool.symlink_to(os.path.relpath(Path(PACKAGE_BIN_DIR) / NAME, Path(PACKAGE_TOOL_LINK).parent))
    for path in [root, *root.rglob("*")]:
        os.utime(path, (release.epoch, release.epoch), follow_symlinks=False)


def _doc_files(bundle_tree: Path):  # type: ignore[no-untyped-def]
    def ignore(directory: str, names: list[str]) -> list[str]:
        return [n for n in names if Path(directory) == bundle_tree and n in DOC_FILES]

    return ignore


def installed_kib(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*")) // 1024 + 1


def build_deb(root: Path, release: Release, out: Path, compression: int = 9) -> Path:
    """``dpkg-deb --build`` of the staged ``root`` (consumed: it gains DEBIAN/)."""
    control = root / "DEBIAN"
    control.mkdir()
    description = "\n".join(f" {line}" if line else " ." for line in DESCRIPTION.splitlines())
    (control / "control").write_text(
        f"Package: {NAME}\n"
        f"Version: {release.version}\n"
        f"Architecture: {release.arch}\n"
        f"Maintainer: {MAINTAINER}\n"
        f"Installed-Size: {installed_kib(root)}\n"
        "Section: admin\n"
        "Priority: optional\n"
        f"Homepage: {HOMEPAGE}\n"
        f"License: {LICENSE}\n"
        f"Description: {SUMMARY}\n{description}\n"
    )
    # prerm's first argument is "remove" on removal, "upgrade" when a new version replaces this one.
    prerm = control / "prerm"
    prerm.write_text(f'#!/bin/sh\nset -e\nif [ "$1" = remove ]; then\n{unlink_script()}fi\n')
    prerm.chmod(0o755)
    for path in (control / "control", prerm):
        os.utime(path, (release.epoch, release.epoch))
    output = out / deb_name(release)
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "-Zxz", f"-z{compression}", "--build", str(root), str(output)],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "SOURCE_DATE_EPOCH": str(release.epoch)},
    )  # fmt: skip
    return output


def rpm_spec(release: Release, root: Path, compression: int) -> str:
    return f"""\
Name: {NAME}
Version: {release.version}
Release: 1
Summary: {SUMMARY}
License: {LICENSE}
URL: {HOMEPAGE}
Packager: {MAINTAINER}
AutoReqProv: no
%global __os_install_post %{{nil}}
%global debug_package %{{nil}}
%global _build_id_links none
%global _binary_payload w{compression}.xzdio
%global use_source_date_epoch_as_buildtime 1
%global clamp_mtime_to_source_date_epoch 1
%global _buildhost reproducible

%description
{DESCRIPTION}

%install
cp -a {root}/. %{{buildroot}}/

%preun
# $1 is 0 on removal, 1 when a new version replaces this one.
if [ "$1" = 0 ]; then
{unlink_script()}fi

%files
%defattr(-,root,root,-)
{PACKAGE_LIB_DIR}
{PACKAGE_TOOL_LINK}
{PACKAGE_DOC_DIR}
"""


def build_rpm(root: Path, release: Release, out: Path, compression: int = 9) -> Path:
    """``rpmbuild -bb`` of the staged ``root``, for the target's architecture."""
    with tempfile.TemporaryDirectory() as work:
        top = Path(work)
        spec = top / f"{NAME}.spec"
        spec.write_text(rpm_spec(release, root, compression))
        subprocess.run(
            [
                "rpmbuild", "-bb", "--quiet", "--target", f"{RPM_ARCH[release.arch]}-linux",
                "--define", f"_topdir {top}", "--define", f"_rpmdir {top}/RPMS",
                "--define", "_rpmfilename %{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm",
                str(spec),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "SOURCE_DATE_EPOCH": str(release.epoch)},
        )  # fmt: skip
        output = out / rpm_name(release)
        shutil.move(top / "RPMS" / rpm_name(release), output)
    return output


def build(bundle_tree: Path, release: Release, out: Path, compression: int = 9) -> list[Path]:
    """The ``.deb`` and the ``.rpm`` of ``bundle_tree`` (the staged tarball directory)."""
    built = []
    for builder in (build_deb, build_rpm):
        with tempfile.TemporaryDirectory() as work:
            root = Path(work) / "root"
            stage_tree(bundle_tree, release, root)
            built.append(builder(root, release, out, compression))
    return built

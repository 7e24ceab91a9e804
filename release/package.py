"""Release artifacts: per target a tarball, a .deb and an .rpm (release/distpackages.py) with an SBOM each,
and a SHA256SUMS over them all.

    dist/release/credprovider-<version>-linux-<arch>.tar.gz    + .cdx.json
    dist/release/credprovider_<version>_<arch>.deb             + .cdx.json
    dist/release/credprovider-<version>-1.<rpm arch>.rpm       + .cdx.json
    dist/release/credprovider-<version>-image-linux-<arch>.cdx.json   (the OCI image's SBOM)
    dist/release/credprovider-<version>-oci.tar                 (every arch's image and their index)
    dist/release/credprovider-<version>-talos-extension-oci.tar (the bundle as a Talos system
                                                                 extension: release/talos.py)
    dist/release/SHA256SUMS

Each tarball unpacks to ``credprovider-<version>/``: the bundle (launcher, plugin-name symlinks,
``_internal/``), LICENSE, THIRD_PARTY_NOTICES, INSTALL, the example configs and the SBOM. Tarballs are
reproducible: sorted entries, the commit's time on every file, root ownership, no gzip timestamp.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Final

from credprovider.paths import NODE_BIN_DIR, NODE_CONFIG
from release import (
    bundle,
    distpackages,
    glibc,
    image,
    native,
    rootfs,
    sbom,
    sources,
    talos,
    tarball,
    toolchain,
)
from release.targets import Target, target

LICENSE_FILE_NAMES: Final = re.compile(r"^(LICEN[CS]E|COPYING|NOTICE|AUTHORS)", re.I)


def bundle_dir(arch: str, bundles: Path | None = None) -> Path:
    """Where ``arch``'s bundle is: under ``bundles`` when given, else ``dist/bundles``."""
    return (bundles or bundle.REPO / "dist" / "bundles") / arch


def artifact_name(version: str, arch: str) -> str:
    return f"credprovider-{version}-linux-{arch}"


def install_text(version: str, arch: str) -> str:
    name = artifact_name(version, arch)
    return f"""credprovider {version} for linux/{arch}: kubelet image credential provider plugins
(ecr-credential-provider, acr-credential-provider, auth-provider-gcp) and the credprovider tool.

Runs on any Linux node of this architecture: it carries its own C library and needs none from the
node (the project's docs/install.md lists the tested ones). Keep this whole directory together: the executables need
_internal/ next to them. Distribution packages (.deb, .rpm) of the same bundle do these steps for you.

1. Verify the download (in the directory holding the tarball and SHA256SUMS):
     sha256sum --check --ignore-missing SHA256SUMS
2. Unpack under /opt:
     tar -xzf {name}.tar.gz -C /opt
3. Link the plugin names into the kubelet's --image-credential-provider-bin-dir:
     BIN_DIR={NODE_BIN_DIR}   # or the bin dir your kubelet already has
     mkdir -p "$BIN_DIR"
     for n in ecr-credential-provider acr-credential-provider auth-provider-gcp credprovider; do
       ln -sfn /opt/credprovider-{version}/$n "$BIN_DIR/$n"
     done
4. Pick a config for --image-credential-provider-config: one file of config/ per cloud, the whole
   config/ directory (kubelet 1.34+), or one of config/examples/ (all clouds in one file,
   service-account modes), copied to {NODE_CONFIG}; then check it:
     /opt/credprovider-{version}/credprovider validate {NODE_CONFIG} --bin-dir "$BIN_DIR"
5. Check the install:
     "$BIN_DIR/ecr-credential-provider" --version

Upgrading: unpack the new version beside the old one and re-point the symlinks; the kubelet execs the
plugin anew on every cache miss, so no restart is needed.
Licences: LICENSE (credprovider, Apache-2.0) and THIRD_PARTY_NOTICES; the SBOM is sbom.cdx.json.
"""


def _license_files(directory: Path) -> list[Path]:
    return sorted(
        p for p in directory.rglob("*") if p.is_file() and LICENSE_FILE_NAMES.match(p.name)
    )


def _source_file(lock: sources.Lock, package: str, member: str) -> str:
    """One file (e.g. the licence) from a source package's .orig tarball."""
    pkg = lock.packages[package]
    files = sources.download(lock, pkg, native.cache_root() / "sources")
    orig = pkg.file_matching(r"\.orig\.tar\.")
    assert orig is not None
    with tarfile.open(files[orig]) as tar:
        for entry in tar.getmembers():
            if entry.name.split("/", 1)[-1] == member:
                handle = tar.extractfile(entry)
                if handle is not None:
                    return handle.read().decode("utf-8", "replace")
    raise sources.SourceError(f"{package}: {member} is not in {orig}")


def _section(title: str, text: str) -> str:
    return f"{'=' * 78}\n{title}\n{'=' * 78}\n\n{text.strip()}\n\n"


def musl_version() -> str:
    header = (
        toolchain.zig_binary().parent / "lib" / "libc" / "musl" / "src" / "internal" / "version.h"
    )
    match = re.search(r'VERSION "([^"]+)"', header.read_text())
    return match.group(1) if match else "unknown"


def extra_components(
    target: Target, contents: Path
) -> tuple[list[sbom.Component], list[tuple[str, str]]]:
    """Components and licence texts that are neither wheels nor built here: libgcc_s (Debian 11's),
    glibc (Debian 12's), the static launcher and the musl libc in it."""
    components, notices = [], []
    root = rootfs.ensure(target)
    if (contents / "libgcc_s.so.1").exists():
        version = rootfs.package_versions(root, ["libgcc-s1"])["libgcc-s1"]
        components.append(
            sbom.Component("libgcc-s1", version, f"pkg:deb/debian/libgcc-s1@{version}?arch={target.arch}&distro=debian-11",
                           "GPL-3.0-or-later WITH GCC-exception-3.1", ("libgcc_s.so.1",), "from Debian 11, needed by wheels' native code")
        )  # fmt: skip
        copyright_file = root / "usr" / "share" / "doc" / "libgcc-s1" / "copyright"
        notices.append(
            (f"libgcc-s1 {version} (Debian 11)", copyright_file.read_text(errors="replace"))
        )
    libc = glibc.pin()
    components.append(
        sbom.Component(
            "glibc",
            libc.version,
            libc.purl(target.arch),
            glibc.LICENSE,
            target.glibc_files,
            f"Debian 12's {glibc.PACKAGE}: the C library and loader the interpreter runs on",
        )
    )
    notices.append(
        (
            f"glibc {libc.version} (Debian 12's {glibc.PACKAGE}); its source: {libc.source_url()}",
            glibc.copyright_text(target),
        )
    )
    musl = musl_version()
    components.append(
        sbom.Component(
            "musl",
            musl,
            f"pkg:generic/musl@{musl}",
            "MIT",
            ("../credprovider",),
            "statically linked into the launcher",
        )
    )
    version = bundle.project_version()
    components.append(
        sbom.Component(
            "credprovider-launcher",
            version,
            f"pkg:generic/credprovider-launcher@{version}",
            "Apache-2.0",
            ("../credprovider",),
            f"this project's launcher (release/launcher.c), built with zig {toolchain.ZIG_VERSION} "
            "and statically linked with musl",
        )
    )
    copyright_file = toolchain.zig_binary().parent / "lib" / "libc" / "musl" / "COPYRIGHT"
    notices.append((f"musl {musl} (the launcher)", copyright_file.read_text(errors="replace")))
    return components, notices


def notices_text(contents: Path, lock: sources.Lock, extra: list[tuple[str, str]]) -> str:
    parts = [
        "Third-party software in this bundle, with its licence texts.\n"
        "sbom.cdx.json lists every component with its version.\n\n"
    ]
    for native_lib in sbom.NATIVE:
        package = lock.packages[native_lib.package]
        text = _source_file(lock, native_lib.package, native_lib.license_file)
        parts.append(
            _section(f"{native_lib.name} {package.upstream_version} ({native_lib.license})", text)
        )
    for info in sorted(contents.glob("*.dist-info")):
        files = _license_files(info)
        body = "\n\n".join(f"--- {p.name}\n{p.read_text(errors='replace')}" for p in files)
        parts.append(
            _section(
                info.name.removesuffix(".dist-info"),
                body or "(the wheel ships no licence file; see its METADATA)",
            )
        )
    for title, text in extra:
        parts.append(_section(title, text))
    return "".join(parts)


def write_tarball(stage: Path, top: str, output: Path, epoch: int) -> None:
    paths = [stage / top, *sorted((stage / top).rglob("*"))]
    tarball.write(output, [(path, path.relative_to(stage).as_posix()) for path in paths], epoch)


def package(target: Target, out: Path, bundles: Path | None = None) -> list[Path]:
    """The tarball and the SBOM of ``target``'s bundle (built first if missing)."""
    source = bundle_dir(target.arch, bundles)
    if not (source / "credprovider").exists() or not bundle.info_file(source).exists():
        bundle.build(target, source)
    info = bundle.recorded_info(source)
    name = artifact_name(info.version, target.arch)
    top = f"credprovider-{info.version}"
    stage = bundle.REPO / "build" / "stage" / target.arch
    shutil.rmtree(stage, ignore_errors=True)
    shutil.copytree(source, stage / top, symlinks=True)
    contents = stage / top / bundle.CONTENTS
    lock = sources.load_lock()
    extra, extra_notices = extra_components(target, contents)
    components = [
        *sbom.native_components(contents, lock, extra),
        *sbom.python_components(contents),
        *sbom.vendored_components(contents),
    ]

    def described(root_ref: str | None = None) -> str:
        """The SBOM of this bundle, of the tarball or (``root_ref``) of a package of it."""
        document = sbom.document(
            version=info.version,
            arch=target.arch,
            commit=info.commit,
            built=info.built,
            components=components,
            root_ref=root_ref,
        )
        return json.dumps(document, indent=2, sort_keys=True) + "\n"

    sbom_text = described()
    (stage / top / "sbom.cdx.json").write_text(sbom_text)
    shutil.copy2(bundle.REPO / "LICENSE", stage / top / "LICENSE")
    (stage / top / "THIRD_PARTY_NOTICES").write_text(notices_text(contents, lock, extra_notices))
    (stage / top / "INSTALL").write_text(install_text(info.version, target.arch))
    shutil.copytree(bundle.REPO / "config", stage / top / "config")
    out.mkdir(parents=True, exist_ok=True)
    tarball = out / f"{name}.tar.gz"
    write_tarball(stage, top, tarball, info.epoch)
    sbom_file = out / f"{name}.cdx.json"
    sbom_file.write_text(sbom_text)
    # the OCI image of this architecture: the tarball is its layer (release/image.py)
    oci_image = image.arch_image(tarball, target.arch, info.version, info.commit)
    image_sbom = out / image.sbom_name(info.version, target.arch)
    image_sbom.write_text(described(image.purl(oci_image)))
    built = [tarball, sbom_file, image_sbom]
    release = distpackages.Release(
        info.version, target.arch, info.epoch, distpackages.readme_text(info.version)
    )
    for path in distpackages.build(stage / top, release, out):
        package_sbom = path.with_name(path.name + ".cdx.json")
        package_sbom.write_text(described(distpackages.purl(path, release)))
        built += [path, package_sbom]
    shutil.rmtree(stage)
    return built


def release(arches: list[str], out: Path, bundles: Path | None = None) -> None:
    """Every artifact of ``arches`` into ``out``, from the bundles in ``dist/bundles/<arch>`` (or
    ``bundles/<arch>``)."""
    artifacts = []
    images = []
    extensions = []
    infos = []
    for arch in arches:
        for path in package(target(arch), out, bundles):
            sys.stderr.write(f"[release] {path} ({path.stat().st_size / 1048576:.1f} MiB)\n")
            artifacts.append(path)
        info = bundle.recorded_info(bundle_dir(arch, bundles))
        infos.append(info)
        tarball = out / f"{artifact_name(info.version, arch)}.tar.gz"
        images.append(image.arch_image(tarball, arch, info.version, info.commit))
        extensions.append(talos.extension_image(tarball, arch, info.version))
    version = bundle.project_version()
    for archive in (image.write(out, version, images), talos.write(out, version, extensions)):
        sys.stderr.write(f"[release] {archive} ({archive.stat().st_size / 1048576:.1f} MiB)\n")
        artifacts.append(archive)
    # the fleet chart, packaged, and its manifests with the image pinned by the index's digest
    from release import chart, oci

    commits = {(info.commit, info.epoch) for info in infos}
    if len(commits) != 1:
        raise RuntimeError(
            f"the bundles were built from different commits ({', '.join(sorted(c for c, _ in commits))}): "
            "build them again (make release)"
        )
    epoch = infos[0].epoch
    artifacts.append(chart.package(out, version, epoch))
    artifacts += chart.manifests(out, version, oci.index(images).digest)
    # the repositories, the provenance and SHA256SUMS (signed afterwards by release sign)
    from release import publish

    publish.publish(out, artifacts, infos[0])

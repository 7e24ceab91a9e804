"""Package repositories a node's package manager follows, written by ``make release`` under
``dist/release/repo/``: an apt repository (``apt/``: ``pool/``, ``dists/stable/Release``, its
``Packages`` per architecture, and with a signing key ``InRelease`` and ``Release.gpg``) and an RPM
repository (``rpm/``: the packages and ``repodata/`` by createrepo_c, with ``repomd.xml.asc``).
Served as they are (any static web server, or ``file://``), they let ``apt-get upgrade`` and
``dnf upgrade`` take the next release. Byte-reproducible: every time in them is the commit's.
docs/release.md shows how a node adds them.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import os
import shutil
import subprocess
from pathlib import Path
from typing import Final

from release.signing import Signer

SUITE: Final = "stable"
COMPONENT: Final = "main"
ORIGIN: Final = "credprovider"


def _digest(data: bytes, name: str = "sha256") -> str:
    return hashlib.new(name, data).hexdigest()


def _deb_fields(deb: Path) -> str:
    """The package's control stanza (``dpkg-deb -f``), as dpkg wrote it."""
    done = subprocess.run(
        ["dpkg-deb", "-f", str(deb)], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.rstrip("\n")


def _arch(deb: Path) -> str:
    done = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Architecture"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def _place(package: Path, target: Path) -> None:
    """The package in the repository: a hard link where the filesystem allows (the release's
    own file, nothing copied), else a copy."""
    try:
        os.link(package, target)
    except OSError:
        shutil.copyfile(package, target)


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=9, mtime=0)


def apt_repository(
    out: Path, debs: list[Path], epoch: int, signer: Signer | None = None
) -> list[Path]:
    """``out`` as an apt repository of ``debs`` (their files linked or copied into ``pool/``)."""
    pool = out / "pool" / COMPONENT / "c" / "credprovider"
    pool.mkdir(parents=True, exist_ok=True)
    stanzas: dict[str, list[str]] = {}
    for deb in sorted(debs, key=lambda p: p.name):
        placed = pool / deb.name
        _place(deb, placed)
        data = placed.read_bytes()
        stanzas.setdefault(_arch(placed), []).append(
            f"{_deb_fields(placed)}\n"
            f"Filename: {placed.relative_to(out).as_posix()}\n"
            f"Size: {len(data)}\n"
            f"MD5sum: {_digest(data, 'md5')}\n"
            f"SHA256: {_digest(data)}\n"
        )
    dists = out / "dists" / SUITE
    indexes: list[Path] = []
    for arch, entries in sorted(stanzas.items()):
        directory = dists / COMPONENT / f"binary-{arch}"
        directory.mkdir(parents=True, exist_ok=True)
        text = "\n".join(entries).encode()
        (directory / "Packages").write_bytes(text)
        (directory / "Packages.gz").write_bytes(_gzip(text))
        indexes += [directory / "Packages", directory / "Packages.gz"]
    date = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    lines = [
        f"Origin: {ORIGIN}",
        f"Label: {ORIGIN}",
        f"Suite: {SUITE}",
        f"Codename: {SUITE}",
        f"Date: {date.strftime('%a, %d %b %Y %H:%M:%S UTC')}",
        f"Architectures: {' '.join(sorted(stanzas))}",
        f"Components: {COMPONENT}",
        "Description: credprovider, kubelet image credential provider plugins",
        "SHA256:",
    ]
    for index in indexes:
        data = index.read_bytes()
        lines.append(f" {_digest(data)} {len(data):>16} {index.relative_to(dists).as_posix()}")
    release = dists / "Release"
    release.write_text("\n".join(lines) + "\n")
    written = [release, *indexes]
    if signer is not None:
        written.append(signer.clearsign(release, dists / "InRelease"))
        written.append(signer.detach(release, ".gpg"))
    return written


def rpm_repository(
    out: Path, rpms: list[Path], epoch: int, signer: Signer | None = None
) -> list[Path]:
    """``out`` as an RPM repository of ``rpms`` (createrepo_c; no sqlite databases, whose bytes
    vary between runs: dnf and yum read the XML)."""
    if shutil.which("createrepo_c") is None:
        raise RuntimeError("createrepo_c is missing: apt-get install createrepo-c")
    out.mkdir(parents=True, exist_ok=True)
    for rpm in rpms:
        _place(rpm, out / rpm.name)
        os.utime(out / rpm.name, (epoch, epoch))  # primary.xml records each file's time
    subprocess.run(
        ["createrepo_c", "--quiet", "--no-database", "--simple-md-filenames",
         "--revision", str(epoch), "--set-timestamp-to-revision", str(out)],
        capture_output=True, timeout=300, check=True,
    )  # fmt: skip
    repomd = out / "repodata" / "repomd.xml"
    written = sorted((out / "repodata").iterdir())
    if signer is not None:
        written.append(signer.detach(repomd))
    return written

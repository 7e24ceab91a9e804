"""``make reproduce``: the release built again from the same commit into ``dist/reproduce/`` (every
bundle, then every artifact, as ``make release`` builds them) and compared with ``dist/release``
byte for byte: ``SHA256SUMS`` first, then, for each file that differs, the first byte that does
and, in a tarball or a package, the first member that does. Exit 0 when every file is identical.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Final

from release import bundle
from release.publish import read_checksums
from release.targets import TARGETS, target

AGAIN: Final = bundle.REPO / "dist" / "reproduce"


def first_byte(a: bytes, b: bytes) -> str:
    """Where ``a`` and ``b`` first differ."""
    for offset, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"byte {offset} (0x{x:02x} then 0x{y:02x})"
    return f"their sizes ({len(a)} then {len(b)} bytes)"


def _tar_members(data: bytes) -> dict[str, bytes]:
    """Each member of a (possibly gzipped) tar: its header fields and content, as one digest."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    found = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            content = tar.extractfile(member).read() if member.isfile() else b""  # type: ignore[union-attr]
            header = (member.mode, member.uid, member.gid, member.mtime, member.linkname)
            found[member.name] = hashlib.sha256(repr(header).encode() + content).digest()
    return found


def _deb_members(path: Path) -> dict[str, bytes]:
    """A .deb's members (ar): each tarball by its unpacked content."""
    found: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="reproduce-") as work:
        subprocess.run(["ar", "x", str(path)], cwd=work, check=True, timeout=120)
        for part in sorted(Path(work).iterdir()):
            data = part.read_bytes()
            if ".tar" in part.name:
                data = subprocess.run(
                    ["tar", "-xOf", str(part)], capture_output=True, check=False, timeout=120
                ).stdout
            found[part.name] = hashlib.sha256(data).digest()
    return found


def first_member(name: str, a: Path, b: Path) -> str:
    """The first member of two archives that differs ("" for a file that is not an archive)."""
    try:
        if name.endswith((".tar.gz", ".tgz", ".tar")):
            left, right = _tar_members(a.read_bytes()), _tar_members(b.read_bytes())
        elif name.endswith(".deb"):
            left, right = _deb_members(a), _deb_members(b)
        else:
            return ""
    except (OSError, tarfile.TarError, subprocess.SubprocessError):
        return ""
    for member in sorted(set(left) | set(right)):
        if left.get(member) != right.get(member):
            if member not in left or member not in right:
                return f"{member} is only in the {'second' if member not in left else 'first'}"
            return f"its member {member}"
    return "no member (the archive's own bytes)"


def compare(release: Path, again: Path) -> list[str]:
    """One line per file that is not the same in both releases."""
    first, second = read_checksums(release), read_checksums(again)
    lines = []
    for name in sorted(set(first) | set(second)):
        if name not in second or name not in first:
            lines.append(f"{name}: only in {release if name not in second else again}")
        elif first[name] != second[name]:
            a, b = release / name, again / name
            where = first_byte(a.read_bytes(), b.read_bytes())
            member = first_member(name, a, b)
            lines.append(f"{name}: differs at {where}" + (f", in {member}" if member else ""))
    return lines


def rebuild(arches: list[str], out: Path = AGAIN) -> Path:
    """Every bundle of ``arches`` and the release's artifacts again, under ``out``."""
    from release import package

    shutil.rmtree(out, ignore_errors=True)
    bundles = out / "bundles"
    for arch in arches:
        bundle.build(target(arch), bundles / arch)
    release = out / "release"
    release.mkdir(parents=True)
    package.release(arches, release, bundles)
    return release


def main(arches: list[str] | None = None) -> int:
    wanted = arches or sorted(TARGETS)
    release = bundle.REPO / "dist" / "release"
    if (release / "SHA256SUMS.asc").exists():
        sys.stderr.write(
            "reproduce: dist/release is signed (signatures carry their time): rebuild it without "
            "SIGNING_KEY first\n"
        )
        return 1
    again = rebuild(wanted)
    lines = compare(release, again)
    for line in lines:
        sys.stderr.write(f"reproduce: {line}\n")
    if not lines:
        sys.stderr.write(f"reproduce: {again} is dist/release byte for byte\n")
    return 1 if lines else 0

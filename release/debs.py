"""Debian 12 binary packages a release takes as they are, pinned by hash: libc6 (the glibc every
bundle carries, release/glibc.py) and busybox-static (the static shell of the libc-free root
filesystem the tests start a bundle in).

``debs.lock.json`` names each package's version and, for every target, its pool path and the sha256
of its ``.deb``; downloads are checked against it, so the mirror is trusted for nothing but
availability. ``python -m release.debs --refresh`` rewrites the lock from the suite's **signed**
Packages indexes (InRelease checked with gpgv against Debian's archive keyring), the way to take
Debian's newer security fixes.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from release import sources
from release.native import cache_root
from release.targets import TARGETS, Target

LOCK: Final = Path(__file__).with_name("debs.lock.json")
MIRROR: Final = "http://deb.debian.org/debian"
SUITE: Final = "bookworm"
PACKAGES: Final = ("libc6", "busybox-static")


class DebError(RuntimeError):
    """A binary package could not be fetched, verified or unpacked."""


@dataclass(frozen=True)
class Pin:
    name: str
    version: str  # Debian's, e.g. 2.36-9+deb12u14
    source: str  # the source package, e.g. glibc
    files: dict[str, tuple[str, str]]  # arch -> (pool path, sha256)

    @property
    def upstream_version(self) -> str:
        """2.36-9+deb12u14 -> 2.36; 1:1.35.0-4+deb12u1+b1 -> 1.35.0."""
        return self.version.split(":", 1)[-1].rsplit("-", 1)[0]

    def purl(self, arch: str) -> str:
        return f"pkg:deb/debian/{self.name}@{self.version}?arch={arch}&distro=debian-12"

    def source_url(self) -> str:
        """Where the corresponding source lies (the LGPL asks that it be offered)."""
        return f"{MIRROR}/pool/main/{self.source[0]}/{self.source}/"


def load_lock(path: Path = LOCK) -> dict[str, Pin]:
    raw = json.loads(path.read_text())
    return {
        name: Pin(
            name,
            entry["version"],
            entry["source"],
            {arch: (f["path"], f["sha256"]) for arch, f in entry["files"].items()},
        )
        for name, entry in raw["packages"].items()
    }


def write_lock(pins: dict[str, Pin], path: Path = LOCK) -> None:
    packages = {
        name: {
            "version": pin.version,
            "source": pin.source,
            "files": {arch: {"path": p, "sha256": d} for arch, (p, d) in pin.files.items()},
        }
        for name, pin in pins.items()
    }
    document = {"mirror": MIRROR, "suite": SUITE, "packages": packages}
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")


def deb_data(deb: bytes) -> tarfile.TarFile:
    """The ``data.tar.*`` member of a ``.deb`` (an ``ar`` archive), opened."""
    if not deb.startswith(b"!<arch>\n"):
        raise DebError("not a .deb (no ar header)")
    offset = 8
    while offset + 60 <= len(deb):
        header = deb[offset : offset + 60]
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        if name.startswith("data.tar"):
            return tarfile.open(fileobj=io.BytesIO(deb[offset + 60 : offset + 60 + size]))
        offset += 60 + size + (size % 2)
    raise DebError("the .deb holds no data.tar member")


def unpacked(name: str, target: Target, fetch: bool = True) -> Path:
    """Package ``name`` for ``target``, downloaded, verified and unpacked once (cached). Members
    whose links point outside the package (``/lib64/ld-linux-x86-64.so.2``) are left out. With
    ``fetch`` false (the tests, which never leave loopback) it must be in the cache already."""
    pin = load_lock()[name]
    if target.arch not in pin.files:
        raise DebError(f"{LOCK.name} pins no {name} for {target.arch}")
    pool, digest = pin.files[target.arch]
    root = cache_root() / "debs" / f"{name}-{target.arch}-{digest[:16]}"
    if (root / ".complete").exists():
        return root
    if not fetch:
        raise DebError(
            f"{name} for {target.arch} is not in {root.parent}: make test fetches it first "
            "(python -m release fetch-debs)"
        )
    deb = sources.fetch(f"{MIRROR}/{pool}", cache_root() / "debs" / Path(pool).name, digest)
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    with deb_data(deb.read_bytes()) as data:
        members = [m for m in data.getmembers() if not (m.issym() and m.linkname.startswith("/"))]
        data.extractall(partial, members=members, filter="data")
    (partial / ".complete").touch()
    shutil.rmtree(root, ignore_errors=True)
    partial.rename(root)
    return root


# ---- refreshing the lock from the signed index ----------------------------------------------------


def refresh(work: Path) -> dict[str, Pin]:
    """The newest version of each package the suite's signed Packages indexes list, the same for
    every target."""
    chosen: dict[str, dict[str, dict[str, str]]] = {name: {} for name in PACKAGES}
    for arch in sorted(TARGETS):
        index = sources.signed_index(MIRROR, SUITE, f"main/binary-{arch}/Packages.xz", work)
        stanzas = sources.parse_sources(index)
        for name in PACKAGES:
            if not stanzas.get(name):
                raise DebError(f"the {SUITE} {arch} index lists no {name}")
            chosen[name][arch] = sources.newest(stanzas[name])
    pins = {}
    for name, by_arch in chosen.items():
        versions = {stanza["Version"] for stanza in by_arch.values()}
        if len(versions) != 1:
            raise DebError(f"{name} differs between architectures: {sorted(versions)}")
        source = next(iter(by_arch.values())).get("Source", name).split()[0]
        files = {arch: (stanza["Filename"], stanza["SHA256"]) for arch, stanza in by_arch.items()}
        pins[name] = Pin(name, versions.pop(), source, files)
    return pins


def fetch_all(arches: list[str]) -> None:
    """Every pinned package for ``arches``, in the cache (make test, before the tests run)."""
    for name in PACKAGES:
        for arch in arches:
            unpacked(name, TARGETS[arch])


def main(argv: list[str]) -> int:
    if argv != ["--refresh"]:
        sys.stderr.write("usage: python -m release.debs --refresh\n")
        return 2
    old = load_lock() if LOCK.exists() else {}
    with tempfile.TemporaryDirectory() as work:
        pins = refresh(Path(work))
    for name, pin in pins.items():
        was = old[name].version if name in old else "(new)"
        print(f"{name}: {was}" + ("" if was == pin.version else f" -> {pin.version}"))
    write_lock(pins)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

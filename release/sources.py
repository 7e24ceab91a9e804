"""The native sources of the portable interpreter: Debian source packages, pinned by hash.

``sources.lock.json`` names each package's Debian version, pool directory and the sha256 of every
file, and from which patch on Debian's series is applied (Debian's security fixes; the earlier patches
of a series adapt the package to Debian's own layout and are left out). Downloads are checked against
the lock, so the mirror is trusted for nothing but availability.

``python -m release.sources --refresh`` rewrites the lock from the suite's signed index (InRelease,
checked with gpgv against Debian's archive keyring): the way to take Debian's newer security fixes.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

LOCK: Final = Path(__file__).with_name("sources.lock.json")
# This project's own patches, applied after Debian's: release/patches/<package>/*.patch, in name order.
PATCHES: Final = Path(__file__).with_name("patches")
KEYRING: Final = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
DOWNLOAD_TIMEOUT: Final = 120


class SourceError(RuntimeError):
    """A source package could not be fetched, verified or unpacked."""


@dataclass(frozen=True)
class SourcePackage:
    name: str
    version: str  # Debian's version, e.g. 3.11.2-6+deb12u8
    directory: str  # pool directory on the mirror
    files: dict[str, str]  # file name -> sha256
    patches_from: str | None  # the first patch of debian/patches/series to apply; None: none

    @property
    def upstream_version(self) -> str:
        """3.11.2-6+deb12u8 -> 3.11.2; 1:1.2.13.dfsg-1 -> 1.2.13."""
        version = self.version.split(":", 1)[-1].rsplit("-", 1)[0]
        return re.sub(r"[.+~](dfsg|ds)\d*$", "", version)

    def file_matching(self, pattern: str) -> str | None:
        for name in self.files:
            if re.search(pattern, name):
                return name
        return None


@dataclass(frozen=True)
class Lock:
    mirror: str
    suite: str
    packages: dict[str, SourcePackage]


def load_lock(path: Path = LOCK) -> Lock:
    raw = json.loads(path.read_text())
    packages = {name: SourcePackage(name=name, **entry) for name, entry in raw["packages"].items()}
    return Lock(raw["mirror"], raw["suite"], packages)


def write_lock(lock: Lock, path: Path = LOCK) -> None:
    packages = {}
    for name, package in sorted(lock.packages.items()):
        entry = asdict(package)
        del entry["name"]
        packages[name] = entry
    document = {"mirror": lock.mirror, "suite": lock.suite, "packages": packages}
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(url: str, destination: Path, sha256: str | None = None) -> Path:
    """Download ``url`` to ``destination`` (atomically), checking ``sha256`` when given."""
    if destination.exists() and (sha256 is None or sha256_file(destination) == sha256):
        return destination
    destination.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=destination.parent, delete=False) as partial:
        try:
            with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as response:  # noqa: S310
                shutil.copyfileobj(response, partial)
        except OSError as exc:
            Path(partial.name).unlink()
            raise SourceError(f"cannot download {url}: {exc}") from exc
    got = sha256_file(Path(partial.name))
    if sha256 is not None and got != sha256:
        Path(partial.name).unlink()
        raise SourceError(f"{url}: sha256 {got} is not the locked {sha256}")
    Path(partial.name).replace(destination)
    return destination


def download(lock: Lock, package: SourcePackage, cache: Path) -> dict[str, Path]:
    """Every file of ``package`` in ``cache``, verified against the lock."""
    return {
        name: fetch(f"{lock.mirror}/{package.directory}/{name}", cache / name, sha256)
        for name, sha256 in package.files.items()
    }


def _extract(archive: Path, into: Path) -> Path:
    """Extract ``archive`` into ``into`` and return the single top-level directory it holds."""
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    entries = [entry for entry in into.iterdir() if entry.name != "debian"]
    if len(entries) != 1 or not entries[0].is_dir():
        raise SourceError(f"{archive.name} does not unpack to one directory")
    return entries[0]


def patch_series(series: str, first: str | None) -> list[str]:
    """The patches of a quilt ``series`` file from ``first`` on (comments and options dropped)."""
    names = [
        line.split()[0] for line in series.splitlines() if line.strip() and not line.startswith("#")
    ]
    if first is None:
        return []
    if first not in names:
        raise SourceError(f"patch {first} is not in the series")
    return names[names.index(first) :]


def unpack(lock: Lock, name: str, cache: Path, workdir: Path) -> Path:
    """Download, verify and unpack source package ``name`` with its chosen Debian patches applied."""
    package = lock.packages[name]
    files = download(lock, package, cache)
    orig = package.file_matching(r"\.orig\.tar\.")
    if orig is None:
        raise SourceError(f"{name}: the lock names no .orig tarball")
    source = _extract(files[orig], workdir / name)
    debian = package.file_matching(r"\.debian\.tar\.")
    patches: list[Path] = []
    if package.patches_from is not None:
        if debian is None:
            raise SourceError(
                f"{name}: patches are asked for but the lock names no .debian tarball"
            )
        with tarfile.open(files[debian]) as tar:
            tar.extractall(workdir / f"{name}-debian", filter="data")
        debian_patches = workdir / f"{name}-debian" / "debian" / "patches"
        series = (debian_patches / "series").read_text()
        patches = [debian_patches / patch for patch in patch_series(series, package.patches_from)]
    patches += own_patches(name)
    for patch in patches:
        subprocess.run(
            ["patch", "-p1", "--batch", "--forward", "--quiet", "-i", str(patch)],
            cwd=source,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return source


def own_patches(name: str) -> list[Path]:
    return sorted((PATCHES / name).glob("*.patch"))


# ---- refreshing the lock from the signed index ----------------------------------------------------


def parse_sources(text: str) -> dict[str, list[dict[str, str]]]:
    """A Debian index (Sources or Packages): package name -> its stanzas (Version, Directory or
    Filename, Checksums-Sha256 or SHA256, ...)."""
    stanzas: dict[str, list[dict[str, str]]] = {}
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] = f"{fields[key]}\n{line.strip()}" if fields[key] else line.strip()
            elif ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if "Package" in fields:
            stanzas.setdefault(fields["Package"], []).append(fields)
    return stanzas


def newest(stanzas: list[dict[str, str]]) -> dict[str, str]:
    def key(stanza: dict[str, str]) -> list[tuple[int, str]]:
        # Good enough to order the handful of versions one suite carries; dpkg decides ties.
        return [
            (int(part), "") if part.isdigit() else (0, part)
            for part in re.split(r"(\d+)", stanza["Version"])
        ]

    return max(stanzas, key=key)


def signed_index(mirror: str, suite: str, wanted: str, work: Path) -> str:
    """One index of ``suite`` (e.g. ``main/source/Sources.xz``), decompressed, checked against the
    sha256 the suite's InRelease gives it; InRelease itself is checked with gpgv against Debian's
    archive keyring."""
    inrelease = fetch(f"{mirror}/dists/{suite}/InRelease", work / "InRelease")
    subprocess.run(
        ["gpgv", "--keyring", str(KEYRING), str(inrelease)],
        check=True,
        capture_output=True,
    )
    match = re.search(rf"^ ([0-9a-f]{{64}}) +\d+ {re.escape(wanted)}$", inrelease.read_text(), re.M)
    if match is None:
        raise SourceError(f"InRelease lists no {wanted}")
    index = fetch(
        f"{mirror}/dists/{suite}/{wanted}", work / wanted.replace("/", "_"), match.group(1)
    )
    return lzma.decompress(index.read_bytes()).decode("utf-8")


def refresh(lock: Lock, work: Path) -> Lock:
    """The lock with every package at the newest version the suite's signed Sources index lists."""
    stanzas = parse_sources(signed_index(lock.mirror, lock.suite, "main/source/Sources.xz", work))
    packages = {}
    for name, old in lock.packages.items():
        stanza = newest(stanzas[name])
        files = {}
        for line in stanza["Checksums-Sha256"].splitlines():
            parts = line.split()
            if len(parts) == 3 and not parts[2].endswith((".dsc", ".asc")):
                files[parts[2]] = parts[0]
        packages[name] = SourcePackage(
            name, stanza["Version"], stanza["Directory"], files, old.patches_from
        )
    return Lock(lock.mirror, lock.suite, packages)


def main(argv: list[str]) -> int:
    if argv != ["--refresh"]:
        sys.stderr.write("usage: python -m release.sources --refresh\n")
        return 2
    lock = load_lock()
    with tempfile.TemporaryDirectory() as work:
        new = refresh(lock, Path(work))
    for name, package in new.packages.items():
        old = lock.packages[name].version
        print(f"{name}: {old}" + ("" if old == package.version else f" -> {package.version}"))
    write_lock(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

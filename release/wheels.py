"""The Python distributions inside a bundle: pinned, hash-checked wheels for the target's platform.

``requirements.in`` names what a bundle needs (the project's runtime dependencies and PyInstaller,
which builds it); ``requirements.lock`` pins every distribution with the sha256 of each wheel for
every target. pip picks wheels for the *target* (``--platform manylinux2014_<machine>``, glibc 2.17),
never by this machine's glibc. ``python -m release.wheels --lock`` re-resolves the lock.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata
import io
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath
from typing import Final

from release.native import cache_root
from release.targets import TARGETS, Target

HERE: Final = Path(__file__).parent
REQUIREMENTS: Final = HERE / "requirements.in"
LOCK: Final = HERE / "requirements.lock"
PYTHON_VERSION: Final = "3.11"


def _platform_args(target: Target) -> list[str]:
    args = ["--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp"]
    for abi in ("cp311", "abi3", "none"):
        args += ["--abi", abi]
    for platform in target.wheel_platforms:
        args += ["--platform", platform]
    return args


def site_dir(target: Target) -> Path:
    """Keyed by the lock, this file and pip (how the site is made): a change to any remakes it."""
    pip = importlib.metadata.version("pip")
    recipe = LOCK.read_bytes() + Path(__file__).read_bytes() + f"{target.arch} {pip}".encode()
    return cache_root() / "site" / f"{target.arch}-{hashlib.sha256(recipe).hexdigest()[:16]}"


def install(target: Target) -> Path:
    """The locked distributions installed for ``target`` into a cached directory (a sys.path entry)."""
    site = site_dir(target)
    if (site / ".complete").exists():
        return site
    shutil.rmtree(site, ignore_errors=True)
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--require-hashes",
            "--no-compile", "--target", str(site), *_platform_args(target), "-r", str(LOCK),
        ],
        check=True,
    )  # fmt: skip
    _unbind_scripts(site)
    (site / ".complete").touch()
    return site


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _unbind_scripts(site: Path) -> None:
    """Give the console scripts pip wrote the ``#!python`` of their wheels again.

    pip writes the interpreter that ran it (this checkout's venv) into each script's first line,
    and the script's hash into its distribution's RECORD, which a bundle carries: the bundle would
    name the machine's checkout path. The scripts are never run from a bundle.
    """
    bin_dir = site / "bin"
    rewritten: dict[str, bytes] = {}
    for script in sorted(bin_dir.iterdir()) if bin_dir.is_dir() else []:
        data = script.read_bytes()
        if data.startswith(b"#!"):
            _, _, rest = data.partition(b"\n")
            data = b"#!python\n" + rest
            script.write_bytes(data)
            rewritten[script.name] = data
    for record in sorted(site.glob("*.dist-info/RECORD")):
        rows = list(csv.reader(io.StringIO(record.read_text(), newline="")))
        scripts = [
            (row, rewritten[name]) for row in rows if (name := _script_name(row)) in rewritten
        ]
        for row, data in scripts:
            row[1:3] = [_record_hash(data), str(len(data))]
        if scripts:
            out = io.StringIO(newline="")
            csv.writer(out).writerows(rows)  # as pip writes it: "\r\n" after each row
            record.write_bytes(out.getvalue().encode())


def _script_name(row: list[str]) -> str:
    """The name of the script a RECORD row lists (``../../bin/<name>``), or ""."""
    path = PurePosixPath(row[0]) if row else None
    return path.name if path is not None and path.parent.name == "bin" else ""


def _resolve(target: Target, work: Path) -> dict[str, dict[str, str]]:
    """name -> {version, url, sha256} of every distribution pip picks for ``target``."""
    report = work / f"report-{target.arch}.json"
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
            "--target", str(work / "unused"), "--report", str(report), *_platform_args(target),
            "-r", str(REQUIREMENTS),
        ],
        check=True,
    )  # fmt: skip
    picked = {}
    for item in json.loads(report.read_text())["install"]:
        name = item["metadata"]["name"].lower().replace("_", "-")
        picked[name] = {
            "version": item["metadata"]["version"],
            "sha256": item["download_info"]["archive_info"]["hashes"]["sha256"],
        }
    return picked


def lock() -> str:
    """A requirements file pinning one version of each distribution, with every target's hashes."""
    with tempfile.TemporaryDirectory() as work:
        per_target = {arch: _resolve(target, Path(work)) for arch, target in TARGETS.items()}
    names = sorted(set().union(*per_target.values()))
    lines = [
        "# Generated by `python -m release.wheels --lock` from requirements.in: the wheels of every",
        "# bundle, for every target (pip --require-hashes).",
    ]
    for name in names:
        versions = {picked[name]["version"] for picked in per_target.values() if name in picked}
        if len(versions) != 1 or any(name not in picked for picked in per_target.values()):
            raise RuntimeError(f"{name}: the targets resolve differently ({per_target})")
        hashes = sorted({picked[name]["sha256"] for picked in per_target.values()})
        lines.append(f"{name}=={versions.pop()} \\")
        lines += [f"    --hash=sha256:{digest} \\" for digest in hashes[:-1]]
        lines.append(f"    --hash=sha256:{hashes[-1]}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv != ["--lock"]:
        sys.stderr.write("usage: python -m release.wheels --lock\n")
        return 2
    LOCK.write_text(lock())
    print(f"wrote {LOCK}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

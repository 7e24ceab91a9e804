"""The release's provenance: one in-toto Statement (``credprovider-<version>.intoto.json``) whose
predicate is SLSA Provenance v1, naming every artifact of the release by its sha256 (the
subjects), the commit it was built from, the build's entry point and time, and every input locked
by hash or version: the wheels (release/requirements.lock), the Debian binary packages carried into
the bundle (release/debs.lock.json), the Debian sources the interpreter and its libraries are built
from (release/sources.lock.json), the Debian suite of the build roots, the compiler that builds the
interpreter (zig), the pip that installs the wheels, and the Go toolchain and Helm that render the
chart. Signed like the rest (``.asc``, gpg). No time or machine name but the
commit's is in it, so a rebuild writes the same bytes.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
from pathlib import Path
from typing import Any, Final

from release import bundle, debs, gobuild, sources, toolchain
from release.targets import DEBIAN_SUITE

STATEMENT: Final = "https://in-toto.io/Statement/v1"
PREDICATE: Final = "https://slsa.dev/provenance/v1"
BUILD_TYPE: Final = (
    "https://github.com/credprovider/credprovider/blob/main/docs/release.md#make-release"
)
BUILDER: Final = "https://github.com/credprovider/credprovider/blob/main/Makefile#make-release"
LOCKS: Final = bundle.REPO / "release"


def name(version: str) -> str:
    return f"credprovider-{version}.intoto.json"


def wheels(lock: Path = LOCKS / "requirements.lock") -> list[dict[str, Any]]:
    """Each locked wheel (``name==version``) with every hash pip accepts for it."""
    found: list[dict[str, Any]] = []
    for block in re.split(r"\n(?=\S)", lock.read_text()):
        pinned = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", block)
        if not pinned:
            continue
        package, version = pinned.groups()
        normalized = re.sub(r"[-_.]+", "-", package).lower()
        for digest in re.findall(r"--hash=sha256:([0-9a-f]{64})", block):
            found.append({"uri": f"pkg:pypi/{normalized}@{version}", "digest": {"sha256": digest}})
    return found


def debian_binaries() -> list[dict[str, Any]]:
    return [
        {
            "uri": pin.purl(arch),
            "digest": {"sha256": digest},
            "downloadLocation": f"{debs.MIRROR}/{path}",
        }
        for _, pin in sorted(debs.load_lock().items())
        for arch, (path, digest) in sorted(pin.files.items())
    ]


def debian_sources() -> list[dict[str, Any]]:
    lock = sources.load_lock()
    return [
        {
            "uri": f"pkg:deb/debian/{package.name}@{package.version}?arch=source&distro={lock.suite}",
            "name": file,
            "digest": {"sha256": digest},
            "downloadLocation": f"{lock.mirror}/{package.directory}/{file}",
        }
        for package in sorted(lock.packages.values(), key=lambda p: p.name)
        for file, digest in sorted(package.files.items())
    ]


def go_version() -> str:
    done = subprocess.run(
        ["go", "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=False
    )
    return done.stdout.strip() or "unknown"


def statement(artifacts: dict[str, str], info: bundle.BuildInfo) -> dict[str, Any]:
    """The Statement over ``artifacts`` (each name and its sha256)."""
    helm_packages, helm_version = gobuild.HELM
    return {
        "_type": STATEMENT,
        "subject": [
            {"name": name, "digest": {"sha256": digest}}
            for name, digest in sorted(artifacts.items())
        ],
        "predicateType": PREDICATE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "source": {
                        "uri": "git+https://github.com/credprovider/credprovider",
                        "digest": {"gitCommit": info.commit},
                    },
                    "target": "make release",
                    "version": info.version,
                },
                "internalParameters": {"SOURCE_DATE_EPOCH": info.epoch},
                "resolvedDependencies": [
                    *wheels(),
                    *debian_binaries(),
                    *debian_sources(),
                    {"uri": f"pkg:deb/debian?distro={DEBIAN_SUITE}", "name": "the build roots"},
                    {"uri": f"pkg:pypi/ziglang@{toolchain.ZIG_VERSION}", "name": "the C compiler"},
                    {"uri": f"pkg:pypi/pip@{importlib.metadata.version('pip')}", "name": "pip"},
                    {"uri": f"pkg:golang/go@{go_version()}", "name": "the Go toolchain"},
                    {"uri": f"pkg:golang/{helm_packages[0]}@{helm_version}", "name": "helm"},
                ],
            },
            "runDetails": {
                "builder": {"id": BUILDER},
                "metadata": {"startedOn": info.built, "finishedOn": info.built},
            },
        },
    }


def write(out: Path, artifacts: dict[str, str], info: bundle.BuildInfo) -> Path:
    target = out / name(info.version)
    target.write_text(json.dumps(statement(artifacts, info), indent=2, sort_keys=True) + "\n")
    return target

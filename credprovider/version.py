"""What ``--version`` prints under every name: the version, and where this build came from.

A release bundle carries ``buildinfo.json`` next to this module (written by ``release/bundle.py``): the
git commit, the build date (the commit's time, as SOURCE_DATE_EPOCH, so rebuilds are identical) and
the target architecture. Run from source, those are unknown and say so. Only ``--version`` reads
the file and loads OpenSSL (through ``_ssl`` alone: the ``ssl`` module would import socket, enum and
selectors too, several times what the rest of ``--version`` costs): the exec path never does.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Final

from credprovider import __version__

BUILD_INFO: Final = os.path.join(os.path.dirname(__file__), "buildinfo.json")
_ARCHES: Final = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "amd64": "amd64"}


def build_info() -> dict[str, str]:
    try:
        with open(BUILD_INFO, encoding="utf-8") as handle:
            raw = json.load(handle)
    except (OSError, ValueError):
        raw = {}
    info = raw if isinstance(raw, dict) else {}
    machine = os.uname().machine
    return {
        "version": __version__,
        "commit": str(info.get("commit") or "unknown (not a release build)"),
        "built": str(info.get("built") or "unknown"),
        "arch": str(info.get("arch") or _ARCHES.get(machine.lower(), machine)),
        "python": "{}.{}.{}".format(*sys.version_info[:3]),
        "openssl": _openssl_version(),
    }


def _openssl_version() -> str:
    try:
        import _ssl
    except ImportError:
        return "none"
    return str(_ssl.OPENSSL_VERSION).removeprefix("OpenSSL ")


def version_text(program: str) -> str:
    """Two lines: the name and version (as before), then the build's facts."""
    info = build_info()
    return (
        f"{program} version {info['version']} (credprovider)\n"
        f"commit {info['commit']}, built {info['built']}, linux/{info['arch']}, "
        f"Python {info['python']}, OpenSSL {info['openssl']}\n"
    )


if __name__ == "__main__":
    sys.stdout.write(version_text("credprovider"))

"""What ``--version`` prints under every name: the version, and where this build came from.

A release bundle carries ``credprovider/_buildinfo.py`` (written by ``release/bundle.py``, compiled
with the rest): the git commit, the build date (the commit's time, as SOURCE_DATE_EPOCH, so rebuilds
are identical), the target architecture and the version of the OpenSSL it carries. Run from source,
the first two are unknown and say so, and the OpenSSL version is asked of ``_ssl`` (not ``ssl``,
which would import socket, enum and selectors too).

``--version`` is the cheapest exec there is (``credprovider.entry`` answers it before importing a
program): this module imports nothing but ``posix`` and ``sys``, which the interpreter already holds
(``os`` would cost the exec more than the rest of it: credprovider/runtime/_os.py).
"""

import posix
import sys

from credprovider import __version__

_ARCHES = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "amd64": "amd64"}


def build_info() -> dict[str, str]:
    try:
        from credprovider._buildinfo import BUILD_INFO as raw  # type: ignore[import-not-found]
    except ImportError:
        raw = {}
    info = raw if isinstance(raw, dict) else {}
    machine = posix.uname().machine
    return {
        "version": __version__,
        "commit": str(info.get("commit") or "unknown (not a release build)"),
        "built": str(info.get("built") or "unknown"),
        "arch": str(info.get("arch") or _ARCHES.get(machine.lower(), machine)),
        "python": "{}.{}.{}".format(*sys.version_info[:3]),
        "openssl": str(info.get("openssl") or _openssl_version()),
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

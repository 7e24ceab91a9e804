"""What the ``credprovider`` subcommands share: exit codes, JSON output, masking, node defaults."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from credprovider.catalog import PLUGINS

if TYPE_CHECKING:
    import argparse

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2

# What build_parser hands each command's register().
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

# The examples in --help: the first plugin's first registry form and pattern.
EXAMPLE: Final = next(iter(PLUGINS.values()))
EXAMPLE_IMAGE: Final = next(iter(EXAMPLE.sample_images.values()))
EXAMPLE_PATTERN: Final = EXAMPLE.match_images[0]


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False))


def mask(password: str, show: bool) -> str:
    from credprovider.runtime.redact import redact

    return password if show else redact(password)


def node_default(given: str | None, default: str, flag: str) -> str | None:
    """``given``, else the standard node path when it exists; ``None`` (and one line) if neither."""
    if given:
        return given
    if Path(default).exists():
        return default
    print(f"credprovider get: give {flag} (nothing at the default {default})", file=sys.stderr)
    return None


def read_text(path: str) -> str:
    from credprovider.install import InstallError

    try:
        text: str = Path(path).read_text(encoding="utf-8")
        return text
    except UnicodeDecodeError:
        raise InstallError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise InstallError(f"{path}: {exc.strerror or exc}") from None

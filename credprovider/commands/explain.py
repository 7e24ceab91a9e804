"""``credprovider explain``: which plugin claims an image and what it would do (offline)."""

from __future__ import annotations

import argparse
import sys

from credprovider.catalog import PLUGINS
from credprovider.commands.common import (
    EXIT_OK,
    EXIT_USAGE,
    Subcommands,
    print_json,
)
from credprovider.imageref import ImageError


def _cmd_explain(args: argparse.Namespace) -> int:
    from credprovider.explain import explain_image

    try:
        result = explain_image(args.image, args.provider)
    except ImageError as exc:
        print(f"credprovider explain: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print_json(result)
    else:
        print(f"image:    {result['image']}")
        print(f"registry: {result['registry']}")
        claim = result["plugin"] or "none"
        print(
            f"provider: {claim}{'' if result['recognized'] else ' (not its registry)' if result['plugin'] else ''}"
        )
        print(f"it would: {result['action']}")
    return EXIT_OK


def register(sub: Subcommands) -> None:
    explain = sub.add_parser(
        "explain",
        help="offline: which plugin claims an image and what it would do",
        description="No network and no cloud SDK: only the plugins' registry recognition rules.",
    )
    explain.add_argument("image")
    explain.add_argument(
        "--provider",
        choices=sorted(PLUGINS),
        help="ask about this provider only (recognized says if it is its registry)",
    )
    explain.add_argument("--json", action="store_true", help="one JSON object on stdout")
    explain.set_defaults(handler=_cmd_explain)

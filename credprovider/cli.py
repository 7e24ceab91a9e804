"""``credprovider``: the operator tool (run by hand, never by the kubelet)."""

from __future__ import annotations

import argparse
import sys

from credprovider import __version__
from credprovider.entry import PLUGIN_MODULES
from credprovider.matching import urls_match

EXIT_MATCH = 0
EXIT_NO_MATCH = 1
EXIT_USAGE = 2


def _cmd_match(args: argparse.Namespace) -> int:
    matched = urls_match(args.pattern, args.image)
    print("match" if matched else "no match")
    return EXIT_MATCH if matched else EXIT_NO_MATCH


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="credprovider",
        description=(
            "Operator tool for the credprovider kubelet image credential provider plugins "
            f"({', '.join(PLUGIN_MODULES)})."
        ),
    )
    parser.add_argument("--version", action="version", version=f"credprovider {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    match = sub.add_parser(
        "match",
        help="does a matchImages pattern (or response auth key) match an image?",
        description=(
            "Apply the kubelet's matchImages rule: ports must be equal, hosts must have the same "
            "number of labels, '*' matches within one label, and the image path must start with the "
            "pattern's path. Pass the image as the kubelet does (registry/repository, no tag). "
            "Exit 0 on match, 1 on no match, 2 on usage error."
        ),
    )
    match.add_argument("pattern", help="e.g. '*.dkr.ecr.*.amazonaws.com'")
    match.add_argument("image", help="e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com/app")
    match.set_defaults(handler=_cmd_match)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        sys.exit(EXIT_USAGE)
    sys.exit(args.handler(args))

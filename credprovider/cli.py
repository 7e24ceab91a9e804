"""``credprovider``: the operator tool (run by hand, never by the kubelet).

It answers "why did this pull get no credentials?": ``validate`` a config like the kubelet,
``get`` credentials the way the kubelet would, ``explain`` an image offline, ``match`` a pattern,
``install`` the plugins and ``migrate`` a node from the in-tree providers. Each subcommand is a
module of credprovider/commands/; this one builds the parser and is the edge that catches errors.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from credprovider.commands import COMMANDS
from credprovider.commands.common import EXAMPLE, EXIT_USAGE
from credprovider.entry import PLUGIN_MODULES
from credprovider.errors import CredproviderError
from credprovider.runtime.redact import safe_line
from credprovider.version import version_text


class _PrintVersion(argparse.Action):
    """--version as the plugins print it (argparse's own action would re-wrap the lines)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        sys.stdout.write(version_text("credprovider"))
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="credprovider",
        epilog=(
            "The plugins run under this name too: 'credprovider <plugin-name> [args]' is the "
            f"plugin itself (plugin names: {', '.join(PLUGIN_MODULES)}); for example "
            f"'credprovider {EXAMPLE.name} --help'."
        ),
        description=(
            "Operator tool for the kubelet image credential provider plugins "
            f"{', '.join(PLUGIN_MODULES)}. Start with 'credprovider get IMAGE --config ... "
            "--bin-dir ...' to see why a pull got (or did not get) credentials."
        ),
    )
    parser.add_argument(
        "--version",
        action=_PrintVersion,
        nargs=0,
        help="print the version, git commit, build date, architecture, Python and OpenSSL versions",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for command in COMMANDS:
        importlib.import_module(f"credprovider.commands.{command}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        sys.exit(EXIT_USAGE)
    try:
        code = args.handler(args)
    except CredproviderError as exc:  # each handler says its own failures; this is the backstop
        sys.stderr.write(f"credprovider: {safe_line(str(exc))}\n")
        code = 1
    sys.exit(code)

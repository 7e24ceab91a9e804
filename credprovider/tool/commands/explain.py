"""``credprovider explain``: which plugin claims an image and what it would do (offline)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from credprovider.runtime.imageref import ImageError
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Subcommands,
    cannot_check,
    node_paths,
    print_json,
)
from credprovider.tool.kubeconfig.model import ConfigError
from credprovider.tool.node.access import UnreadableError


def _cmd_explain(args: argparse.Namespace) -> int:
    from credprovider.tool.images.claims import explain_image

    if args.config is None and not args.shipped:  # this node's config, found as get finds it
        node = node_paths("explain")
        if node.config:
            print(
                f"credprovider explain: --config {node.config} ({node.found_by})", file=sys.stderr
            )
            args.config = node.config
        elif node.unreadable:
            print(f"credprovider explain: {node.unreadable[0]}", file=sys.stderr)
            return EXIT_USAGE
    try:
        providers, args_of = _config_providers(args.config) if args.config else (None, None)
        result = explain_image(args.image, args.provider, providers, args_of)
    except ImageError as exc:
        print(f"credprovider explain: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except UnreadableError as exc:
        return cannot_check("explain", exc, args.json)
    except ConfigError as exc:
        print(
            f"credprovider explain: the kubelet would not start with {args.config}: {exc.describe()}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    result["config"] = args.config  # None: the shipped matchImages
    if args.json:
        print_json(result)
        return EXIT_OK
    print(f"image:    {result['image']} (as the kubelet passes it)")
    print(f"registry: {result['registry']}")
    print(f"config:   {args.config or 'none on this node: the shipped matchImages'}")
    plugin = result["plugin"]
    if plugin is None:
        print("provider: none: no provider's matchImages match it")
    else:
        sent = "" if result["matched"] else " (its matchImages do not send it this image)"
        theirs = "" if result["recognized"] else " (not its registry)"
        print(f"provider: {plugin}{sent}{theirs}")
    print(f"it would: {result['action']}")
    for name, misses in result["misses"].items():
        for miss in misses:
            print(f"nearest:  {name}: {miss['pattern']!r}: {miss['reason']}")
    return EXIT_OK


def _config_providers(
    path: str,
) -> tuple[list[tuple[str, Sequence[str]]], dict[str, Sequence[str]]]:
    """The config's (name, matchImages) in order, and each provider's args."""
    from credprovider.tool.kubeconfig.validate import load_config

    loaded = load_config(path).providers
    return [(p.name or "", p.matchImages or []) for p in loaded], {
        p.name or "": p.args or [] for p in loaded
    }


def register(sub: Subcommands) -> None:
    explain = sub.add_parser(
        "explain",
        help="offline: which provider the kubelet would run for an image, and what it would do",
        description=(
            "No network and no cloud SDK. The image is normalized as the kubelet does and matched "
            "with the kubelet's rules against this node's config (found as get and doctor find "
            "it), --config's, or, on a machine with none, the shipped matchImages, exactly as "
            "get selects providers; the first that matches claims it, and its plugin's registry "
            "rules say what it would send. A miss lists the nearest patterns and why. Exit 0 with "
            "an answer, 1 for a config the kubelet refuses, 2 for what is not an image."
        ),
    )
    explain.add_argument("image")
    against = explain.add_mutually_exclusive_group()
    against.add_argument(
        "--config",
        help="match against this CredentialProviderConfig (file or directory) (default: the one "
        "this node's kubelet uses, else the shipped matchImages)",
    )
    against.add_argument(
        "--shipped",
        action="store_true",
        help="match against the shipped matchImages, whatever this node uses",
    )
    explain.add_argument(
        "--provider",
        choices=sorted(PLUGINS),
        help="ask about this provider only (recognized says if it is its registry)",
    )
    explain.add_argument("--json", action="store_true", help="one JSON object on stdout")
    explain.set_defaults(handler=_cmd_explain)

"""``credprovider match``: one matchImages pattern against one image, under the kubelet's rules."""

from __future__ import annotations

import argparse
import sys

from credprovider.runtime.imageref import ImageError, kubelet_image
from credprovider.tool.commands.common import (
    EXAMPLE_IMAGE,
    EXAMPLE_PATTERN,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Subcommands,
)
from credprovider.tool.images.misses import explain_pattern_mismatch


def _cmd_match(args: argparse.Namespace) -> int:
    try:
        image = kubelet_image(args.image)
    except ImageError as exc:
        swapped = "*" in args.image and "*" not in args.pattern
        hint = " (the pattern comes first: credprovider match PATTERN IMAGE)" if swapped else ""
        print(f"credprovider match: {exc}{hint}", file=sys.stderr)
        return EXIT_USAGE
    reason = explain_pattern_mismatch(args.pattern, image)
    print("match" if reason is None else f"no match: {reason}")
    if image != args.image:
        print(f"(image as the kubelet passes it: {image})")
    return EXIT_OK if reason is None else EXIT_FAILED


def register(sub: Subcommands) -> None:
    match = sub.add_parser(
        "match",
        help="does a matchImages pattern (or response auth key) match an image?",
        description=(
            "Apply the kubelet's matchImages rule: ports must be equal, hosts must have the same "
            "number of labels, '*' matches within one label, and the image path must start with the "
            "pattern's path. The image is normalized as the kubelet does (nginx -> "
            "docker.io/library/nginx, tag and digest dropped); a miss says which rule failed and, "
            "for a port, the pattern to add. Exit 0 on match, 1 on no match, 2 for a usage error or "
            "an IMAGE that is not an image (the same hint explain, get and the plugins give)."
        ),
    )
    match.add_argument("pattern", help=f"e.g. '{EXAMPLE_PATTERN}'")
    match.add_argument("image", help=f"e.g. {EXAMPLE_IMAGE}")
    match.set_defaults(handler=_cmd_match)

"""``credprovider package-removal-check``: what the distribution package's removal runs first
(``.deb`` prerm, ``.rpm`` %preun; release/distpackages.py). Exit 1, with one line, when the node's
kubelet (running, or as its flags files set it up) runs plugins from the package: removing them
would leave a kubelet that does not start. ``CREDPROVIDER_FORCE_REMOVE=1`` removes anyway."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Final

from credprovider.errors import CredproviderError
from credprovider.paths import PACKAGE_LIB_DIR
from credprovider.tool.commands.common import EXIT_FAILED, EXIT_OK, Subcommands, node_paths
from credprovider.tool.kubeconfig.model import read_config

FORCE_ENV: Final = "CREDPROVIDER_FORCE_REMOVE"


def _cmd_check(args: argparse.Namespace) -> int:
    from credprovider.tool.node.inuse import package_plugins

    node = node_paths("package-removal-check")
    if node.config is None or node.bin_dir is None:
        return EXIT_OK  # no kubelet set up for plugins here
    try:
        names = [p.name for p in read_config(node.config).providers if p.name is not None]
    except (CredproviderError, OSError):
        return EXIT_OK  # a config the kubelet cannot read keeps it from starting anyway
    used = package_plugins(names, node.bin_dir)
    if not used:
        return EXIT_OK
    shown = ", ".join(item.path for item in used[:5]) + (" ..." if len(used) > 5 else "")
    said = (
        f"the kubelet's config {node.config} ({node.found_by}) names plugins this package holds "
        f"({shown}, in {PACKAGE_LIB_DIR}): without them the kubelet does not start"
    )
    if os.environ.get(FORCE_ENV) == "1":
        print(f"credprovider: removing anyway ({FORCE_ENV}=1): {said}", file=sys.stderr)
        return EXIT_OK
    print(
        f"credprovider: not removed: {said}; point the kubelet at plugins of its own first "
        f"(credprovider install --copy --bin-dir DIR, then its flags), or remove anyway with "
        f"{FORCE_ENV}=1",
        file=sys.stderr,
    )
    return EXIT_FAILED


def register(sub: Subcommands) -> None:
    check = sub.add_parser(
        "package-removal-check",
        help="what removing the distribution package runs first: exit 1 while the kubelet "
        "runs the package's plugins",
        description="The .deb's prerm and the .rpm's %preun run this before a removal (not an "
        "upgrade). Exit 1, with one line, when the node's kubelet (running, or as its flags files "
        "set it up) names plugins that resolve into the package's directory: the removal then "
        f"stops, changing nothing. {FORCE_ENV}=1 in the environment removes anyway. Exit 0 "
        "otherwise.",
    )
    check.set_defaults(handler=_cmd_check)

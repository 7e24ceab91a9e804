"""``credprovider install``: the plugin names in a bin dir and a validated config."""

from __future__ import annotations

import argparse
import sys
from typing import Final

from credprovider.catalog import NODE_BIN_DIR, NODE_CONFIG, PLUGINS
from credprovider.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    Subcommands,
    print_json,
)


def _cmd_install(args: argparse.Namespace) -> int:
    from credprovider.config import ConfigError
    from credprovider.install import InstallError, install

    keys = [key.strip() for key in args.providers.split(",") if key.strip()]
    node_files = {
        plugin.key: path
        for plugin in _TAKING_A_NODE_FILE
        if (path := getattr(args, _node_file_dest(plugin.key)))
    }
    try:
        result = install(
            args.bin_dir,
            args.config_out,
            keys,
            node_files,
            args.copy,
            args.force,
            args.target,
        )
    except (InstallError, ConfigError, OSError) as exc:
        print(f"credprovider install: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print_json(
            {
                "actions": result.actions,
                "warnings": result.warnings,
                "kubeletFlags": result.kubelet_flags,
            }
        )
        return EXIT_OK
    for action in result.actions:
        print(action)
    for warning in result.warnings:
        print(f"warning: {warning}")
    print("add to the kubelet's flags:")
    for flag in result.kubelet_flags:
        print(f"  {flag}")
    return EXIT_OK


# The plugins whose first argument names a node file (azure.json): each gets --<key>-config.
_TAKING_A_NODE_FILE: Final = [plugin for plugin in PLUGINS.values() if plugin.node_file_arg]


def _node_file_dest(key: str) -> str:
    """Where argparse keeps ``--<key>-config``: one attribute per plugin that takes a node file."""
    return f"node_file_{key}"


def register(sub: Subcommands) -> None:
    inst = sub.add_parser(
        "install",
        help="install the plugins into a bin dir and write a complete kubelet config",
        description=(
            "Link the plugin names in DIR to this bundle's executable (or, with --copy, copy the "
            "bundle into DIR/.credprovider and link to the copy), write a CredentialProviderConfig "
            "with complete matchImages, validate it, and print the kubelet flags. Idempotent; a "
            "different existing file is only replaced with --force."
        ),
    )
    inst.add_argument(
        "--bin-dir",
        required=True,
        help=f"the kubelet's --image-credential-provider-bin-dir (usually {NODE_BIN_DIR})",
    )
    inst.add_argument(
        "--config-out",
        required=True,
        help=f"the config file to write (usually {NODE_CONFIG})",
    )
    inst.add_argument(
        "--providers",
        default=",".join(PLUGINS),
        help=f"comma list of {', '.join(PLUGINS)} (default: %(default)s)",
    )
    for plugin in _TAKING_A_NODE_FILE:
        inst.add_argument(
            f"--{plugin.key}-config",
            dest=_node_file_dest(plugin.key),
            help=f"the node file passed to {plugin.name} (default: {plugin.node_file_arg})",
        )
    inst.add_argument(
        "--copy", action="store_true", help="copy the bundle instead of linking to it"
    )
    inst.add_argument("--force", action="store_true", help="replace different existing files")
    inst.add_argument("--target", help="the credprovider executable to link to (default: this one)")
    inst.add_argument("--json", action="store_true", help="one JSON object on stdout")
    inst.set_defaults(handler=_cmd_install)

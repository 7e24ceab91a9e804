"""``credprovider migrate``: from a kubelet's in-tree cloud login to these plugins."""

from __future__ import annotations

import argparse
import sys
from typing import Final

from credprovider.catalog import NODE_BIN_DIR, NODE_CONFIG, PLUGINS
from credprovider.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Subcommands,
    cannot_check,
    print_json,
)


def _cmd_migrate(args: argparse.Namespace) -> int:
    from credprovider.install import InstallError
    from credprovider.migrate import flags_from_file, plan_migration
    from credprovider.nodefiles import FileProblem, UnreadableError, read_text

    if not (args.kubelet_flags or args.kubelet_flags_file or args.kubelet_config):
        print(
            "credprovider migrate: nothing to read: give the kubelet's flags "
            '(--kubelet-flags="..." or --kubelet-flags-file /var/lib/kubelet/kubeadm-flags.env) '
            "and/or --kubelet-config FILE",
            file=sys.stderr,
        )
        return EXIT_USAGE
    providers = (
        [key.strip() for key in args.providers.split(",") if key.strip()]
        if args.providers
        else None
    )
    try:
        flags = [args.kubelet_flags]
        for path in args.kubelet_flags_file or []:
            text = read_text(path)
            try:
                flags.append(flags_from_file(text))
            except InstallError as exc:
                raise InstallError(f"{path}: {exc}") from None
        config_text = read_text(args.kubelet_config) if args.kubelet_config else ""
        plan = plan_migration(
            " ".join(flags), config_text, args.bin_dir, args.config_out, providers
        )
    except (InstallError, FileProblem) as exc:
        print(f"credprovider migrate: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except UnreadableError as exc:
        return cannot_check("migrate", exc, args.json)
    if args.json:
        print_json(
            {
                "providers": plan.providers,
                "removeFlags": plan.remove,
                "addFlags": plan.add,
                "config": plan.config,
                "notes": plan.notes,
            }
        )
        return EXIT_OK
    if plan.remove:
        print("remove from the kubelet:")
        for flag in plan.remove:
            print(f"  {flag}")
    if plan.add:
        print("add to the kubelet:")
        for flag in plan.add:
            print(f"  {flag}")
    if plan.config:
        print(f"write {args.config_out} (and install the plugins with credprovider install):")
        print(plan.config)
    for note in plan.notes:
        print(f"note: {note}")
    return EXIT_OK


# For --help: an in-tree cloud some plugin replaces (not every cloud had one).
_IN_TREE_EXAMPLE: Final = next(
    (cloud for plugin in PLUGINS.values() for cloud in plugin.in_tree_clouds), "<cloud>"
)


def register(sub: Subcommands) -> None:
    migrate = sub.add_parser(
        "migrate",
        help="move a node from the in-tree cloud providers to these plugins",
        description=(
            "Read a kubelet's old command line and/or KubeletConfiguration (--cloud-provider, "
            + "".join(f"--{flag}, " for p in PLUGINS.values() for flag in p.implied_by_flags)
            + "feature gates) and print the flags to remove and add and the "
            "CredentialProviderConfig to write (reusing the node files the old flags name)."
        ),
    )
    migrate.add_argument(
        "--kubelet-flags",
        default="",
        metavar='"FLAGS"',
        help="the kubelet's flags, quoted "
        f'(--kubelet-flags="--cloud-provider={_IN_TREE_EXAMPLE} ..."); '
        "--flag=value and --flag value both work",
    )
    migrate.add_argument(
        "--kubelet-flags-file",
        action="append",
        metavar="FILE",
        help="a file holding the kubelet's flags: kubeadm's /var/lib/kubelet/kubeadm-flags.env, "
        "/etc/default/kubelet, /etc/sysconfig/kubelet, or a systemd unit or drop-in "
        "(Environment= and ExecStart=); repeatable",
    )
    migrate.add_argument("--kubelet-config", help="a KubeletConfiguration file")
    migrate.add_argument(
        "--providers",
        metavar="LIST",
        help=f"the clouds to configure, comma-separated ({', '.join(PLUGINS)}): needed with "
        "--cloud-provider=external, which does not say the cloud; default: what the flags say",
    )
    migrate.add_argument(
        "--bin-dir",
        default=NODE_BIN_DIR,
        help="the plugin bin dir for the flags to add (default: %(default)s)",
    )
    migrate.add_argument(
        "--config-out",
        default=NODE_CONFIG,
        help="where the config will be written, for the flags to add (default: %(default)s)",
    )
    migrate.add_argument("--json", action="store_true", help="one JSON object on stdout")
    migrate.set_defaults(handler=_cmd_migrate)

"""``credprovider agent plan``: what the node agent (the fleet installer's DaemonSet) would do on a
node, read from the node's files under ``--root``; it changes nothing."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from credprovider import __version__
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Subcommands,
    print_json,
)


def _cmd_plan(args: argparse.Namespace) -> int:
    from credprovider.tool.agent.plan import plan_node

    keys = [key.strip() for key in args.providers.split(",") if key.strip()]
    unknown = [key for key in keys if key not in PLUGINS]
    if unknown or not keys:
        print(
            f"credprovider agent plan: --providers takes a comma list of {', '.join(PLUGINS)}"
            + (f" (not {', '.join(unknown)})" if unknown else ""),
            file=sys.stderr,
        )
        return EXIT_USAGE
    plan = plan_node(args.root, keys, args.version)
    if args.json:
        print_json(asdict(plan) | {"changesKubeletInput": plan.changes_kubelet_input})
        return EXIT_FAILED if plan.refused else EXIT_OK
    print(f"{plan.platform} (recognised by {plan.evidence})")
    if plan.refused:
        print(f"  nothing would change: {plan.refused}")
        return EXIT_FAILED
    for step in plan.steps:
        print(f"  {step.action:<9} {step.detail}")
    if not plan.restart:
        print("  no restart: the kubelet's config and flags stay as they are")
    for note in plan.notes:
        print(f"  note: {note}")
    return EXIT_OK


def register(sub: Subcommands) -> None:
    agent = sub.add_parser(
        "agent",
        help="the node agent of the fleet installer: what it would do on a node (plan)",
        description="The node agent places the bundle in a versioned directory, links the plugins, "
        "writes or merges the kubelet's config (validated as the kubelet validates it first), sets "
        "the two kubelet flags in the platform's own place, and restarts the kubelet only when its "
        "config or flags changed. 'plan' shows what it would do; nothing is changed.",
    )
    actions = agent.add_subparsers(dest="action", metavar="ACTION", required=True)
    plan = actions.add_parser(
        "plan",
        help="what the agent would do on the node under --root; changes nothing",
        description="Exit 0: a plan (possibly nothing to do); 1: the agent would change nothing "
        "on this node, and says why and what to do instead; 2: usage.",
    )
    plan.add_argument(
        "--root",
        default="/",
        help="where the node's filesystem is (the DaemonSet mounts the host's at /host) "
        "(default: %(default)s)",
    )
    plan.add_argument(
        "--providers",
        default=",".join(PLUGINS),
        help=f"comma list of {', '.join(PLUGINS)} (default: %(default)s)",
    )
    plan.add_argument(
        "--version",
        default=__version__,
        help="the bundle version to install (default: this one, %(default)s)",
    )
    plan.add_argument("--json", action="store_true", help="one JSON object on stdout")
    plan.set_defaults(handler=_cmd_plan)

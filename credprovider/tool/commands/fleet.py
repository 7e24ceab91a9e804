"""``credprovider fleet status``: what the node agents did on every node, read from the API server
(the ``credprovider.io/`` annotations each agent writes on its node); ``fleet uninstall``: every
node restored before the chart is deleted (agent/removal.py)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Final

from credprovider.runtime.excerpt import quoted
from credprovider.runtime.redact import printable
from credprovider.tool.change.results import Result
from credprovider.tool.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    Subcommands,
    print_json,
    seconds,
)

if TYPE_CHECKING:
    from credprovider.tool.agent.cluster import NodeStatus

# A node whose last result is one of these is fine; any other needs a look.
GOOD: Final = tuple(result.value for result in Result if result.good)
COLUMNS: Final = ("NODE", "READY", "VERSION", "RESULT", "CONFIG HASH", "TIME", "DETAIL")


def rows(found: list[tuple[str, NodeStatus | None, bool]]) -> list[dict[str, str | bool]]:
    """One row per node, as --json prints them."""
    table: list[dict[str, str | bool]] = []
    for name, known, ready in found:
        table.append(
            {
                "node": name,
                "ready": ready,
                "version": known.version if known else "",
                "result": known.result if known else "",
                "configHash": known.config_hash if known else "",
                "time": known.time if known else "",
                "detail": known.detail if known else "no agent has reported on this node",
                "rewritten": known.rewritten if known else "",
            }
        )
    return table


def detail_of(row: dict[str, str | bool]) -> str:
    """The row's detail, and when the platform last wrote again what the agent wrote."""
    rewritten = str(row["rewritten"])
    if not rewritten:
        return str(row["detail"])
    at, _, paths = rewritten.partition(" ")
    return f"{row['detail']} (the platform rewrote {paths} at {at})"


def _width(text: str) -> int:
    """``--width`` (argparse ``type``): a few ASCII digits, from 10 to 10,000 (a negative width
    cut the detail from its end; 0 showed none of it)."""
    if not (text.isascii() and text.isdigit() and len(text) <= 5 and 10 <= int(text) <= 10000):
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not a width from 10 to 10000")
    return int(text)


def _cmd_status(args: argparse.Namespace) -> int:
    from credprovider.tool.agent.cluster import fleet
    from credprovider.tool.cluster.connect import ClusterError, connect

    try:
        found = list(fleet(connect(args.kubeconfig, in_cluster=False, context=args.context)))
    except ClusterError as exc:
        print(f"credprovider fleet status: {exc}", file=sys.stderr)
        return EXIT_FAILED
    table = rows(found)
    healthy = all(row["result"] in GOOD for row in table)
    if args.json:
        print_json({"nodes": table, "allGood": healthy})
        return EXIT_OK if healthy else EXIT_FAILED
    lines = [list(COLUMNS)]
    for row in table:
        digest = str(row["configHash"])
        lines.append(
            [
                str(row["node"]),
                "Ready" if row["ready"] else "NotReady",
                str(row["version"]) or "-",
                str(row["result"]) or "-",
                (digest[:19] + "…") if len(digest) > 20 else (digest or "-"),
                str(row["time"]) or "-",
                printable(detail_of(row))[: args.width],
            ]
        )
    widths = [max(len(line[column]) for line in lines) for column in range(len(COLUMNS) - 1)]
    for line in lines:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        print("  ".join([*cells, line[-1]]))
    return EXIT_OK if healthy else EXIT_FAILED


def _cmd_uninstall(args: argparse.Namespace) -> int:
    from credprovider.tool.agent.removal import remove_fleet
    from credprovider.tool.cluster.connect import ClusterError, connect

    def say(line: str) -> None:
        print(printable(line), flush=True)

    try:
        client = connect(args.kubeconfig, in_cluster=args.kubeconfig is None)
        found = remove_fleet(client, args.namespace, args.daemonset, args.timeout, say)
    except ClusterError as exc:
        print(f"credprovider fleet uninstall: {exc}", file=sys.stderr)
        return EXIT_FAILED
    left = [outcome for outcome in found if not outcome.done]
    if left:
        print(
            f"credprovider fleet uninstall: {len(left)} of {len(found)} node(s) not restored "
            f"within {args.timeout:g}s: {'; '.join(o.line() for o in left)}. Nothing was deleted: "
            "fix those nodes (credprovider doctor there), then helm uninstall again; helm "
            "uninstall --no-hooks deletes the release and leaves them as they are",
            file=sys.stderr,
        )
        return EXIT_FAILED
    say(f"every node restored ({len(found)})")
    return EXIT_OK


def register(sub: Subcommands) -> None:
    fleet = sub.add_parser(
        "fleet",
        help="what the node agents (the chart's DaemonSet) did on every node, from the API server",
        description="Reads each node's credprovider.io/ annotations: the version the agent "
        "installed, the hash of the kubelet config it wrote (the one the kubelet 1.34+ reports "
        "as kubelet_credential_provider_config_info), its last result and when. The Events of "
        "each change are on the node: kubectl describe node NAME.",
    )
    actions = fleet.add_subparsers(dest="action", metavar="ACTION", required=True)
    status = actions.add_parser(
        "status",
        help="one line per node; exit 1 when a node's last result is not installed, unchanged "
        "or uninstalled (or no agent reported there)",
        description="Exit 0: every node's agent succeeded; 1: a node needs a look (refused, "
        "rolled back, failed, waiting, or no report), or the API server could not be read.",
    )
    status.add_argument(
        "--kubeconfig",
        help="the kubeconfig to use (default: the files $KUBECONFIG lists, merged as kubectl "
        "merges them, else ~/.kube/config)",
    )
    status.add_argument(
        "--context", help="the kubeconfig's context to use (default: its current-context)"
    )
    status.add_argument(
        "--width",
        type=_width,
        default=80,
        help="the DETAIL column's width, from 10 to 10000 (default: %(default)s)",
    )
    status.add_argument("--json", action="store_true", help="one JSON object on stdout")
    status.set_defaults(handler=_cmd_status)
    uninstall = actions.add_parser(
        "uninstall",
        help="tell every node's agent to uninstall and wait for each node to be restored (the "
        "chart's pre-delete hook runs it on helm uninstall)",
        description="Adds --uninstall to the agent DaemonSet's arguments (what action=uninstall "
        "renders), then waits until every node an agent reported on says uninstalled, printing "
        "each node's outcome as it changes. Exit 0: every node restored; 1: a node was not "
        "within --timeout (its outcome is printed), or the API server could not be used.",
    )
    uninstall.add_argument("--namespace", required=True, help="the DaemonSet's namespace")
    uninstall.add_argument("--daemonset", required=True, help="the agent DaemonSet's name")
    uninstall.add_argument(
        "--timeout",
        type=seconds,
        default=600.0,
        help="seconds to wait for every node (default: %(default)g)",
    )
    uninstall.add_argument(
        "--kubeconfig", help="the kubeconfig to use (default: the pod's service account)"
    )
    uninstall.set_defaults(handler=_cmd_uninstall)

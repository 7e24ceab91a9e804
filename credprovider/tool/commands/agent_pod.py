"""``credprovider agent run --node NAME``: the DaemonSet's agent when it talks to the API server
(the chart's ``flags`` mode), and ``credprovider agent ready`` (its readiness probe). Part of
``credprovider agent`` (commands/agent.py); the node work is in ``credprovider.tool.agent``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Final

from credprovider.tool.agent.mounts import AUTO, CHOICES, choice
from credprovider.tool.agent.platforms import files_only
from credprovider.tool.agent.systemd import reachable
from credprovider.tool.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    node_root,
    print_json,
)

if TYPE_CHECKING:
    from credprovider.tool.agent.confirm import Outcome
    from credprovider.tool.agent.platforms import Platform
    from credprovider.tool.agent.run import RunOptions
    from credprovider.tool.agent.watchdog import Watchdog

KUBELET_METRICS: Final = "https://127.0.0.1:10250/metrics"
LEASE_SECONDS: Final = 120


def platform_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--platform",
        default=AUTO,
        choices=[c.value for c in CHOICES] + [AUTO],
        help=f"the node's platform, one of {', '.join(c.value for c in CHOICES)}: its rules are "
        "followed, once the node shows it is that platform (the chart's flags.platform, which "
        f"mounts only what that platform needs); {AUTO}: the agent recognizes the node "
        "(default: %(default)s)",
    )


def platform_refused(args: argparse.Namespace) -> str:
    """Why --platform cannot be followed ("": it can; argparse refuses a name it does not
    know)."""
    if getattr(args, "platform", AUTO) != AUTO and getattr(args, "files_only", False):
        return "--files-only follows no platform: leave --platform out"
    return ""


def platform_rules(args: argparse.Namespace) -> Platform | None:
    """--files-only's rules (paths given), --platform's, or None: the node's own."""
    if args.files_only:
        return files_only(getattr(args, "config", ""), getattr(args, "bin_dir", ""))
    return None if args.platform == AUTO else choice(args.platform).platform


def restarter(args: argparse.Namespace) -> Callable[[str], None]:
    """How this run restarts a unit: over systemd's private socket (--systemd-socket), else the
    --restart-command (agent/restart.py)."""
    from credprovider.tool.agent.restart import restarter as made

    return made(args.systemd_socket, args.restart_command)


def watchdog(args: argparse.Namespace) -> Watchdog | None:
    """The node's own rollback for a restart made over systemd's socket (agent/watchdog.py)."""
    if not args.systemd_socket:
        return None
    from credprovider.tool.agent.watchdog import GRACE_SECONDS, Watchdog

    return Watchdog(args.systemd_socket, args.health_timeout + GRACE_SECONDS)


def systemd_refused(args: argparse.Namespace, action: str) -> bool:
    """--systemd-socket names something that does not answer: one line, before any change."""
    if not args.systemd_socket or reachable(args.systemd_socket):
        return False
    print(
        f"credprovider agent {action}: nothing answers on --systemd-socket "
        f"{args.systemd_socket} (systemd's private socket; the chart mounts the host's "
        "/run/systemd): nothing is changed",
        file=sys.stderr,
    )
    return True


def said(outcome: Outcome, as_json: bool, ok: bool) -> int:
    if as_json:
        print_json(asdict(outcome))
    else:
        print(outcome.result + (f": {outcome.detail}" if outcome.detail else ""))
        for note in [outcome.healed, *outcome.notes]:
            if note:
                print(f"  note: {note}")
        for path in outcome.changed:
            print(f"  changed   {path}")
        for unit in outcome.restarted:
            print(f"  restarted {unit}")
        for path in outcome.kept:
            print(f"  kept      {path} (changed by someone else since the agent wrote it)")
    return EXIT_OK if ok else EXIT_FAILED


def cluster_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``run`` that make the agent talk to the API server."""
    parser.add_argument(
        "--node",
        default=os.environ.get("NODE_NAME", ""),
        help="this node's name: with it the agent takes a restart slot before restarting the "
        "kubelet, writes the node's credprovider.io/ annotations and Events, and checks the node "
        "Ready after a restart (default: $NODE_NAME, which the chart sets; empty: none of this)",
    )
    parser.add_argument(
        "--namespace",
        default=os.environ.get("POD_NAMESPACE", "kube-system"),
        help="where the restart slots' Leases live (default: $POD_NAMESPACE or kube-system)",
    )
    parser.add_argument(
        "--kubeconfig",
        help="a kubeconfig to reach the API server (default: the pod's service account)",
    )
    parser.add_argument(
        "--slots",
        type=int,
        default=1,
        help="how many nodes may restart their kubelet at once across the cluster (default: "
        "%(default)s)",
    )
    parser.add_argument(
        "--lease-seconds",
        type=int,
        default=LEASE_SECONDS,
        help="how long a slot stays taken without renewal, e.g. by a node that died holding it "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--metrics",
        default=KUBELET_METRICS,
        help="the kubelet's metrics, where 1.34+ reports the hash of the config it runs; asked "
        "after a restart with the pod's token (RBAC nodes/metrics get); '' skips it (default: "
        "%(default)s)",
    )
    parser.add_argument(
        "--ready-file",
        default="",
        help="created once the node passed a dry-run credential request per provider; "
        "'agent ready' is the readiness probe that looks for it (default: none)",
    )
    parser.add_argument(
        "--dry-run-launcher",
        default="",
        help="what the dry run's plugins run under, e.g. 'nsenter --target 1 --mount --' to run "
        "the node's own plugins from the kubelet's bin dir (default: the bundle's plugins)",
    )


# Kubernetes' largest tested cluster has 5,000 nodes: more slots than that is a typo (each is a
# Lease the agent may try); a Lease's duration is an int32 of seconds, and a day is already long.
MAX_SLOTS: Final = 5000
MAX_LEASE_SECONDS: Final = 86400


def _refused(args: argparse.Namespace) -> str:
    if not 1 <= args.slots <= MAX_SLOTS:
        return f"--slots is from 1 to {MAX_SLOTS}"
    if not 15 <= args.lease_seconds <= MAX_LEASE_SECONDS:
        return f"--lease-seconds is from 15 to {MAX_LEASE_SECONDS} (a day)"
    if args.metrics and not args.metrics.startswith(("http://", "https://")):
        return "--metrics is an http:// or https:// URL, or ''"
    if args.ready_file:
        ready = Path(args.ready_file)
        if not ready.parent.is_dir():
            return f"--ready-file {args.ready_file}: its directory does not exist"
        if os.path.lexists(ready) and not (ready.is_file() and not ready.is_symlink()):
            return f"--ready-file {args.ready_file} is not a regular file (the agent creates one)"
    return ""


def run_with_cluster(args: argparse.Namespace) -> int:
    """``agent run --node``: the options checked, then the run as one of the fleet
    (:func:`credprovider.tool.agent.run.run_as_member`)."""
    from credprovider.tool.agent.run import Fleet, run_as_member
    from credprovider.tool.cluster.connect import ClusterError

    problem = _refused(args)
    if problem:
        print(f"credprovider agent run: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if systemd_refused(args, "run"):
        return EXIT_FAILED
    fleet = Fleet(
        args.node, args.namespace, args.kubeconfig, args.slots, args.lease_seconds, args.healthz,
        args.health_timeout, args.metrics, args.ready_file,
    )  # fmt: skip
    try:
        return run_as_member(
            run_options(args, args.uninstall),
            fleet,
            restarter(args),
            watchdog(args),
            lambda outcome, ok: said(outcome, args.json, ok),
        )
    except ClusterError as exc:
        print(f"credprovider agent run: {exc}", file=sys.stderr)
        return EXIT_FAILED


def run_options(args: argparse.Namespace, uninstall: bool) -> RunOptions:
    """What ``args`` ask of a change: ``agent apply``'s and ``run``'s options, or ``agent
    uninstall``'s (which has no install options: their defaults, unused by an uninstall)."""
    from credprovider.tool.agent.run import RunOptions

    return RunOptions(
        root=node_root(args),
        keys=getattr(args, "keys", []),
        version=getattr(args, "version", ""),
        bundle=getattr(args, "bundle", ""),
        settings=getattr(args, "settings", {}),
        rules=platform_rules(args),
        uninstall=uninstall,
        dry_run_launcher=getattr(args, "dry_run_launcher", ""),
        migrate_in_tree=getattr(args, "migrate_in_tree", False),
        beside=getattr(args, "beside", False),
        systemd_socket=args.systemd_socket,
    )


def cmd_ready(args: argparse.Namespace) -> int:
    """The readiness probe: 0 once ``run`` created its ready file."""
    ready = Path(args.ready_file)
    if ready.is_file() and not ready.is_symlink():
        return EXIT_OK
    if os.path.lexists(ready):
        print(f"not ready: {args.ready_file} is not a regular file", file=sys.stderr)
        return EXIT_FAILED
    print(f"not ready: {args.ready_file} does not exist yet (see the pod's log)", file=sys.stderr)
    return EXIT_FAILED

"""``credprovider agent``: the fleet installer's node agent (its DaemonSet runs it). ``plan`` shows
what it would do on the node under ``--root`` and changes nothing; ``apply`` does it; ``uninstall``
puts the node back as it was before the first install."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict
from typing import Final

from credprovider import __version__
from credprovider.tool.agent.systemd import PRIVATE_SOCKET
from credprovider.tool.catalog import DEFAULT_KEYS, PLUGINS
from credprovider.tool.commands.agent_pod import (
    cluster_options,
    cmd_ready,
    platform_option,
    platform_refused,
    platform_rules,
    restarter,
    run_options,
    said,
    systemd_refused,
    watchdog,
)
from credprovider.tool.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Subcommands,
    chosen_providers,
    node_path,
    node_root,
    print_json,
    seconds,
)
from credprovider.tool.errors import NodeChangeError


def _paths_refused(args: argparse.Namespace, action: str) -> bool:
    """--root must be a directory, --bundle a credprovider bundle, and --files-only comes with
    --bin-dir and --config (one line if not)."""
    problem = ""
    if not os.path.isdir(args.root):
        problem = f"--root {args.root} is not a directory (the node's filesystem)"
    bundle = getattr(args, "bundle", None)
    if (
        not problem
        and bundle is not None
        and not (os.path.isdir(bundle) and os.path.isfile(os.path.join(bundle, "credprovider")))
    ):
        problem = f"--bundle {bundle} is not a credprovider bundle directory"
    if (
        not problem
        and action != "rollback"
        and args.files_only
        and not (args.bin_dir and args.config)
    ):
        problem = "--files-only needs --bin-dir and --config"
    problem = problem or platform_refused(args)
    if problem:
        print(f"credprovider agent {action}: {problem}", file=sys.stderr)
    return bool(problem)


def _cmd_plan(args: argparse.Namespace) -> int:
    from credprovider.tool.agent.plan import plan_node

    keys = chosen_providers(args, "agent plan")
    if keys is None or _paths_refused(args, "plan"):
        return EXIT_USAGE
    plan = plan_node(
        node_root(args), keys, args.version, platform_rules(args), args.settings,
        migrate_in_tree=args.migrate_in_tree, beside=args.beside,
    )  # fmt: skip
    if plan.config_text is not None and not plan.refused:
        # as apply starts them before it changes anything (from the bundle this runs from)
        from credprovider.tool.change.startcheck import own_plugin_refusing

        refusing = own_plugin_refusing(
            plan.config_path, plan.config_text, set(plan.providers.values())
        )
        if refusing:
            plan.refused, plan.steps, plan.config_text, plan.flag_text = refusing, [], None, None
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


# How the agent run by hand on a node restarts a service (the chart's uses --systemd-socket), and
# where the kubelet says it is healthy (the pod has the node's network).
RESTART_COMMAND: Final = "systemctl restart {unit}"
HEALTHZ: Final = "http://127.0.0.1:10248/healthz"
HEALTH_TIMEOUT: Final = 60.0


def _cmd_rollback(args: argparse.Namespace) -> int:
    """The armed service's program (agent/watchdog.py): its lines go to the node's journal."""
    from credprovider.tool.agent.restart import restarter
    from credprovider.tool.agent.watchdog import rollback, say

    if _paths_refused(args, "rollback") or systemd_refused(args, "rollback"):
        return EXIT_USAGE
    try:
        done = rollback(
            node_root(args),
            args.armed_as,
            args.after,
            restarter(args.systemd_socket, ""),
        )
    except (OSError, NodeChangeError) as exc:
        say(f"the kubelet's config and flags could not be put back: {exc}")
        return EXIT_FAILED
    say(done)
    return EXIT_OK


def _cmd_apply(args: argparse.Namespace) -> int:
    keys = chosen_providers(args, "agent apply")
    if keys is None or _paths_refused(args, "apply"):
        return EXIT_USAGE
    if not args.healthz.startswith("http://127.0.0.1:"):
        print("credprovider agent apply: --healthz is the kubelet's on 127.0.0.1", file=sys.stderr)
        return EXIT_USAGE
    if systemd_refused(args, "apply"):
        return EXIT_FAILED
    args.keys = keys
    return _change_alone(args, "apply", uninstall=False)


def _cmd_uninstall(args: argparse.Namespace) -> int:
    if _paths_refused(args, "uninstall"):
        return EXIT_USAGE
    if systemd_refused(args, "uninstall"):
        return EXIT_FAILED
    return _change_alone(args, "uninstall", uninstall=True)


def _change_alone(args: argparse.Namespace, action: str, uninstall: bool) -> int:
    """The node changed with no API server (:func:`credprovider.tool.agent.run.change_alone`),
    its outcome printed."""
    from credprovider.tool.agent.run import change_alone, failed_because, kubelet_alone

    restart, healthy = kubelet_alone(restarter(args), args.healthz, args.health_timeout)
    try:
        outcome, ok = change_alone(
            run_options(args, uninstall), restart, healthy, watchdog(args), action
        )
    except (OSError, NodeChangeError) as exc:
        print(f"credprovider agent {action}: {failed_because(exc)}", file=sys.stderr)
        return EXIT_FAILED
    return said(outcome, args.json, ok)


def _cmd_run(args: argparse.Namespace) -> int:
    """The DaemonSet's container: apply (or uninstall), then stay until stopped; a failure exits
    1, so the pod shows it (CrashLoopBackOff) and kubectl logs says why."""
    if args.node:
        from credprovider.tool.commands.agent_pod import run_with_cluster

        keys = chosen_providers(args, "agent run")
        if keys is None or _paths_refused(args, "run"):
            return EXIT_USAGE
        args.keys = keys
        return run_with_cluster(args)
    from credprovider.tool.agent.run import run_alone

    return run_alone(lambda: _cmd_uninstall(args) if args.uninstall else _cmd_apply(args))


def _install_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--providers",
        default=",".join(DEFAULT_KEYS),
        help=f"comma list of {', '.join(PLUGINS)} (default: %(default)s)",
    )
    parser.add_argument(
        "--provider-settings",
        default="",
        metavar="JSON",
        help="per provider, what replaces the shipped defaults: "
        '\'{"aws": {"matchImages": [...], "args": [...], "env": {"NAME": "value"}, '
        '"defaultCacheDuration": "1h", "tokenAttributes": {...}}}\' (the chart\'s '
        "providerSettings; the result is validated as the kubelet validates it) (default: none)",
    )
    parser.add_argument(
        "--version", default=__version__, help="the bundle's version (default: %(default)s)"
    )
    parser.add_argument(
        "--files-only",
        action="store_true",
        help="only the bundle, the plugin links in --bin-dir and the config at --config: no "
        "flag is set and nothing is restarted (the flags were set at provisioning; a changed "
        "config takes effect at the kubelet's next start)",
    )
    _files_only_paths(parser)
    platform_option(parser)
    parser.add_argument(
        "--migrate-in-tree",
        action="store_true",
        help="on a kubeadm node whose flags still give an in-tree --cloud-provider, move it to "
        "--cloud-provider=external in KUBELET_EXTRA_ARGS (the cloud's controller manager must "
        "run; uninstall keeps it external) instead of refusing the node (default: refuse)",
    )
    parser.add_argument(
        "--beside",
        action="store_true",
        help="where the platform ships its own plugin of the same name (GKE, EKS, AKS), add "
        "ours beside it as <plugin>-credprovider, the platform's binary and entry left as they "
        "are; the kubelet then asks both for an image both match (default: ours take their "
        "place, the platform's kept for uninstall)",
    )


def _files_only_paths(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bin-dir", type=node_path, help="with --files-only: the kubelet's bin dir"
    )
    parser.add_argument(
        "--config", type=node_path, help="with --files-only: the kubelet's config file"
    )


def _node_options(parser: argparse.ArgumentParser, changes: bool) -> None:
    parser.add_argument(
        "--root",
        default="/",
        help="where the node's filesystem is (the DaemonSet mounts the host's at /host) "
        "(default: %(default)s)",
    )
    if changes:
        parser.add_argument(
            "--restart-command",
            default=RESTART_COMMAND,
            help="how a service is restarted, {unit} replaced by its name (default: %(default)s)",
        )
        parser.add_argument(
            "--systemd-socket",
            default="",
            help="restart units over systemd's private socket (D-Bus) at this path instead of "
            "running --restart-command, and ask systemd which of the platform's units it has "
            "(else the unit files under --root tell): the chart mounts the host's /run/systemd "
            "and passes /host/run/systemd/private (default: none)",
        )
        parser.add_argument(
            "--healthz",
            default=HEALTHZ,
            help="the kubelet's health endpoint, asked after a restart (default: %(default)s)",
        )
        parser.add_argument(
            "--health-timeout",
            type=seconds,
            default=HEALTH_TIMEOUT,
            help="seconds the kubelet has to be healthy again (default: %(default)s)",
        )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")


def register(sub: Subcommands) -> None:
    agent = sub.add_parser(
        "agent",
        help="the fleet installer's node agent: plan, apply, uninstall, run (the chart's pod), "
        "ready, rollback",
        description="The node agent places the bundle in a versioned directory, links the plugins, "
        "writes or merges the kubelet's config (validated as the kubelet validates it first), sets "
        "the two kubelet flags in the platform's own place, and restarts the kubelet only when its "
        "config or flags changed. 'plan' shows what it would do and changes nothing; 'apply' and "
        "'uninstall' change this node; 'run' is what the chart's pod runs.",
    )
    actions = agent.add_subparsers(dest="action", metavar="ACTION", required=True)
    plan = actions.add_parser(
        "plan",
        help="what the agent would do on the node under --root; changes nothing",
        description="Exit 0: a plan (possibly nothing to do); 1: the agent would change nothing "
        "on this node, and says why and what to do instead; 2: usage, or a file this user may not "
        "read (no verdict: run it as root).",
    )
    _install_options(plan)
    _node_options(plan, changes=False)
    plan.set_defaults(handler=_cmd_plan)
    do = actions.add_parser(
        "apply",
        help="do what plan shows: place the bundle, link, write the config and flags, restart "
        "the kubelet only if they changed, and roll back if it is not healthy again",
        description="State is kept on the node (/var/lib/credprovider/agent/state.json): the "
        "files as they were before the first install, for uninstall. Exit 0: installed or "
        "nothing to do; 1: refused (nothing changed), rolled back, or a step failed; 2: usage, or a "
        "file this user may not read (nothing changed).",
    )
    do.add_argument("--bundle", required=True, help="the bundle directory to place (the image's)")
    _install_options(do)
    _node_options(do, changes=True)
    do.set_defaults(handler=_cmd_apply)
    undo = actions.add_parser(
        "uninstall",
        help="put every file, link and flag back as it was before the first install",
        description="Files someone else changed since the agent wrote them are reported and "
        "kept. Exit 0: the node is as it was; 1: a file was kept, or a step failed; 2: usage, or a "
        "file this user may not read (nothing changed).",
    )
    undo.add_argument(
        "--files-only",
        action="store_true",
        help="restart nothing (as apply --files-only); where the node had no config before, the "
        "bootstrap is left at --config and its plugin in --bin-dir, since the kubelet's flags, "
        "set at provisioning, name them (docs/fleet.md)",
    )
    _files_only_paths(undo)
    platform_option(undo)
    _node_options(undo, changes=True)
    undo.set_defaults(handler=_cmd_uninstall)
    run = actions.add_parser(
        "run",
        help="what the DaemonSet runs: apply (or, with --uninstall, uninstall), then stay until "
        "stopped",
        description="Exit 1 when apply or uninstall fails (the pod then shows it); otherwise it "
        "stays until SIGTERM and exits 0.",
    )
    run.add_argument("--bundle", required=True, help="the bundle directory to place (the image's)")
    run.add_argument(
        "--uninstall", action="store_true", help="put the node back instead of installing"
    )
    _install_options(run)
    _node_options(run, changes=True)
    cluster_options(run)
    run.set_defaults(handler=_cmd_run)
    back = actions.add_parser(
        "rollback",
        help="run by the node's systemd, not by hand: the rollback the agent arms before it "
        "restarts the kubelet",
        description="After --after seconds, if the change it was armed for is still unconfirmed "
        "(the agent died during the kubelet's health wait), put the kubelet's config and flags "
        "back as that change found them and restart the kubelet; otherwise do nothing. It waits "
        "for the node's lock, so it never acts while the agent does. Exit 0: done or nothing to "
        "do; 1: the files could not be put back.",
    )
    back.add_argument(
        "--root", default="/", help="where the node's filesystem is (default: %(default)s)"
    )
    back.add_argument(
        "--armed-as", required=True, help="the transient unit the agent armed (its own name)"
    )
    back.add_argument(
        "--after",
        type=seconds,
        default=0.0,
        help="seconds to wait first: the health wait and a grace (default: %(default)s)",
    )
    back.add_argument(
        "--systemd-socket",
        default=PRIVATE_SOCKET,
        help="systemd's private socket, to restart the kubelet (default: %(default)s)",
    )
    back.set_defaults(handler=_cmd_rollback)
    ready = actions.add_parser(
        "ready",
        help="the DaemonSet's readiness probe: exit 0 once 'run' passed its dry run",
        description="Exit 0 when --ready-file exists (run creates it after a dry-run credential "
        "request per provider passed); 1 otherwise.",
    )
    ready.add_argument("--ready-file", required=True, help="the file run --ready-file creates")
    ready.set_defaults(handler=cmd_ready)

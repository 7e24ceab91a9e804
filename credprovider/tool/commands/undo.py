"""``credprovider undo``: the last change install or migrate --write made, reversed from its record
(change/undo.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from credprovider.paths import NODE_CONFIG
from credprovider.tool.change.results import planned
from credprovider.tool.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Subcommands,
    absolute_path,
    cannot_check,
    node_default,
    node_failed,
    node_paths,
    print_json,
    said_finished,
)
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.access import FileProblem, UnreadableError, read_text
from credprovider.tool.node.root import HOST


def _cmd_undo(args: argparse.Namespace) -> int:
    if not args.config:
        args.config = node_default("undo", None, "--config", node_paths("undo"), bin_dir=False)
        if not args.config:
            return EXIT_USAGE
    from credprovider.tool.change.engine import ChangeKind
    from credprovider.tool.change.journal import by_hand

    try:
        with by_hand(args.config, "undo") as finished:
            said_finished(finished, "undo")
            if finished.change is ChangeKind.UNDO:  # finishing it was this run's undo
                print(f"undid the change recorded beside {args.config} (a killed undo, finished)")
                return EXIT_OK
            return _undo(args)
    except (NodeChangeError, FileProblem) as exc:
        print(f"credprovider undo: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except UnreadableError as exc:
        return cannot_check("undo", exc, args.json)
    except OSError as exc:
        return node_failed("undo", exc)


def _undo(args: argparse.Namespace) -> int:
    from credprovider.tool.agent.rewritten import agent_changed, agent_manages
    from credprovider.tool.change.undo import apply_undo, last_change, plan_undo

    anchor = Path(args.config)
    flags, version = _kubelet(args.kubelet_flags_file)  # a file given is read (and checked) first
    transaction = last_change(anchor)
    if transaction is None:
        agent = agent_changed(HOST)
        print(
            f"credprovider undo: nothing to undo: no change by install or migrate --write is "
            f"recorded beside {anchor} (an undone change is not kept)"
            + (f"; {agent}" if agent else ""),
            file=sys.stderr,
        )
        return EXIT_FAILED
    plan = plan_undo(anchor, transaction, flags, version)
    # the agent's next start would make its change again: never, not even with --force
    refused = agent_manages(HOST, [str(step.op.path) for step in plan.steps])
    refused = refused or plan.refusal(args.force)
    if args.json:
        print_json(
            {
                "change": str(plan.change),
                "steps": plan.said,
                "changedSince": plan.changed_since,
                "wouldNotStart": plan.would_not_start,
                "refused": refused or None,
                "done": not (refused or args.dry_run),
            }
        )
    if refused:
        print(f"credprovider undo: {refused}; nothing was changed", file=sys.stderr)
        return EXIT_FAILED
    if args.dry_run:
        if not args.json:
            print(f"would undo the {plan.change} recorded beside {anchor}:")
            for said in plan.said:
                print(f"  {planned(said)}")
        return EXIT_OK
    apply_undo(anchor, plan)
    if not args.json:
        print(f"undid the {plan.change} recorded beside {anchor}:")
        for said in plan.said:
            print(f"  {said}")
        print("restart the kubelet (systemctl restart kubelet) for it to read its files again")
    return EXIT_OK


def _kubelet(given: Sequence[str] | None) -> tuple[dict[str, list[str]], tuple[int, int] | None]:
    """The kubelet's flags by file (``given``: those files, else the ones it starts with next,
    found as doctor finds them) and its version, found as doctor finds it: the running kubelet's,
    else the installed binary's (``None``: it did not say, or has no version stamp)."""
    from credprovider.tool.node.discovery import discover, start_flags
    from credprovider.tool.node.flagfiles import flags_from_file
    from credprovider.tool.node.kubelet_facts import node_kubelet_version, stamped

    view = discover(HOST)
    version = stamped(node_kubelet_version(view.kubelet))
    if given:
        return {path: flags_from_file(read_text(path)).split() for path in given}, version
    return start_flags(view), version


def register(sub: Subcommands) -> None:
    undo = sub.add_parser(
        "undo",
        help="reverse the last change install or migrate --write made on this node",
        description=(
            "Put back, byte for byte, every file, link and bundle copy the last install or "
            "migrate --write changed beside --config, from the record that change left "
            "(.NAME.credprovider-undo beside the config): links re-pointed, files restored from "
            "their backups, what it created removed; one journaled transaction, like theirs (a "
            "killed undo is finished by the next install, migrate --write or undo). Only the last "
            "change is kept, and an undone change is not redone. Refused, with nothing changed, "
            "where a path was changed since (a hand edit, a later change), or where the kubelet "
            "would not start as the undo leaves it (an in-tree --cloud-provider its version "
            "refuses, flags naming a config the undo removes, a plugin taken away): --force undoes "
            "it all the same. A path the chart's agent manages now is left to it, even with "
            "--force. Exit 0: undone (or, with --dry-run, it would be); 1: refused or nothing to "
            "undo; 2: usage."
        ),
    )
    undo.add_argument(
        "--config",
        type=absolute_path,
        help="the credential provider config the change wrote (default: the kubelet's "
        f"--image-credential-provider-config on this node, found as doctor finds it, else "
        f"{NODE_CONFIG} if it exists)",
    )
    undo.add_argument(
        "--kubelet-flags-file",
        action="append",
        type=absolute_path,
        metavar="FILE",
        help="a file holding the kubelet's flags, to check that it starts as the undo leaves it "
        "(default: the files this node's kubelet takes its flags from, found as doctor finds "
        "them); repeatable",
    )
    undo.add_argument(
        "--dry-run", action="store_true", help="say what would be put back; change nothing"
    )
    undo.add_argument(
        "--force",
        action="store_true",
        help="undo even where a path was changed since, or where the kubelet would not start",
    )
    undo.add_argument("--json", action="store_true", help="one JSON object on stdout")
    undo.set_defaults(handler=_cmd_undo)

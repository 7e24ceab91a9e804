"""``credprovider undo``: the last change install or migrate --write made, reversed from its record
(change/undo.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from credprovider.paths import AGENT_HOME, NODE_CONFIG
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

if TYPE_CHECKING:
    from credprovider.tool.change.undo import UndoPlan


# What undo says where no change is recorded (then where it looked).
NOTHING_TO_UNDO: Final = (
    "nothing to undo (an undone change is not kept): no change by install, migrate --write or "
    "the chart's agent is recorded"
)


def _cmd_undo(args: argparse.Namespace) -> int:
    from credprovider.tool.agent.undo import agents_change_left

    if not args.config:
        node = node_paths("undo")
        if not (node.config or node.unreadable) and agents_change_left(HOST):
            # the agent's change, its flags put back by a killed undo: no config to find
            return _guarded(args, lambda: _agents_alone(args))
        args.config = node_default("undo", None, "--config", node, bin_dir=False)
        if not args.config:
            return EXIT_USAGE
    return _guarded(args, lambda: _by_hand(args))


def _guarded(args: argparse.Namespace, undo: Callable[[], int]) -> int:
    """``undo()``, its failures on the node each one line."""
    try:
        return undo()
    except (NodeChangeError, FileProblem) as exc:
        print(f"credprovider undo: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except UnreadableError as exc:
        return cannot_check("undo", exc, args.json)
    except OSError as exc:
        return node_failed("undo", exc)


def _agents_alone(args: argparse.Namespace) -> int:
    """The agent's change undone where no config is found (under the node's lock)."""
    from credprovider.tool.agent.undo import agents_change_there
    from credprovider.tool.change.lock import node_lock

    with node_lock(HOST, "credprovider undo"):
        if agents_change_there(HOST):
            return _undo_agents(args, *_kubelet(args.kubelet_flags_file))
    print(f"credprovider undo: {NOTHING_TO_UNDO} on this node", file=sys.stderr)
    return EXIT_FAILED


def _by_hand(args: argparse.Namespace) -> int:
    from credprovider.tool.change.engine import ChangeKind
    from credprovider.tool.change.journal import by_hand

    with by_hand(args.config, "undo") as finished:
        said_finished(finished, "undo")
        if finished.change is ChangeKind.UNDO:  # finishing it was this run's undo
            print(f"undid the change recorded beside {args.config} (a killed undo, finished)")
            return EXIT_OK
        return _undo(args)


def _undo(args: argparse.Namespace) -> int:
    from credprovider.tool.agent.rewritten import agent_manages
    from credprovider.tool.agent.undo import agents_change_there
    from credprovider.tool.change.undo import apply_undo, last_change, plan_undo

    anchor = Path(args.config)
    flags, version = _kubelet(args.kubelet_flags_file)  # a file given is read (and checked) first
    transaction = last_change(anchor)
    if transaction is None and agents_change_there(HOST):
        return _undo_agents(args, flags, version)
    if transaction is None:
        print(
            f"credprovider undo: {NOTHING_TO_UNDO} beside {anchor} or on this node",
            file=sys.stderr,
        )
        return EXIT_FAILED
    plan = plan_undo(anchor, transaction, flags, version)
    # the agent's next start would make its change again: never, not even with --force
    refused = agent_manages(HOST, [str(step.op.path) for step in plan.steps])
    refused = refused or plan.refusal(args.force)
    whose = f"the {plan.change} recorded beside {anchor}"
    stopped = _refused_or_planned(args, plan, refused, whose, [])
    if stopped is not None:
        return stopped
    apply_undo(anchor, plan)
    return _undone(args, plan, whose, [], "")


def _undo_agents(
    args: argparse.Namespace, flags: dict[str, list[str]], version: tuple[int, int] | None
) -> int:
    """The chart's agent's change on this node undone: its uninstall, nothing restarted
    (agent/undo.py), planned and refused as an undo of install's is."""
    from credprovider.tool.agent.undo import (
        STILL_SCHEDULED,
        WHOSE,
        apply_agent_undo,
        kept_line,
        plan_agent_undo,
    )

    found = plan_agent_undo(HOST, flags, version)
    plan = found.plan
    refused = plan.refusal(args.force)
    stopped = _refused_or_planned(args, plan, refused, WHOSE, list(map(kept_line, found.kept)))
    if stopped is not None:
        return stopped
    outcome = apply_agent_undo(HOST)
    return _undone(args, plan, WHOSE, [*map(kept_line, outcome.kept), *outcome.notes],
                   f"; {STILL_SCHEDULED}")  # fmt: skip


def _refused_or_planned(
    args: argparse.Namespace, plan: UndoPlan, refused: str, whose: str, kept: list[str]
) -> int | None:
    """A refused undo or a dry run said (``whose``: the change), and its exit status; ``None``:
    the undo goes ahead."""
    if args.json and (refused or args.dry_run):
        _print_plan(plan, refused, args.dry_run, kept)
    if refused:
        print(f"credprovider undo: {refused}; nothing was changed", file=sys.stderr)
        return EXIT_FAILED
    if not args.dry_run:
        return None
    if not args.json:
        print(f"would undo {whose}:")
        for said in plan.said + kept:
            print(f"  {planned(said)}")
    return EXIT_OK


def _undone(
    args: argparse.Namespace, plan: UndoPlan, whose: str, kept: list[str], then: str
) -> int:
    """A done undo said, ``then`` after the reminder to restart the kubelet."""
    if args.json:
        _print_plan(plan, None, False, kept)
        return EXIT_OK
    print(f"undid {whose}:")
    for said in plan.said + kept:
        print(f"  {said}")
    print(f"restart the kubelet (systemctl restart kubelet) for it to read its files again{then}")
    return EXIT_OK


def _print_plan(plan: UndoPlan, refused: str | None, dry_run: bool, kept: list[str]) -> None:
    """The undo's --json report (the same fields for a change by hand and the agent's)."""
    print_json(
        {
            "change": str(plan.change),
            "steps": plan.said,
            "changedSince": plan.changed_since,
            "wouldNotStart": plan.would_not_start,
            "kept": kept,
            "refused": refused or None,
            "done": not (refused or dry_run),
        }
    )


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
        help="reverse the last change install, migrate --write or the chart's agent made on "
        "this node",
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
            "--force. Where no change by hand is recorded and the chart's agent changed the node "
            f"(its state in {AGENT_HOME}), its change is undone: its uninstall, "
            "nothing restarted, checked and refused the same way (a file edited since the agent "
            "wrote it is kept); take the node out of the agent's nodeSelector first. Exit 0: "
            "undone (or, with --dry-run, it would be); 1: refused or nothing to undo; 2: usage."
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

"""What the ``credprovider`` subcommands share: exit codes, JSON output, masking, node defaults."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from credprovider.errors import CredproviderError
from credprovider.paths import NODE_BIN_DIR, NODE_CONFIG
from credprovider.runtime.excerpt import quoted
from credprovider.runtime.nodefile import special_kind
from credprovider.runtime.redact import redact
from credprovider.tool.catalog import PLUGINS, not_known, provider_keys
from credprovider.tool.change.results import Step
from credprovider.tool.errors import EXIT_FAILED as EXIT_FAILED
from credprovider.tool.errors import EXIT_OK as EXIT_OK
from credprovider.tool.errors import EXIT_USAGE as EXIT_USAGE
from credprovider.tool.errors import node_failure
from credprovider.tool.node.root import NodeRoot

if TYPE_CHECKING:
    import argparse

    from credprovider.tool.change.journal import Finished
    from credprovider.tool.node.discovery import NodePaths, NodeView

# What validate's exit status means: the one text --help, the README and docs/operators.md give
# (tests/unit/test_docs.py holds them to it).
VALIDATE_EXIT_STATUS: Final = (
    "Exit 0: no errors (the kubelet would start with this config, and with --bin-dir every "
    "provider's binary runs); 1: errors (the kubelet refuses the config, or a provider can never "
    "run); 2: no verdict (a usage error, or a file this user may not read). Warnings never change "
    "the exit status."
)
# What each command changes on the node: one text for credprovider --help, README and the docs.
WHAT_CHANGES: Final = (
    "Only install, migrate --write, undo, agent apply and agent uninstall change anything on the node; "
    "doctor, validate, get, explain, "
    "match, migrate without --write and agent plan only read, render only prints (doctor and get run the plugins "
    "with their cache read-only)."
)

# What build_parser hands each command's register().
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

# The examples in --help: the first plugin's first registry form and pattern.
EXAMPLE: Final = next(iter(PLUGINS.values()))
EXAMPLE_IMAGE: Final = next(iter(EXAMPLE.sample_images.values()))
EXAMPLE_PATTERN: Final = EXAMPLE.match_images[0]


# The longest wait any command's seconds option takes: a day.
MAX_SECONDS: Final = 86_400.0


def seconds(text: str) -> float:
    """A seconds option (argparse ``type``): a finite number from 0 to a day; ``nan``, ``inf``
    and negative ones are usage errors (a wait that never ends, or a loop that never waits)."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{quoted(text)} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 <= value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"{quoted(text)}: give seconds from 0 to {MAX_SECONDS:g} (a day)"
        )
    return value


# The current directory removed since the shell entered it (``getcwd`` fails).
CWD_GONE: Final = (
    "the current directory no longer exists (removed since this shell entered it), so no "
    "relative path can be read: cd to a directory that exists"
)


def absolute_path(text: str) -> str:
    """A path option of a change (argparse ``type``) made absolute against this directory: the
    kubelet runs from ``/`` and resolves a relative flag from there, and a journal holds
    absolute paths only (change/confine.py). An empty one stays empty, for the command to say."""
    try:
        return os.path.abspath(text) if text else text
    except FileNotFoundError:  # relative, and this directory was removed since the shell entered
        import argparse

        raise argparse.ArgumentTypeError(f"{quoted(text)} is relative, and {CWD_GONE}") from None


def node_path(text: str) -> str:
    """A path as the node names it, under ``--root`` (argparse ``type``): absolute, as the
    kubelet's flag names it; a relative one is a usage error (this directory is not the node's)."""
    import argparse

    if not os.path.isabs(text):
        raise argparse.ArgumentTypeError(
            f"{quoted(text)} is relative: give the path as the kubelet's flag names it, from /"
        )
    return text


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False))


def mask(password: str, show: bool) -> str:
    return password if show else redact(password)


def node_paths(command: str, view: NodeView | None = None) -> NodePaths:
    """What this node's kubelet uses (node/discovery.py ``kubelet_paths``; ``view``: what
    discovery already found). Each process named kubelet that discovery would not trust is said
    on stderr, one line each."""
    from credprovider.tool.node.discovery import kubelet_paths

    node = kubelet_paths(view=view)
    for line in node.ignored:
        print(f"credprovider {command}: {line}", file=sys.stderr)
    return node


def node_default(
    command: str, given: str | None, flag: str, node: NodePaths, *, bin_dir: bool
) -> str | None:
    """``given``, else the bin dir (``bin_dir``) or config the node uses, said on stderr with
    where it came from; ``None`` (and one line) if neither."""
    if given:
        return given
    found = node.bin_dir if bin_dir else node.config
    if found:
        print(f"credprovider {command}: {flag} {found} ({node.found_by})", file=sys.stderr)
        return found
    if node.unreadable:  # where the kubelet's flags are is hidden from this user: no guess
        print(f"credprovider {command}: {node.unreadable[0]}", file=sys.stderr)
        return None
    print(
        f"credprovider {command}: give {flag} (no running kubelet, kubelet flag file or known "
        f"layout names one, and nothing is at the default "
        f"{NODE_BIN_DIR if bin_dir else NODE_CONFIG})",
        file=sys.stderr,
    )
    return None


def step_json(step: Step) -> dict[str, Any]:
    """A planned or done step as ``--json`` prints it (install's and migrate's ``changes``)."""
    return {"action": step.action, "path": step.path, "detail": step.detail,
            "refused": step.refused, "backup": step.backup}  # fmt: skip


def node_root(args: Any) -> NodeRoot:
    """``--root`` as the value every package takes: where the node's filesystem is."""
    return NodeRoot.at(args.root)


def wrong_kind(path: str, *, directory: bool) -> str:
    """Why what is at ``path`` cannot be the directory (``directory``) or regular file an option
    wants: '' if it is, or if nothing is there yet (install and migrate make a bin dir; a cloud's
    agent writes azure.json later)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return ""
    except (OSError, ValueError) as exc:
        return f"cannot be checked: {getattr(exc, 'strerror', None) or exc}"
    if directory:
        return (
            ""
            if stat.S_ISDIR(mode)
            else f"is {special_kind(mode) or 'a regular file'}, not a directory"
        )
    kind = special_kind(mode)
    return f"is {kind}, not a regular file" if kind else ""


def cannot_check(command: str, exc: Exception, as_json: bool = False) -> int:
    """No verdict: this user may not read something the kubelet would. One line (and, with
    ``--json``, one object saying so); exit status 2."""
    if as_json:
        print_json({"verdict": None, "error": str(exc)})
    print(f"credprovider {command}: {exc}", file=sys.stderr)
    return EXIT_USAGE


def said_finished(finished: Finished, command: str) -> None:
    """The change an install, migrate --write or undo left part done (killed, or stopped by a
    failure since mended), which this run finished first (``change.journal.by_hand``), said on
    stderr."""
    if finished.ops:
        print(
            f"credprovider {command}: finished the change an earlier run left part done: "
            f"{', '.join(str(op.path) for op in finished.ops)}",
            file=sys.stderr,
        )


def node_failed(command: str, exc: Exception) -> int:
    """The one line for a change by hand that failed on the node (``tool.errors.node_failure``),
    headed ``credprovider COMMAND:``; exit status 1."""
    assert isinstance(exc, OSError | CredproviderError)
    print(f"credprovider {command}: {node_failure(exc)}", file=sys.stderr)
    return EXIT_FAILED


def chosen_providers(args: Any, command: str) -> list[str] | None:
    """--providers as catalog keys, and --provider-settings parsed into ``args.settings``; None
    (and one line, headed ``credprovider COMMAND:``) when either is not what they take (agent
    and render share these two options)."""
    from credprovider.tool.change.settings import SettingsError, parse

    keys = provider_keys(args.providers)
    if not_known(keys):
        print(f"credprovider {command}: {not_known(keys)}", file=sys.stderr)
        return None
    try:
        args.settings = parse(args.provider_settings, keys)
    except SettingsError as exc:
        print(f"credprovider {command}: {exc}", file=sys.stderr)
        return None
    return keys

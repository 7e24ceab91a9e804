"""``credprovider install``: the plugin names in a bin dir and a validated config."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from credprovider.entry import SUFFIXED_FORM
from credprovider.paths import NODE_BIN_DIR, NODE_CONFIG
from credprovider.tool.catalog import (
    DEFAULT_KEYS,
    PLUGINS,
    not_known,
    plugin_for_name,
    provider_keys,
)
from credprovider.tool.change.results import Action, Step
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
    step_json,
    wrong_kind,
)
from credprovider.tool.errors import NodeChangeError, node_failure
from credprovider.tool.node.access import FileProblem, UnreadableError
from credprovider.tool.node.layouts import KUBEADM_FLAGS_ENV
from credprovider.tool.node.root import HOST

if TYPE_CHECKING:
    from credprovider.tool.change.install import InstallPlan
    from credprovider.tool.node.discovery import NodeView


class _Node:
    """This node's kubelet as discovery finds it, found once in a run and only when asked (for a
    default path, whether it takes tokenAttributes, whether its flags name what was installed):
    every decision of the run is made on one reading of the node."""

    def __init__(self) -> None:
        self._view: NodeView | None = None

    @property
    def view(self) -> NodeView:
        if self._view is None:
            from credprovider.tool.node.discovery import discover

            self._view = discover()
        return self._view


def _cmd_install(args: argparse.Namespace) -> int:
    found = _Node()
    if not (args.bin_dir and args.config_out):
        node = node_paths("install", found.view)
        args.bin_dir = node_default("install", args.bin_dir, "--bin-dir", node, bin_dir=True)
        if node.config and os.path.isdir(node.config) and not args.config_out:
            print(
                f"credprovider install: give --config-out (the kubelet reads the directory "
                f"{node.config}: name the file in it to write)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        args.config_out = node_default(
            "install", args.config_out, "--config-out", node, bin_dir=False
        )
        if not (args.bin_dir and args.config_out):
            return EXIT_USAGE
    keys = provider_keys(args.providers)
    if args.as_name is None and not_known(keys):
        print(f"credprovider install: {not_known(keys)}", file=sys.stderr)
        return EXIT_USAGE
    if args.as_name is not None:
        plugin = plugin_for_name(args.as_name)
        if plugin is None or plugin.name == args.as_name or "/" in args.as_name:
            print(
                f"credprovider install: --as {args.as_name!r} is not a plugin name with a suffix: "
                f"give {SUFFIXED_FORM}, e.g. {next(iter(PLUGINS.values())).name}-prod",
                file=sys.stderr,
            )
            return EXIT_USAGE
        keys = [plugin.key]
    from credprovider.tool.change.settings import SettingsError, parse

    try:
        args.settings = parse(args.provider_settings, keys)
    except SettingsError as exc:
        print(f"credprovider install: {exc}", file=sys.stderr)
        return EXIT_USAGE
    node_files = {
        plugin.key: path
        for plugin in _TAKING_A_NODE_FILE
        if (path := getattr(args, _node_file_dest(plugin.key)))
    }
    for key, path in node_files.items():
        # The plugin reads it on every pull: what is there must be a regular file.
        problem = wrong_kind(path, directory=False)
        if problem:
            print(
                f"credprovider install: nothing was changed: --{key}-config {path} {problem}: "
                "the plugin reads it on every pull",
                file=sys.stderr,
            )
            return EXIT_FAILED

    if args.dry_run:  # nothing changed: no lock, and a killed run's change is only said
        return _plan_and_apply(args, keys, node_files, found)
    from credprovider.tool.change.journal import by_hand

    try:  # the node read and changed by this run alone (change/lock.py)
        with by_hand(args.config_out, "install") as finished:
            said_finished(finished, "install")
            return _plan_and_apply(args, keys, node_files, found)
    except (NodeChangeError, OSError) as exc:  # OSError: finishing a killed run's change
        return node_failed("install", exc)
    except UnreadableError as exc:  # a killed change of root's, read by another user
        return cannot_check("install", exc)


def _plan_and_apply(
    args: argparse.Namespace, keys: list[str], node_files: dict[str, str], found: _Node
) -> int:
    from credprovider.tool.change.install import plan_install
    from credprovider.tool.change.install_apply import apply_install

    try:
        plan = plan_install(
            args.bin_dir,
            args.config_out,
            keys,
            node_files,
            args.copy,
            args.force,
            args.target,
            as_name=args.as_name,
            settings=args.settings,
            sa_tokens=_takes_token_attributes(args.settings, found),
            config_directory=_config_directory(args.config_out, found),
        )
    except UnreadableError as exc:
        return cannot_check("install", exc, args.json)
    except NodeChangeError as exc:
        print(f"credprovider install: {exc}", file=sys.stderr)
        return EXIT_FAILED
    fights = _agents(plan.changes)
    if fights:
        print(f"credprovider install: nothing was changed: {fights}", file=sys.stderr)
        return EXIT_FAILED
    if args.dry_run and not plan.refused:
        return _would(plan, args.json, keys, found)
    if plan.refused:
        _report(plan.changes, args.json, applied=False)
        print(
            f"credprovider install: nothing was changed: {len(plan.refused)} step(s) refused "
            f"(first: {plan.refused[0].describe()})",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        apply_install(plan)
    except (OSError, FileProblem, NodeChangeError) as exc:
        # failed part way: put back (change/abort.py), or, failing that, said so
        said = node_failure(exc) if isinstance(exc, OSError) else str(exc)
        print(f"credprovider install: {said}", file=sys.stderr)
        return EXIT_FAILED
    return _after(plan, args.json, keys, found)


def _takes_token_attributes(settings: Mapping[str, Mapping[str, object]], found: _Node) -> bool:
    """Whether this node's kubelet takes the ``tokenAttributes`` the settings give (a kubelet
    1.33 without its gate refuses the config, and would not start); asked only when they do."""
    if not any("tokenAttributes" in fields for fields in settings.values()):
        return True
    from credprovider.tool.node.discovery import takes_token_attributes_here

    return takes_token_attributes_here(found.view)


def _agents(changes: list[Step]) -> str:
    """Why the change would fight the chart's agent on this node ("": it would not)."""
    from credprovider.tool.agent.rewritten import agent_manages

    return agent_manages(HOST, [str(s.path) for s in changes if s.action is not Action.UNCHANGED])


def _after(plan: InstallPlan, as_json: bool, keys: list[str], found: _Node) -> int:
    """Check what was installed as validate --bin-dir does, and report."""
    from credprovider.tool.change.render import kubelet_flags
    from credprovider.tool.images.bindir import check_binaries, texts
    from credprovider.tool.kubeconfig.lint import lint_providers
    from credprovider.tool.kubeconfig.validate import load_config

    loaded = load_config(str(plan.kubelet_reads))
    checked = check_binaries(loaded, str(plan.bin_dir))
    warnings = texts(checked.warnings) + lint_providers(loaded, str(plan.bin_dir))
    flags = kubelet_flags(str(plan.kubelet_reads.resolve()), str(plan.bin_dir.resolve()))
    errors, proven = texts(checked.errors), texts(checked.proven)
    in_place = _flags_in_place(plan, found)
    where = "" if in_place else _kubeadm_sets_them(plan, keys)
    _report(plan.changes, as_json, True, errors, warnings, proven, flags, in_place, where)
    return EXIT_FAILED if checked.errors else EXIT_OK


def _would(plan: InstallPlan, as_json: bool, keys: list[str], found: _Node) -> int:
    """What install would do (--dry-run): each step, a change a killed run left to finish first,
    and the kubelet flags that would name the install."""
    from credprovider.tool.change.journal import pending
    from credprovider.tool.change.journalformat import journal_for
    from credprovider.tool.change.render import kubelet_flags

    try:
        left = pending(plan.config_out)
    except NodeChangeError as exc:  # install would refuse to go on past it
        print(f"credprovider install: {exc}", file=sys.stderr)
        return EXIT_FAILED
    flags = kubelet_flags(str(plan.kubelet_reads.absolute()), str(plan.bin_dir.absolute()))
    in_place = _flags_in_place(plan, found)
    journal = journal_for(plan.config_out)
    if as_json:
        print_json(
            {
                "applied": False,
                "dryRun": True,
                "changes": [step_json(change) for change in plan.changes],
                "finishesFirst": str(journal) if left else None,
                "kubeletFlags": flags,
                "kubeletFlagsSetBy": in_place or None,
            }
        )
        return EXIT_OK
    print("install would (nothing was changed):")
    if left:
        print(
            f"  first finish the {left[0]} an earlier run left part done ({left[1]} step(s) "
            f"left, journaled in {journal})"
        )
    for change in plan.changes:
        print(f"  {change.describe(applied=False)}")
    if in_place:
        print(f"the kubelet's flags already name this config and bin dir ({in_place})")
    else:
        where = _kubeadm_sets_them(plan, keys)
        print("then add to the kubelet's flags:" + "".join(f"\n  {flag}" for flag in flags))
        if where:
            print(f"  (kubeadm: {where} sets them)")
    return EXIT_OK


def _report(
    changes: list[Step],
    as_json: bool,
    applied: bool,
    errors: list[str] | None = None,
    warnings: list[str] | None = None,
    checked: list[str] | None = None,
    flags: list[str] | None = None,
    in_place: str = "",
    where: str = "",
) -> None:
    """Each step, then what was checked; ``flags``: the kubelet flags that name the install,
    ``in_place``: where the node's kubelet is already given them ("": it is not); ``where``: the
    command that sets them ("": none to name)."""
    if as_json:
        print_json(
            {
                "applied": applied,
                "changes": [step_json(change) for change in changes],
                "errors": errors or [],
                "warnings": warnings or [],
                "checked": checked or [],
                "kubeletFlags": flags or [],
                "kubeletFlagsSetBy": in_place or None,
            }
        )
        return
    for change in changes:
        said = change.describe(applied)
        print(
            f"not done (a step was refused): {said}"
            if change.would_change and not applied
            else said
        )
    for line in checked or []:
        print(f"checked: {line}")
    for error in errors or []:
        print(f"error: {error}")
    for warning in warnings or []:
        print(f"warning: {warning}")
    if flags and in_place:
        print(f"the kubelet's flags already name this config and bin dir ({in_place})")
    elif flags:
        print("add to the kubelet's flags:")
        for flag in flags:
            print(f"  {flag}")
        if where:
            print(
                f"  (kubeadm: {where} sets them in the file its drop-in reads; then restart the kubelet)"
            )


def _kubeadm_sets_them(plan: InstallPlan, keys: list[str]) -> str:
    """On kubeadm, the migrate --write that sets the flags in the file its drop-in reads (checked
    first, as migrate checks); elsewhere "" (where they go is the platform's)."""
    if not os.path.lexists(KUBEADM_FLAGS_ENV):
        return ""
    return shlex.join(
        ["credprovider", "migrate", "--kubelet-flags-file", KUBEADM_FLAGS_ENV, "--providers",
         ",".join(keys), "--bin-dir", str(plan.bin_dir), "--config-out", str(plan.config_out),
         "--write"]
    )  # fmt: skip


def _config_directory(config_out: str, found: _Node) -> str | None:
    """The config directory this node's kubelet reads (1.34+), when ``config_out`` is a file in
    it: the kubelet reads the others beside it."""
    from credprovider.tool.node.discovery import kubelet_paths

    config = kubelet_paths(view=found.view).config
    if config is None or not os.path.isdir(config):
        return None
    inside = os.path.realpath(os.path.dirname(config_out)) == os.path.realpath(config)
    return config if inside else None


def _flags_in_place(plan: InstallPlan, found: _Node) -> str:
    """Where this node's kubelet is already given the installed config and bin dir (discovery's
    source: its running command line, a flags file, a layout), or "" when it is not."""
    from credprovider.tool.node.discovery import kubelet_paths

    node = kubelet_paths(view=found.view)
    if node.config is None or node.bin_dir is None or node.found_by == "the default path":
        return ""
    same = os.path.realpath(node.config) == os.path.realpath(plan.kubelet_reads) and (
        os.path.realpath(node.bin_dir) == os.path.realpath(plan.bin_dir)
    )
    return node.found_by if same else ""


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
            "bundle into DIR/.credprovider and link to the copy), write a "
            "CredentialProviderConfig with complete matchImages, check it as validate --bin-dir "
            "does (each plugin is started offline), and print the kubelet flags. All or nothing: "
            "every step is planned first (the config checked as the kubelet checks it, each "
            "plugin started with its args and env), and if any is refused nothing is changed. "
            "Links into another credprovider bundle (and an earlier --copy) are upgrades and need"
            " no --force; anything else that would be replaced needs --force, which keeps it as "
            "NAME.credprovider-backup-TIMESTAMP. A path the chart's agent manages on this node is"
            " never changed (its values are the place). Idempotent; --dry-run says what it would "
            "do. A run that fails part way (a full disk, a read-only file) puts back what it did. "
            "Exit 0: installed and every plugin starts; 1: refused (nothing changed) or a check "
            "failed; 2: usage, or a path this user may not read."
        ),
    )
    inst.add_argument(
        "--bin-dir",
        type=absolute_path,
        help="the kubelet's --image-credential-provider-bin-dir (default: the one this node's "
        f"kubelet uses, found as doctor finds it, else {NODE_BIN_DIR} if it exists)",
    )
    inst.add_argument(
        "--config-out",
        type=absolute_path,
        help="the config file to write (default: the kubelet's --image-credential-provider-config "
        f"on this node, found the same way, else {NODE_CONFIG} if it exists)",
    )
    inst.add_argument(
        "--providers",
        default=",".join(DEFAULT_KEYS),
        help=f"comma list of {', '.join(PLUGINS)} (default: %(default)s)",
    )
    for plugin in _TAKING_A_NODE_FILE:
        inst.add_argument(
            f"--{plugin.key}-config",
            dest=_node_file_dest(plugin.key),
            type=absolute_path,
            help=f"the node file passed to {plugin.name} (default: {plugin.node_file_arg})",
        )
    inst.add_argument(
        "--provider-settings",
        default="",
        help="JSON, per provider key, of matchImages, args, env, defaultCacheDuration or "
        "tokenAttributes replacing the defaults, as the chart's providerSettings; the registries "
        "plugin needs its own matchImages, args and tokenAttributes here (docs/registries.md) "
        "(default: none)",
    )
    inst.add_argument(
        "--as",
        dest="as_name",
        metavar="NAME",
        help=f"add one more provider of a plugin under NAME, {SUFFIXED_FORM} (e.g. "
        f"{next(iter(PLUGINS.values())).name}-prod), for another identity (other args, env or node file): "
        "its link in the bin dir, and its entry added to the config, whose other providers are "
        "kept (default: none; --providers is then ignored)",
    )
    inst.add_argument(
        "--copy", action="store_true", help="copy the bundle instead of linking to it"
    )
    inst.add_argument(
        "--force",
        action="store_true",
        help="replace files and links that are not credprovider's (each is kept as a backup)",
    )
    inst.add_argument(
        "--target",
        type=absolute_path,
        help="the credprovider executable to link to (default: this one)",
    )
    inst.add_argument(
        "--dry-run",
        action="store_true",
        help="say what install would do, checked as it checks before it changes anything (the "
        "config as the kubelet checks it, each plugin started offline), and change nothing; "
        "exit 0: it would install, 1: a step would be refused",
    )
    inst.add_argument("--json", action="store_true", help="one JSON object on stdout")
    inst.set_defaults(handler=_cmd_install)

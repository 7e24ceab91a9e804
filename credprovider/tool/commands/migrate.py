"""``credprovider migrate``: from a kubelet's in-tree cloud login to these plugins."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import TYPE_CHECKING, Final

from credprovider.paths import NODE_BIN_DIR, NODE_CONFIG
from credprovider.tool.catalog import DEFAULT_KEYS, PLUGINS, not_known, provider_keys
from credprovider.tool.change.results import Action
from credprovider.tool.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Subcommands,
    absolute_path,
    cannot_check,
    node_failed,
    print_json,
    said_finished,
    step_json,
    wrong_kind,
)
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.kubeconfig.model import ConfigError, read_config
from credprovider.tool.node.access import FileProblem, UnreadableError, read_text
from credprovider.tool.node.layouts import KUBEADM_FLAGS_ENV
from credprovider.tool.node.root import HOST
from credprovider.tool.node.units import extra_args_files

if TYPE_CHECKING:
    from credprovider.tool.change.migrate import ExistingConfig, MigrationPlan


def _cmd_migrate(args: argparse.Namespace) -> int:
    if not (args.kubelet_flags or args.kubelet_flags_file or args.kubelet_config):
        print(
            "credprovider migrate: nothing to read: give the kubelet's flags "
            '(--kubelet-flags="..." or --kubelet-flags-file /var/lib/kubelet/kubeadm-flags.env) '
            "and/or --kubelet-config FILE",
            file=sys.stderr,
        )
        return EXIT_USAGE
    problem = wrong_kind(args.bin_dir, directory=True) if args.bin_dir else ""
    if problem:
        print(
            f"credprovider migrate: nothing was changed: --bin-dir {args.bin_dir} {problem}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    providers = provider_keys(args.providers) if args.providers else None
    if providers is not None and not_known(providers):
        print(f"credprovider migrate: {not_known(providers)}", file=sys.stderr)
        return EXIT_USAGE
    opt_in = [key for key in providers or [] if PLUGINS[key].opt_in]
    if opt_in:
        print(
            f"credprovider migrate: --providers {opt_in[0]}: {PLUGINS[opt_in[0]].name} names no "
            "registry of its own, so migrate (the in-tree clouds' move) cannot write its entry: "
            f"install it with its settings (credprovider install --providers {opt_in[0]} "
            "--provider-settings JSON, docs/registries.md)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if not args.write:
        return _migrate(args, providers)

    from credprovider.tool.change.journal import by_hand

    try:  # the node read and changed by this run alone (change/lock.py)
        with by_hand(args.config_out, "migrate --write") as finished:
            said_finished(finished, "migrate")
            return _migrate(args, providers)
    except (NodeChangeError, OSError) as exc:  # OSError: finishing a killed run's change
        return node_failed("migrate", exc)
    except UnreadableError as exc:  # a killed change of root's, read by another user
        return cannot_check("migrate", exc)


def _migrate(args: argparse.Namespace, providers: list[str] | None) -> int:
    from credprovider.tool.agent.rewritten import agent_manages
    from credprovider.tool.change.migrate import plan_migration
    from credprovider.tool.change.migrate_write import (
        check_places,
        config_unchanged,
        refusal,
        steps,
        write,
    )

    try:
        given = list(args.kubelet_flags_file or [])
        flag_files = {path: read_text(path) for path in given} | _kubeadm_extra_args(given)
        config_text = read_text(args.kubelet_config) if args.kubelet_config else ""
        plan = plan_migration(
            args.kubelet_flags,
            config_text,
            args.bin_dir,
            args.config_out,
            providers,
            flag_files=flag_files,
            kubelet_config_path=args.kubelet_config,
            read_existing=_existing_config,
        )
        plan.config_unchanged = config_unchanged(plan, args.config_out)  # decided before writing
        refused = refusal(plan, args.config_out) if args.write else None
        if args.write and not refused:
            refused = agent_manages(
                HOST,
                [s.path for s in steps(plan, args.config_out) if s.action is not Action.UNCHANGED],
            )
        if args.write and not refused:
            check_places(plan, args.config_out)
            from credprovider.tool.change.startcheck import migration_would_not_start

            refused = migration_would_not_start(plan, args.config_out)
    except (NodeChangeError, FileProblem, ConfigError) as exc:
        print(f"credprovider migrate: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except UnreadableError as exc:
        return cannot_check("migrate", exc, args.json)
    if refused:
        print(f"credprovider migrate: {refused}: nothing was written", file=sys.stderr)
        return EXIT_FAILED
    try:
        written = write(plan, args.config_out) if args.write else []
    except (OSError, NodeChangeError) as exc:  # failed part way: put back (change/abort.py)
        return node_failed("migrate", exc)
    if args.json:
        print_json(
            {
                "providers": plan.providers,
                "removeFlags": plan.remove,
                "addFlags": plan.add,
                "config": plan.config,
                "binDir": plan.bin_dir,
                "install": plan.install_args(args.config_out) if plan.providers else [],
                "files": plan.files,
                "written": written,
                "applied": bool(args.write),
                "changes": [
                    step_json(step)
                    for step in steps(
                        plan,
                        args.config_out,
                        {w["path"]: w["backup"] for w in written if "backup" in w},
                    )
                ],
                "notes": plan.notes,
            }
        )
        return EXIT_OK
    originals = {
        **flag_files,
        **({args.kubelet_config: config_text} if args.kubelet_config else {}),
    }
    _print_plan(plan, args.config_out, originals, written)
    return EXIT_OK


def _kubeadm_extra_args(paths: list[str]) -> dict[str, str]:
    """With kubeadm's own flags file among ``paths``, the distribution's file that kubeadm's
    drop-in passes after it (KUBELET_EXTRA_ARGS) and its text: the one the kubelet's unit names
    ("" where it is not there yet), else the first there. A cloud flag left there would override
    the change, and the new flags belong there (kubeadm writes its own file anew)."""
    if KUBEADM_FLAGS_ENV not in paths:
        return {}
    named = extra_args_files(str)
    if len(named) == 1 and named[0] not in paths and not os.path.lexists(named[0]):
        return {named[0]: ""}
    there = [p for p in named if p not in paths and os.path.isfile(p)]
    return {path: read_text(path) for path in there[:1]}


def _existing_config(path: str) -> ExistingConfig:
    """The credential provider config at ``path``, read as the kubelet reads it."""
    from credprovider.tool.change.migrate import ExistingConfig

    try:
        loaded = read_config(path)
    except ConfigError as exc:
        raise ConfigError(
            f"the kubelet's current credential provider config cannot be merged: {exc}; fix it "
            "(credprovider validate shows what the kubelet says) and run migrate again"
        ) from None
    from credprovider.tool.change.render import written_as_json

    try:
        as_json = os.path.isfile(path) and written_as_json(read_text(path))
    except FileProblem:
        as_json = False
    return ExistingConfig(
        path,
        [provider.model_dump(exclude_none=True) for provider in loaded.providers],
        [str(source) for source in loaded.provider_sources],
        as_json,
    )


def _print_plan(
    plan: MigrationPlan,
    config_out: str,
    originals: dict[str, str],
    written: list[dict[str, str]],
) -> None:
    import difflib

    from credprovider.tool.change.migrate_write import comments_lost

    done = {item["path"]: item.get("backup") for item in written}
    if plan.remove:
        print("remove from the kubelet:")
        for flag in plan.remove:
            print(f"  {flag}")
    if plan.add:
        print("add to the kubelet:")
        for flag in plan.add:
            print(f"  {flag}")
    for path, text in plan.files.items():
        print(f"{'edited' if path in done else 'edit'} {path}:")
        before = originals.get(path, "").splitlines(keepends=True)
        for line in difflib.unified_diff(before, text.splitlines(keepends=True), path, path):
            print(f"  {line.rstrip(chr(10))}")
    install = shlex.join(["credprovider", *plan.install_args(config_out)])
    if plan.config and plan.config_unchanged:
        print(
            f"unchanged {config_out}: it already has these providers (put the plugins in "
            f"{plan.bin_dir}: {install})"
        )
    elif plan.config:
        lost = comments_lost(config_out, done.get(config_out))
        print(
            f"{'wrote' if config_out in done else 'write'} {config_out} ("
            + (f"{lost}; " if lost else "")
            + f"and put the plugins in {plan.bin_dir}: {install}):"
        )
        print(plan.config)
    for path, backup in done.items():
        if backup:
            print(f"kept the old {path} as {backup}")
    if plan.files and not written:
        print("nothing was written: --write makes these changes (each file's old text kept)")
    for note in plan.notes:
        print(f"note: {note}")


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
            + "removed feature gates, the credential provider flags it has) and print the flags "
            "to remove and add, each flags file as it will read, and the CredentialProviderConfig "
            "to write (reusing the node files the old flags name, and merging the config the "
            "kubelet runs today). Nothing changes without --write."
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
        type=absolute_path,
        metavar="FILE",
        help="a file holding the kubelet's flags: kubeadm's /var/lib/kubelet/kubeadm-flags.env, "
        "/etc/default/kubelet, /etc/sysconfig/kubelet, or a systemd unit or drop-in "
        "(Environment= and ExecStart=); repeatable",
    )
    migrate.add_argument("--kubelet-config", type=absolute_path, help="a KubeletConfiguration file")
    migrate.add_argument(
        "--providers",
        metavar="LIST",
        help=f"the clouds to configure, comma-separated ({', '.join(DEFAULT_KEYS)}): needed with "
        "--cloud-provider=external, which does not say the cloud; default: what the flags say",
    )
    migrate.add_argument(
        "--bin-dir",
        type=absolute_path,
        help="the plugin bin dir for the flags to add (default: the kubelet's current "
        f"--image-credential-provider-bin-dir, where its plugins are, else {NODE_BIN_DIR})",
    )
    migrate.add_argument(
        "--config-out",
        type=absolute_path,
        default=NODE_CONFIG,
        help="where the config will be written, for the flags to add (default: %(default)s). "
        "A config the kubelet is given today is merged into it: its providers first, their names "
        "kept, conflicts reported",
    )
    migrate.add_argument(
        "--write",
        action="store_true",
        help="make the changes: rewrite each --kubelet-flags-file and --kubelet-config in place "
        "and write --config-out, each by rename, the old text kept as "
        "NAME.credprovider-backup-TIMESTAMP (default: print them only). A --config-out that is "
        "neither the kubelet's current config nor credprovider's is never replaced, nor a path "
        "the chart's agent manages on this node, nor a file that is a link (give its target "
        "instead)",
    )
    migrate.add_argument("--json", action="store_true", help="one JSON object on stdout")
    migrate.set_defaults(handler=_cmd_migrate)

"""What ``migrate --write`` does with a plan (change/migrate.py): whether it may replace the file
at ``--config-out``, what it writes (told as install's steps: :func:`steps`), and the writing
itself, as one journaled transaction of the node-change engine, so that a run killed between two
files is finished by the next migrate --write or install. ``commands/migrate.py`` parses and
prints."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from credprovider.tool.change.engine import BACKUP_SUFFIX, ChangeKind, Kind, Op, backup_stamp
from credprovider.tool.change.install import check_writable
from credprovider.tool.change.journal import run
from credprovider.tool.change.journalformat import journal_for
from credprovider.tool.change.merge import config_mode, dropped_comments, holds_providers
from credprovider.tool.change.migrate import MigrationPlan
from credprovider.tool.change.render import WRITTEN_BY
from credprovider.tool.change.results import Action, Step
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.access import (
    FileProblem,
    UnreadableError,
    link_target,
    read_bytes,
    read_text,
)
from credprovider.tool.node.trust import place_problem


def refusal(plan: MigrationPlan, config_out: str) -> str | None:
    """Why --write must not write what it plans: a file it writes is a link (into config
    management's tree, say), which writing would replace with a file; or ``config_out`` is
    someone else's file."""
    for path in contents(plan, config_out):
        if os.path.islink(path):
            target = link_target(path)
            return (
                f"{path} is a link to {target}, which writing would replace with a file (what the "
                f"link points to would no longer reach the kubelet): give {target} in its place "
                "to change that file instead"
            )
    out = Path(config_out)
    if not plan.config or not (out.exists() or out.is_symlink()):
        return None
    existing = plan.existing
    ours = existing is not None and _same(config_out, [existing.path, *existing.sources])
    try:
        text = read_text(config_out)
    except FileProblem as exc:
        return f"{config_out} exists and cannot be read ({exc.reason}): choose another --config-out"
    if ours or text.startswith(WRITTEN_BY) or _holds(text, plan.config):
        return None
    return (
        f"{config_out} exists with other content and is not the kubelet's current config: "
        "choose another --config-out, or move it away"
    )


def _same(path: str, others: list[str]) -> bool:
    """``path`` is one of ``others``, or the file one of them links to."""
    real = os.path.realpath(path)
    return any(path == other or real == os.path.realpath(other) for other in others)


def _holds(text: str, config: str) -> bool:
    """``text`` already has every provider of ``config`` as it is: nothing to write (install
    decides the same, change/install.py)."""
    return holds_providers(text.encode(), config.encode())


def config_unchanged(plan: MigrationPlan, config_out: str) -> bool:
    """The file at ``config_out`` already holds the planned config's providers."""
    if not plan.config or not os.path.isfile(config_out):
        return False
    try:
        return _holds(read_text(config_out), plan.config)
    except FileProblem:
        return False


def contents(plan: MigrationPlan, config_out: str) -> dict[str, str]:
    """Every file --write writes, in the order it writes them: the config (not when it already
    holds the providers), then the flags files and the KubeletConfiguration that name it."""
    config = {config_out: plan.config} if plan.config and not plan.config_unchanged else {}
    # the config first: a kill (a power cut) between two files leaves no flags naming a config
    # not written yet, which the kubelet the boot starts would not start with
    return {**config, **{path: text for path, text in plan.files.items() if path not in config}}


def check_places(plan: MigrationPlan, config_out: str) -> None:
    """Each directory --write writes into is one this user may write, and (as root) one no one
    else may change; so is the bin dir the flags will name (NodeChangeError if not)."""
    for path in contents(plan, config_out):
        check_writable(Path(path).parent)
    if os.geteuid() == 0 and (problem := place_problem(plan.bin_dir)):
        raise NodeChangeError(f"nothing was changed: {problem}")


def write(plan: MigrationPlan, config_out: str) -> list[dict[str, str]]:
    """Each flags file and the config, by rename, the old ones kept as backups: one journaled
    transaction; what was written, and where each old file is kept."""
    stamp = backup_stamp()
    ops = [
        Op(
            Kind.FILE,
            Path(path),
            text.encode("utf-8"),
            config_mode(text.encode("utf-8")) if path == config_out else None,
            backup=Path(f"{path}{BACKUP_SUFFIX}{stamp}") if os.path.lexists(path) else None,
        )
        for path, text in contents(plan, config_out).items()
    ]
    done = run(journal_for(config_out), ops, ChangeKind.MIGRATE)
    return [
        {"path": str(op.path), **({"backup": str(op.backup)} if op.backup else {})} for op in done
    ]


def steps(
    plan: MigrationPlan, config_out: str, kept: Mapping[str, str] | None = None
) -> list[Step]:
    """What the plan changes, in the vocabulary of install's and the agent's (:class:`Step`):
    each flags file (or KubeletConfiguration) edited, the config written or left as it is;
    ``kept``: where --write kept each old file. (The plugins are install's: ``install_args``.)"""
    kept = kept or {}
    changed = ", ".join([*(f"removed {f}" for f in plan.remove), *(f"added {f}" for f in plan.add)])
    steps = [
        Step(Action.FLAGS, path, f"edited {path} ({changed})", backup=kept.get(path))
        for path in plan.files
    ]
    if plan.config and plan.config_unchanged:
        steps.append(
            Step(
                Action.UNCHANGED,
                config_out,
                f"unchanged {config_out} (it already has these providers)",
            )
        )
    elif plan.config:
        backup = kept.get(config_out)
        lost = comments_lost(config_out, backup)
        said = f"wrote {config_out}" + (f" ({lost})" if lost else "")
        steps.append(Step(Action.WRITE, config_out, said, backup=backup))
    return steps


def comments_lost(config_out: str, backup: str | None) -> str:
    """What writing ``config_out`` does not keep of its comments (merge.dropped_comments): read
    before --write, or from its backup after."""
    return dropped_comments(_bounded(backup or config_out))


def _bounded(path: str) -> bytes | None:
    try:
        return read_bytes(path)
    except (FileProblem, UnreadableError):
        return None

"""``credprovider undo``: the last change ``install`` or ``migrate --write`` made beside a config,
reversed from its record (:mod:`credprovider.tool.change.journal`), byte for byte.

:func:`plan_undo` turns the record into the engine's ops that put each path back as the record says
it was (a link's target, the file or bundle kept under its backup name, or nothing), last op first,
and decides, purely, what stands in the way: a path changed since the change (a hand edit, or a
later change: ``force`` puts the old one back anyway), a backup gone or unfit (never, even with
``force``), and a node whose kubelet would not start as the undo leaves it (``force`` again): its
flags giving back an in-tree ``--cloud-provider`` that its version refuses, or naming a config the
undo removes or a plugin it takes away. :func:`apply_undo` runs the ops as one journaled
transaction (a killed undo is finished by the next run of install, migrate or undo) whose commit
removes the record; the backups it put back are then removed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from credprovider.tool.change.confine import backup_of, unfit_ops
from credprovider.tool.change.durable import remove_empty_dir, remove_file
from credprovider.tool.change.engine import ChangeKind, Kind, Op
from credprovider.tool.change.journal import run
from credprovider.tool.change.journalformat import Entry, Transaction, journal_for, read, record_for
from credprovider.tool.change.kept import Prior
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.discovery import in_tree
from credprovider.tool.node.flagfiles import flags_from_file, units
from credprovider.tool.node.kubelet_facts import BUILT_IN_CLOUDS_GONE_SINCE
from credprovider.tool.node.kubelet_flags import (
    BIN_DIR_FLAG,
    CONFIG_FLAG,
    KubeletSettings,
    settings_from,
)


@dataclass(frozen=True)
class PutBack:
    """One path put back: the op, and the backup it comes from (removed after the undo)."""

    op: Op
    said: str
    kept: Path | None = None


@dataclass
class UndoPlan:
    change: ChangeKind
    steps: list[PutBack] = field(default_factory=list)
    changed_since: list[str] = field(default_factory=list)  # --force puts the old ones back
    would_not_start: list[str] = field(default_factory=list)  # --force: undone all the same
    blocked: list[str] = field(default_factory=list)  # never undone
    # directories the change made that hold, once the undo is done, only its journal and record:
    # removed (when empty) after the commit removes those
    emptied: list[Path] = field(default_factory=list)
    instead: str = ""  # what else puts the node back where the kubelet would not start

    @property
    def said(self) -> list[str]:
        """What the undo does, one line each."""
        return [step.said for step in self.steps] + [
            f"removed the directory {directory}" for directory in self.emptied
        ]

    def refusal(self, force: bool) -> str:
        """Why this undo must not run ("" when it may)."""
        if self.blocked:
            return self.blocked[0]
        if force:
            return ""
        if self.changed_since:
            return f"{self.changed_since[0]}: pass --force to put back what was there before"
        if self.would_not_start:
            instead = f", or {self.instead}" if self.instead else ""
            return f"{self.would_not_start[0]}: pass --force to undo it all the same{instead}"
        return ""


def last_change(anchor: Path) -> Transaction | None:
    """The change the record beside the config ``anchor`` holds (``None``: none is recorded)."""
    return read(record_for(anchor), "record")


def _reverse(entry: Entry) -> PutBack | str:
    """The step that puts ``entry``'s path back, or why it cannot be."""
    op, was = entry.op, entry.was
    if was is None:
        return f"{op.path} was changed by an earlier credprovider, which did not record what it was"
    if was.prior is Prior.KEPT and not (op.backup is not None and backup_of(op.backup, op.path)):
        return f"{op.backup} is not named as a backup of {op.path}"
    restoring = replace(was, copy=op.backup).restore(op.path)  # the journal keeps it as the backup
    if isinstance(restoring, str):
        return restoring
    if was.prior is Prior.ABSENT:
        what = {Kind.TREE: "the bundle copy ", Kind.LINK: "the link "}.get(op.kind, "")
        return PutBack(restoring, f"removed {what}{op.path}")
    if was.prior is Prior.LINK:
        kept = op.backup if _kept_link(op.backup, op.path, was.target) else None
        return PutBack(restoring, f"{op.path} -> {was.target} again", kept)
    return PutBack(restoring, f"put back {op.path} from {op.backup}", op.backup)


def _kept_link(backup: Path | None, path: Path, target: str) -> bool:
    """``backup`` is the link the change kept of ``path`` (named as its backup, still pointing where
    ``path`` did): re-pointing ``path`` makes it redundant, so it goes as a file's backup does."""
    if backup is None or not backup_of(backup, path):
        return False
    try:
        return os.readlink(backup) == target
    except OSError:  # gone, or not a link: left as it is
        return False


def _made_dirs(
    anchor: Path, transaction: Transaction, steps: Sequence[PutBack]
) -> tuple[list[PutBack], list[Path]]:
    """The directories the change made, removed (the deepest first) where nothing but what the
    undo removes is in them; and those that hold besides only the undo's journal and the record
    (the config's directory, and those above it), which can go only after its commit."""
    made = sorted(
        {d for e in transaction.entries if e.was is not None for d in e.was.made},
        key=lambda d: -d.count("/"),
    )
    going = {str(step.op.path) for step in steps if step.op.kind is Kind.ABSENT}
    last = {str(journal_for(anchor)), str(record_for(anchor))}
    found, emptied = [], []
    for directory in made:
        try:
            names = {os.path.join(directory, name) for name in os.listdir(directory)}
        except OSError:
            continue
        if names <= going:
            going.add(directory)
            found.append(
                PutBack(Op(Kind.ABSENT, Path(directory)), f"removed the directory {directory}")
            )
        elif names <= going | last:
            last.add(directory)
            emptied.append(Path(directory))
    return found, emptied


def _still_made(op: Op) -> bool:
    """``op``'s path still holds what the change made (a bundle copy: still a bundle there; its
    source may be gone)."""
    if op.kind is Kind.TREE:
        return (op.path / "_internal").is_dir() and not op.path.is_symlink()
    return op.done()


def plan_undo(
    anchor: Path,
    transaction: Transaction,
    flags: Mapping[str, Sequence[str]],
    version: tuple[int, int] | None,
) -> UndoPlan:
    """What undoing ``transaction`` (the record beside the config ``anchor``) does, and what stands
    in its way. ``flags``: the kubelet's flags each of its flag files gives now (a file the undo
    puts back is read as it will be); ``version``: the kubelet's (``None``: not known)."""
    plan = UndoPlan(transaction.change)
    for entry in reversed(transaction.entries):
        step = _reverse(entry)
        if isinstance(step, str):
            plan.blocked.append(step)
            continue
        plan.steps.append(step)
        if not _still_made(entry.op):
            plan.changed_since.append(f"{entry.op.path} was changed since the {transaction.change}")
    plan.steps += [
        PutBack(Op(Kind.ABSENT, step.kept), f"removed the backup {step.kept}")
        for step in list(plan.steps)
        if step.kept is not None
    ]
    made, plan.emptied = _made_dirs(anchor, transaction, plan.steps)
    plan.steps += made
    # the emptied directories are removed only if empty (rmdir) and were read as the record's
    # directories above a path it names, never / or /etc (confine.above)
    plan.blocked += [
        f"the record is not a change credprovider made ({problem})"
        for problem in unfit_ops([step.op for step in plan.steps], anchor, ChangeKind.UNDO)
    ]
    plan.would_not_start = start_problems(plan.steps, flags, version, anchor)
    return plan


def start_problems(
    steps: Sequence[PutBack],
    flags: Mapping[str, Sequence[str]],
    version: tuple[int, int] | None,
    anchor: Path | None = None,
) -> list[str]:
    """Why the kubelet would not start on the node as ``steps`` leave it (``flags``: each of its
    flag files' flags now; ``version``: its own), checking the config ``anchor`` (``None``: the
    one its flags name then)."""
    after = _flags_after(steps, flags)
    return _start_problems(steps, after, anchor or config_named(steps, flags), version)


def config_named(steps: Sequence[PutBack], flags: Mapping[str, Sequence[str]]) -> Path | None:
    """The config the kubelet's flags name as ``steps`` leave them (``None``: none)."""
    named = _merged(_flags_after(steps, flags)).provider_config
    return Path(named) if named else None


def _flags_after(
    steps: Sequence[PutBack], flags: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    """Each flag file's flags as the undo leaves them."""
    after = {path: list(words) for path, words in flags.items()}
    for step in steps:
        if step.op.kind is Kind.FILE and (str(step.op.path) in after or _flag_file(step.op)):
            text = step.op.data.decode("utf-8", "replace")
            after[str(step.op.path)] = flags_from_file(text).split()
        elif step.op.kind is Kind.ABSENT:
            after.pop(str(step.op.path), None)
    return after


def _flag_file(op: Op) -> bool:
    try:
        return bool(units(op.data.decode("utf-8", "replace")))
    except NodeChangeError:
        return False


def _start_problems(
    steps: Sequence[PutBack],
    after: Mapping[str, Sequence[str]],
    anchor: Path | None,
    version: tuple[int, int] | None,
) -> list[str]:
    """Why the kubelet would not start on the node as the undo leaves it (KEP-2395; the kubelet's
    own checks of its credential provider config at start)."""
    problems = []
    put_back = {str(step.op.path) for step in steps}
    for path, words in after.items():
        settings = settings_from(words)
        if path in put_back and in_tree(settings) and not _starts_in_tree(version):
            known = (
                f"this node's kubelet is {version[0]}.{version[1]}"
                if version
                else ("this node's kubelet version is not known")
            )
            problems.append(
                f"the undo puts back {path} with the in-tree cloud login "
                f"(--cloud-provider={settings.cloud_provider or ''}), which a kubelet "
                f"{BUILT_IN_CLOUDS_GONE_SINCE[0]}.{BUILT_IN_CLOUDS_GONE_SINCE[1]} or newer "
                f"refuses, and {known}: the kubelet would not start"
            )
    merged = _merged(after)
    if anchor is not None and merged.provider_config and Path(merged.provider_config) == anchor:
        problems += _config_problems(steps, anchor, merged)
    return problems


def _starts_in_tree(version: tuple[int, int] | None) -> bool:
    return version is not None and version < BUILT_IN_CLOUDS_GONE_SINCE


def _merged(after: Mapping[str, Sequence[str]]) -> KubeletSettings:
    """The credential flags all the files give together (the last one given wins, as on the
    kubelet's command line)."""
    words = [word for found in after.values() for word in found]
    return settings_from(words)


def _config_problems(steps: Sequence[PutBack], anchor: Path, flags: KubeletSettings) -> list[str]:
    """The config the kubelet's flags name (``anchor``), as the undo leaves it: there, valid, and
    every provider's plugin in the bin dir they name."""
    named = f"--{CONFIG_FLAG}={anchor}"
    restored = next((s.op for s in steps if s.op.path == anchor), None)
    if restored is not None and restored.kind is Kind.ABSENT:
        return [f"the kubelet's flags give {named}, which the undo removes: it would not start"]
    if restored is None and not anchor.is_file():
        return []
    from credprovider.tool.change.startcheck import loaded_as_left, plugins_missing

    text = restored.data.decode("utf-8", "replace") if restored is not None else None
    loaded = loaded_as_left(anchor, text)
    if isinstance(loaded, str) or not flags.bin_dir:
        return [loaded] if isinstance(loaded, str) else []
    gone = {str(s.op.path) for s in steps if s.op.kind is Kind.ABSENT}
    targets = {str(s.op.path): s.op.target for s in steps if s.op.kind is Kind.LINK}
    missing = plugins_missing(loaded, Path(flags.bin_dir), gone, targets)
    return [
        f"the kubelet's --{BIN_DIR_FLAG}={flags.bin_dir} would not hold the plugin "
        f"{name} that its config names: it would not start"
        for name in missing
    ]


def apply_undo(anchor: Path, plan: UndoPlan) -> list[Op]:
    """The plan's ops (each path put back, then the backups it came from removed) as one
    journaled transaction, whose commit removes the record; then the directories the change made
    for its config, if nothing else came to live in them. The ops carried out."""
    done = run(journal_for(anchor), [step.op for step in plan.steps], ChangeKind.UNDO)
    if not done:  # every path was already as before: the record alone goes
        remove_file(record_for(anchor))
    for directory in plan.emptied:  # the deepest first; one not empty now is left
        if not remove_empty_dir(directory):
            break
    return done

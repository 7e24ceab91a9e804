"""The kubelet's flags in the agent's plan (:mod:`credprovider.tool.agent.plan`): the flags the
node's own files give it (in force), whether they already name the platform's config and bin dir,
and, where the agent keeps them (kubeadm's environment file, k0s's unit), that file as it will
read. Decided over the node's files, read by the plan's reader; nothing is changed here.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from credprovider.tool.agent import envfile
from credprovider.tool.agent.mounts import CHOICES
from credprovider.tool.agent.platforms import (
    BY_PLATFORM,
    ENV_FILE,
    K0S_UNIT,
    Platform,
)
from credprovider.tool.change.flagedit import EXTRA_ARGS, FlagChanges
from credprovider.tool.change.render import kubelet_flags
from credprovider.tool.change.results import Action, Step
from credprovider.tool.node.access import UnreadableError
from credprovider.tool.node.kubelet_flags import BIN_DIR_FLAG, CONFIG_FLAG, flag_value
from credprovider.tool.node.rancher import given_paths
from credprovider.tool.node.root import NodeRoot
from credprovider.tool.node.units import extra_args_files, find_unit, on_node, read_kubelet_unit

# A node file's text as the plan reads it (None: absent).
Read = Callable[[str], str | None]

_K0S_EXTRA: Final = re.compile(r"--kubelet-extra-args(?:=|\s+)(\"[^\"]*\"|'[^']*'|\S+)")


@dataclass
class FlagChange:
    """What the plan does about the kubelet's flags: its step (None: none to show), a note, and
    the flags file as it will read (``text`` None: left as it is), with what uninstall restores
    each file to where that is not the file as it was (``restored``)."""

    step: Step | None = None
    note: str = ""
    file: str = ""
    text: str | None = None
    restored: dict[str, str] = field(default_factory=dict)


def reading(root: NodeRoot, platform: Platform) -> tuple[Platform, str]:
    """``platform`` with, where the agent keeps the flags in an environment file (kubeadm), only
    the distribution's file the node's kubelet unit reads (:func:`extra_args_files`): a file it
    does not read is neither read for the flags in force nor written. Or why not ("": it can),
    when the unit reads none of the platform's files (the chart's flags.platform names another)."""
    if platform.flags != ENV_FILE:
        return platform, ""
    read = extra_args_files(lambda p: str(root.host(p)))
    kept = tuple(path for path in platform.flag_files if path in read)
    if kept:
        return replace(platform, flag_files=kept), ""
    if not read:
        return platform, (
            f"the kubelet's unit reads {EXTRA_ARGS} from none of "
            f"{', '.join(platform.flag_files)}: flags set there would never reach it; nothing is "
            f"changed: give the kubelet --{CONFIG_FLAG} and --{BIN_DIR_FLAG} where its unit takes "
            "them, and let the agent place only the files they name (the chart's mode files: "
            "agent --files-only --bin-dir DIR --config FILE)"
        )
    directory = str(Path(read[0]).parent)
    values = [c.value for c in CHOICES if c.platform and read[0] in c.platform.flag_files]
    advice = (
        f"choose the chart's flags.platform {' or '.join(values)} (its pod mounts {directory}), "
        "or auto"
        if values and root.host(directory).is_dir()
        else f"{directory} is not there yet, and only the chart's flags.platform auto mounts "
        "where it goes: choose auto"
    )
    return platform, (
        f"the kubelet's unit reads {EXTRA_ARGS} from {read[0]}, not from "
        f"{', '.join(platform.flag_files)}: flags set there would never reach it; nothing is "
        f"changed: {advice}"
    )


def flags_in_force(root: NodeRoot, platform: Platform, read: Read) -> list[str]:
    """The kubelet flags the node's own files give: ENV_FILE's and K0S_UNIT's where they keep
    them; k3s' and RKE2's two, as their configuration names them; a platform that sets them
    itself, its kubelet unit's, as systemd starts it (GKE's KUBELET_OPTS, an EKS NodeConfig's
    flags: the config the kubelet really reads)."""
    if platform.rancher:  # what k3s or RKE2 passes, from its own configuration
        given = given_paths(platform.rancher, *on_node(lambda p: str(root.host(p))))
        return kubelet_flags(given.config, given.bin_dir)
    if platform.flags in (BY_PLATFORM, K0S_UNIT):  # k0s: its unit's --kubelet-extra-args
        try:
            unit = read_kubelet_unit(*on_node(lambda p: str(root.host(p))))
        except UnreadableError:
            return []
        return list(unit.argv) if unit else []
    if platform.flags == ENV_FILE:
        return envfile.args(envfile.texts(read, platform.flag_files))
    return []


def flags_right(args: list[str], platform: Platform) -> bool:
    """``args`` give the kubelet the platform's config and bin dir (the last value of each)."""
    return (flag_value(args, CONFIG_FLAG), flag_value(args, BIN_DIR_FLAG)) == (
        platform.config,
        platform.bin_dir,
    )


def flag_change(root: NodeRoot, platform: Platform, migrating: str, read: Read) -> FlagChange:
    """What the plan does about the kubelet's flags on ``platform`` (``migrating``: the in-tree
    cloud moved to ``--cloud-provider=external``, "" for none)."""
    wanted = kubelet_flags(platform.config, platform.bin_dir)
    if platform.flags == ENV_FILE:
        return _env_file(root, platform, wanted, read, migrating)
    if platform.flags == K0S_UNIT:
        return _k0s(root, platform, wanted, read)
    return FlagChange(Step(Action.UNCHANGED, "", f"the kubelet's flags: set by {platform.name}"))


def _env_file(
    root: NodeRoot, platform: Platform, wanted: list[str], read: Read, migrating: str
) -> FlagChange:
    """kubeadm: the flags the kubelet gets from every file its drop-in reads (KUBELET_EXTRA_ARGS
    last); the two are added to (or corrected in) KUBELET_EXTRA_ARGS when not already right."""
    texts = envfile.texts(read, platform.flag_files)
    if flags_right(envfile.args(texts), platform) and not migrating:
        return FlagChange(Step(Action.UNCHANGED, "", "the kubelet's flags are already right"))
    home = next((p for p in platform.flag_files if texts[p] is not None), "") or next(
        # none yet: the distribution's directory for it, /etc/default (Debian) or /etc/sysconfig
        (p for p in platform.flag_files if root.host(str(Path(p).parent)).is_dir()),
        platform.flag_files[0],
    )
    text = texts[home] or ""
    changes = FlagChanges(frozenset({CONFIG_FLAG, BIN_DIR_FLAG}), frozenset())
    restored = {}
    if migrating:  # the in-tree cloud moved to external, passed last so that it wins
        migration = envfile.InTree(migrating=migrating)
        changes = FlagChanges(
            changes.drop | migration.changes.drop, changes.gates | migration.changes.gates
        )
        wanted = [envfile.EXTERNAL, *wanted]
        restored[home] = migration.restored(text)
    step = Step(Action.FLAGS, home, f"{EXTRA_ARGS} in {home}: {' '.join(wanted)}")
    return FlagChange(
        step, file=home, text=envfile.with_extra_args(text, changes, wanted), restored=restored
    )


def _k0s(root: NodeRoot, platform: Platform, wanted: list[str], read: Read) -> FlagChange:
    """k0s: the flags are inside the unit's ExecStart, in --kubelet-extra-args."""
    path = _k0s_unit(root, platform)
    text = read(path) if path else None
    if not text:
        return FlagChange(
            note="no k0s unit was found: pass the flags with --kubelet-extra-args yourself"
        )
    found = _K0S_EXTRA.search(text)
    current = _split(found.group(1)) if found else []
    if flags_right(current, platform):
        return FlagChange(Step(Action.UNCHANGED, path, "the kubelet's flags are already right"))
    changes = FlagChanges(frozenset({CONFIG_FLAG, BIN_DIR_FLAG}), frozenset())
    drop, _ = changes.edit(current)
    kept = [word for index, word in enumerate(current) if index not in drop]
    value = shlex.quote(" ".join([*kept, *wanted]))
    if found:
        new = text[: found.start()] + f"--kubelet-extra-args={value}" + text[found.end() :]
    else:
        start = re.compile(r"^(ExecStart=.*\bk0s\b[^\n]*)$", re.M)
        new = start.sub(lambda line: f"{line.group(1)} --kubelet-extra-args={value}", text, 1)
    step = Step(Action.FLAGS, path, f"--kubelet-extra-args in {path}: {' '.join(wanted)}")
    return FlagChange(step, file=path, text=new)


def _k0s_unit(root: NodeRoot, platform: Platform) -> str:
    """The path of the node's k0s unit ("" for none)."""
    return find_unit(root.exists, (f"{service}.service" for service in platform.services)) or ""


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:  # an unclosed quote: as good as no flags
        return []

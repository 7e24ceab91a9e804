"""The node agent's plan for one node: what it would place, link, write or merge, which flags file
it would edit, and whether the kubelet must restart; or why it changes nothing there. Computed
from the node's files under ``root`` and changes nothing (``credprovider agent plan``).

The rules (docs/fleet.md): the bundle goes to a versioned directory and the plugin links point
through ``current``, so an upgrade re-points one link and needs no restart; a config the platform
manages is merged (its providers kept), and the result is validated as the kubelet validates it
before anything the kubelet reads would change; flags are set only where they are not already
right, in the platform's own place; the kubelet restarts only when its config or a flag changes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Final

from credprovider.paths import AGENT_HOME
from credprovider.tool.agent import envfile
from credprovider.tool.agent.bootstrap import BOOTSTRAP_PROVIDER
from credprovider.tool.agent.flagplan import flag_change, flags_in_force, flags_right, reading
from credprovider.tool.agent.platforms import (
    ENV_FILE,
    Loaded,
    Platform,
    confirmed,
    installed_unit,
    recognize,
    signs_of,
)
from credprovider.tool.agent.state import JOURNAL, journal_left
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.change.journalformat import journal_for
from credprovider.tool.change.merge import (
    dropped_comments,
    holds_providers,
    other_providers,
    without_plugin,
)
from credprovider.tool.change.render import render_config
from credprovider.tool.change.results import Action, Step
from credprovider.tool.change.settings import Settings
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.kubeconfig.model import ConfigError
from credprovider.tool.kubeconfig.validate import load_config
from credprovider.tool.node.access import FileProblem, read_bytes
from credprovider.tool.node.discovery import settings_under
from credprovider.tool.node.kubelet_facts import takes_token_attributes
from credprovider.tool.node.kubelet_flags import BIN_DIR_FLAG, CONFIG_FLAG, flag_value
from credprovider.tool.node.rancher import RancherConfigError
from credprovider.tool.node.root import NodeRoot


@dataclass
class AgentPlan:
    platform: str
    evidence: str
    refused: str = ""
    steps: list[Step] = field(default_factory=list)
    config_path: str = ""
    bin_dir: str = ""  # where the kubelet finds the plugins
    bundles: str = AGENT_HOME  # where the bundles are placed (versions/, current)
    providers: dict[str, str] = field(default_factory=dict)  # key -> its provider's name
    config_text: str | None = None  # the config as it will read (None: left as it is)
    flag_file: str = ""
    flag_text: str | None = None  # the flags file as it will read (None: left as it is)
    restart: str = ""  # the service restarted ("": none)
    # the in-tree cloud the flags change moves to --cloud-provider=external ("": none)
    migrating: str = ""
    # what uninstall restores each flags file to, where it is not the file as it was (a migrated
    # node keeps --cloud-provider=external: the in-tree flag would stop a kubelet 1.31 or newer)
    flags_restored: dict[str, str] = field(default_factory=dict)
    unfinished: str = ""  # the journal a change by hand left when killed (agent/recovery.py)
    finished: str = ""  # what finishing the journals left did, said in the outcome
    notes: list[str] = field(default_factory=list)

    @property
    def changes_kubelet_input(self) -> bool:
        return self.config_text is not None or self.flag_text is not None


class RefusedConfig(NodeChangeError):
    """The config the agent would write is one the kubelet refuses."""


class WouldNotStart(NodeChangeError):
    """The change would leave a kubelet that does not start (a plugin its config names missing)."""


class UnreadableNodeFile(NodeChangeError):
    """A file the agent would change cannot be read as it is (so it could not be kept)."""


def _read(root: NodeRoot, path: str) -> str | None:
    """A node file's text (None: absent); raises :class:`UnreadableNodeFile` for one that is not a
    readable regular file (a FIFO, a device, too big): the agent never replaces what it cannot
    keep."""
    host = str(root.host(path))
    if not os.path.lexists(host):
        return None
    try:
        return read_bytes(host).decode("utf-8", errors="replace")
    except FileProblem as exc:
        raise UnreadableNodeFile(f"{path} {exc.reason}") from None


def validated(path: str, text: str, sa_tokens_enabled: bool = True) -> None:
    """Refuse (:class:`RefusedConfig`, with the kubelet's message) a config ``path`` to be written
    as ``text`` that the kubelet would not start with (``sa_tokens_enabled``: whether that kubelet
    takes ``tokenAttributes``, 1.34+)."""
    try:
        load_config(path, sa_tokens_enabled, text=text)
    except ConfigError as exc:
        raise RefusedConfig(str(exc)) from None


def plan_node(
    root: NodeRoot,
    keys: list[str],
    version: str,
    platform: Platform | None = None,
    settings: Settings | None = None,
    kubelet_version: tuple[int, int] | None = None,
    migrate_in_tree: bool = False,
    beside: bool = False,
    loaded: Loaded = None,
) -> AgentPlan:
    """The plan for the node under ``root``, installing the plugins ``keys`` (of the catalog) at
    ``version``; ``platform``: the rules to follow (default: the node's, :func:`recognize`).
    ``migrate_in_tree``: a kubeadm node whose flags still give an in-tree ``--cloud-provider`` is
    moved to ``--cloud-provider=external`` (else it is refused). ``beside``: our providers are
    added under names of their own (:func:`provider_names`), the platform's plugin and entry of
    the same name left as they are (else ours take their place, the drop-in purpose).
    ``loaded``: the units systemd said it has (else the unit files under ``root`` tell).
    ``kubelet_version``: the node's kubelet's (its Node's), which with the feature gates its flags
    and KubeletConfiguration give decides whether it takes ``tokenAttributes`` (doctor's rule)."""
    platform, evidence = (
        (platform, confirmed(root, platform, loaded)) if platform else recognize(root, loaded)
    )
    plan = AgentPlan(platform.name, evidence, refused=platform.refusal)
    if not evidence:
        plan.evidence = "nothing on this node"
        plan.refused = (
            f"this node shows nothing of {platform.name} (none of "
            f"{', '.join(signs_of(platform))}): nothing is changed; name the node's own platform "
            "(the chart's flags.platform), or auto to let the agent find it"
        )
    if plan.refused:
        return plan
    if platform.note:
        plan.notes.append(platform.note)
    platform, plan.refused = reading(root, platform)
    if plan.refused:
        return plan
    try:
        found = envfile.texts(lambda p: _read(root, p), platform.flag_files)
        in_force = flags_in_force(root, platform, lambda p: _read(root, p))
        decided = envfile.in_tree_decision(
            in_force,
            found if platform.flags == ENV_FILE else {},
            migrate_in_tree,
            platform.flags == ENV_FILE,
        )
        plan.refused, plan.migrating = decided.refused, decided.migrating
        if plan.refused:
            return plan
        if plan.migrating:
            plan.notes.append(
                f"the kubelet's in-tree --cloud-provider={plan.migrating} becomes "
                "--cloud-provider=external in KUBELET_EXTRA_ARGS (last, so it wins): the cloud's "
                "controller manager must run in the cluster; uninstall keeps it external. kubeadm's "
                "own file keeps the old flag: set nodeRegistration.kubeletExtraArgs for nodes "
                "joined later (credprovider migrate says how)"
            )
        platform = _adopt_flags_in_force(plan, in_force, platform)
        plan.unfinished = _change_by_hand_left(root, platform.config)
        if plan.unfinished:
            plan.notes.append(
                f"a credprovider install or migrate --write was killed part way (its journal "
                f"{plan.unfinished} is left): agent apply finishes it first"
            )
        if journal_left(root):
            plan.notes.append(
                f"an agent run was killed part way (its journal {JOURNAL} is left): agent apply "
                "finishes it first, agent uninstall gives it up"
            )
        plan.bin_dir, plan.bundles = platform.bin_dir, platform.bundles
        plan.providers = provider_names(keys, beside)
        _plan_bundle(plan, root, platform, keys, version)
        gates = settings_under(root, in_force).feature_gates
        sa_tokens = takes_token_attributes(gates, kubelet_version)
        _plan_config(plan, root, platform, keys, settings, sa_tokens)
        _plan_flags(plan, root, platform)
    except RefusedConfig as refused:
        plan.refused = f"the kubelet would refuse the config: {refused}; nothing is changed"
    except WouldNotStart as problem:
        plan.refused = f"the kubelet would not start: {problem}; nothing is changed"
    except (UnreadableNodeFile, RancherConfigError) as unreadable:
        plan.refused = f"{unreadable}: nothing is changed"
    if plan.refused:
        plan.steps, plan.config_text, plan.flag_text = [], None, None
        return plan
    if plan.changes_kubelet_input:
        plan.restart = installed_unit(root, platform.services, loaded)
        if plan.restart:
            plan.steps.append(Step(Action.RESTART, plan.restart, f"restart {plan.restart}"))
        elif not platform.services:
            plan.notes.append("the kubelet reads the new config at its next start")
        else:
            plan.notes.append(
                f"no unit of {', '.join(platform.services)} was found: restart the kubelet yourself"
            )
    return plan


# The suffix of our providers' names beside a platform's own (entry.plugin_of runs them).
BESIDE_SUFFIX: Final = "credprovider"


def provider_names(keys: list[str], beside: bool = False) -> dict[str, str]:
    """Each plugin's provider name in the config and its link in the bin dir: the plugin's own
    name, or beside a platform's, ``<plugin name>-credprovider`` (a name the bundle runs as that
    plugin)."""
    return {
        key: f"{PLUGINS[key].name}-{BESIDE_SUFFIX}" if beside else PLUGINS[key].name for key in keys
    }


def _change_by_hand_left(root: NodeRoot, config: str) -> str:
    """The journal a ``credprovider install`` or ``migrate --write`` killed part way left beside
    the kubelet's config ("" for none): the node is half changed by hand (change/journal.py)."""
    journal = str(journal_for(config))
    return journal if os.path.lexists(root.host(journal, follow=False)) else ""


def _adopt_flags_in_force(plan: AgentPlan, args: list[str], platform: Platform) -> Platform:
    """Where the kubelet is already given (``args``: the flags in force) a config and a bin dir,
    those are the ones: the config's providers are kept and ours merged in, the plugins linked
    where it looks, its flags left."""
    config, bin_dir = flag_value(args, CONFIG_FLAG), flag_value(args, BIN_DIR_FLAG)
    if not (config and bin_dir) or flags_right(args, platform):
        return platform
    if platform.bootstrap:  # files only: the paths given are the ones (the chart's paths.*)
        plan.notes.append(
            f"the kubelet's flags name {config} and {bin_dir}, not the paths given: it does not "
            "read what this places, unless something else brings it there (on OpenShift, the "
            "MachineConfig of credprovider render openshift)"
        )
        return platform
    if platform.rancher:  # from its own configuration: given only once both exist
        plan.notes.append(
            f"the {platform.name} configuration names {config} and {bin_dir} (given to the "
            "kubelet once both exist): they are used, the config's providers kept"
        )
    else:
        plan.notes.append(
            f"the kubelet is already given {config} and {bin_dir}: they are used, its providers "
            "kept"
        )
    return replace(platform, config=config, bin_dir=bin_dir, managed=True)


def _plan_bundle(
    plan: AgentPlan, root: NodeRoot, platform: Platform, keys: list[str], version: str
) -> None:
    bin_dir = root.host(platform.bin_dir)
    if os.path.lexists(bin_dir) and not bin_dir.is_dir():
        raise UnreadableNodeFile(f"{platform.bin_dir} is not a directory (the kubelet's bin dir)")
    if plan.bundles != AGENT_HOME:
        plan.notes.append(
            f"the bundles go to {plan.bundles}, not {AGENT_HOME}: {platform.name} mounts /var "
            "noexec, and the kubelet runs plugins only from an exec mount"
        )
    versions = f"{plan.bundles}/versions/{version}"
    there = os.path.isdir(root.host(versions))
    plan.steps.append(
        Step(
            Action.UNCHANGED if there else Action.PLACE,
            versions,
            f"the bundle {version} in {versions}",
        )
    )
    current = f"{plan.bundles}/current"
    now = _link_target(root, current)
    if now != f"versions/{version}":
        was = f" (from {now.rsplit('/', 1)[-1]}, no restart needed)" if now else ""
        plan.steps.append(
            Step(
                Action.SWITCH,
                current,
                f"{current} -> versions/{version}{was}",
                f"versions/{version}",
            )
        )
    for key in keys:
        name = PLUGINS[key].name
        link = f"{platform.bin_dir}/{plan.providers[key]}"
        target = f"{current}/{name}"
        action = Action.UNCHANGED if _link_target(root, link) == target else Action.LINK
        plan.steps.append(Step(action, link, f"{link} -> {target}", target))
        own = root.host(link, follow=False)
        if action is Action.LINK and os.path.lexists(own) and not os.path.islink(own):
            plan.notes.append(
                f"{link} is the platform's own {name}: the agent's link takes its place (the "
                "drop-in purpose); the platform's file is kept and put back byte for byte by "
                "agent uninstall; to leave it and its entry as they are, add ours beside them "
                "(agent --beside, the chart's flags.beside)"
            )
        platform_own = root.host(f"{platform.bin_dir}/{name}", follow=False)
        if link.rsplit("/", 1)[1] != name and os.path.lexists(platform_own):
            plan.notes.append(
                f"beside: {platform.bin_dir}/{name} and its entry are left as they are; ours is "
                f"{plan.providers[key]}. For an image both match, the kubelet asks both (in the "
                "config's order, the platform's first) and the pull tries each credential in turn"
            )


def _link_target(root: NodeRoot, path: str) -> str:
    try:
        return os.readlink(root.host(path, follow=False))
    except OSError:
        return ""


def _plan_config(
    plan: AgentPlan,
    root: NodeRoot,
    platform: Platform,
    keys: list[str],
    settings: Settings | None,
    sa_tokens_enabled: bool = True,
) -> None:
    plan.config_path = platform.config
    current = _read(root, platform.config)
    # the bootstrap provisioning laid (agent/bootstrap.py) is replaced by ours, never kept
    ours = set(plan.providers.values()) | {BOOTSTRAP_PROVIDER}
    kept = (
        [p for p in other_providers(current.encode(), None) if p.get("name") not in ours]
        if current is not None
        else []
    )
    desired = render_config(
        keys, writer="agent", first=kept, names=plan.providers, settings=settings
    )
    if current is not None and holds_providers(current.encode(), desired.encode()):
        plan.steps.append(Step(Action.UNCHANGED, platform.config, f"{platform.config} has them"))
        return
    validated(platform.config, desired, sa_tokens_enabled)
    missing = without_plugin(kept, lambda name: root.lexists(f"{platform.bin_dir}/{name}"))
    if missing:
        raise WouldNotStart(
            f"{platform.config} keeps {', '.join(missing)}, whose plugin is not in "
            f"{platform.bin_dir} (plugin binary executable did not exist); put it there, or take "
            "that provider out of the config"
        )
    plan.config_text = desired
    if kept:
        names = ", ".join(str(p.get("name")) for p in kept)
        lost = dropped_comments(current.encode() if current is not None else None)
        plan.steps.append(
            Step(
                Action.MERGE,
                platform.config,
                f"{platform.config}, keeping {names}" + (f" ({lost})" if lost else ""),
            )
        )
    else:
        plan.steps.append(Step(Action.WRITE, platform.config, platform.config))


def _plan_flags(plan: AgentPlan, root: NodeRoot, platform: Platform) -> None:
    change = flag_change(root, platform, plan.migrating, lambda p: _read(root, p))
    plan.steps += [change.step] if change.step is not None else []
    plan.notes += [change.note] if change.note else []
    plan.flag_file, plan.flag_text = change.file, change.text
    plan.flags_restored |= change.restored

"""``credprovider migrate``: from a kubelet's in-tree cloud login to these plugins.

It reads what operators have: the kubelet's flags as a string or in the files they live in
(:mod:`credprovider.tool.node.flagfiles`), its KubeletConfiguration, and the credential provider config it may
already run. It plans the whole change, applicable as written: the flags to remove and add, each flags
file and the KubeletConfiguration as they will read afterwards (one flag of each kind: the existing
credential-provider flags are replaced, never doubled), and one CredentialProviderConfig holding the
existing providers (their names kept, conflicts reported) and ours. Pure functions: the CLI reads and
writes.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from credprovider.cloud import CloudPlugin
from credprovider.paths import NODE_BIN_DIR, NODE_CONFIG
from credprovider.tool.catalog import PLUGINS, not_known
from credprovider.tool.change.flagedit import FlagChanges, generated, rewritten_files
from credprovider.tool.change.render import (
    CCM_REMINDER,
    kubelet_flags,
    provider_entry,
    render_config,
)
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.flagfiles import flags_from_file
from credprovider.tool.node.kubelet_flags import (
    BIN_DIR_FLAG,
    CONFIG_FLAG,
    flag_value,
    flag_values,
    settings_from,
)
from credprovider.tool.node.yamldoc import YamlError, load_yaml

__all__ = ["ExistingConfig", "MigrationPlan", "flags_from_file", "plan_migration"]

# kubelet --cloud-provider value -> the plugin (key) that replaces its in-tree login
IN_TREE_CLOUDS: Final = {
    cloud: plugin.key for plugin in PLUGINS.values() for cloud in plugin.in_tree_clouds
}
# Feature gates of the in-tree login a current kubelet no longer knows: with one set, it does not start.
REMOVED_GATES: Final = {
    "KubeletCredentialProviders": "GA in 1.26 and removed in 1.28",
    "DisableKubeletCloudCredentialProviders": "locked on since 1.31 and removed after 1.32",
}


@dataclass(frozen=True)
class ExistingConfig:
    """The credential provider config the kubelet runs today, as read from ``path``."""

    path: str
    providers: list[dict[str, Any]]
    sources: list[str]  # each provider's file (a directory config has several)
    as_json: bool = False  # a file in JSON (EKS's nodeadm writes one): the merge stays JSON


@dataclass
class MigrationPlan:
    providers: list[str]
    remove: list[str]
    add: list[str]
    config: str
    notes: list[str]
    files: dict[str, str] = field(default_factory=dict)  # each file that changes -> its new text
    bin_dir: str = NODE_BIN_DIR
    node_files: dict[str, str] = field(default_factory=dict)  # plugin key -> its node file
    existing: ExistingConfig | None = None  # the config merged in, as read_existing read it
    # the file at --config-out already holds these providers: it is left as it is
    config_unchanged: bool = False

    def install_args(self, config_path: str) -> list[str]:
        """The ``credprovider install`` arguments that put these plugins in place for this config
        (install leaves a config holding its providers as it is)."""
        args = ["install", f"--providers={','.join(self.providers)}", f"--bin-dir={self.bin_dir}"]
        args.append(f"--config-out={config_path}")
        return args + [f"--{key}-config={path}" for key, path in self.node_files.items()]


def read_kubelet_config(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        loaded = load_yaml(text)
    except YamlError as exc:
        raise NodeChangeError(f"the KubeletConfiguration is not YAML: {exc}") from None
    return loaded if isinstance(loaded, dict) else {}


def split_flags(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise NodeChangeError(
            f"the kubelet flags cannot be split like a shell would: {exc}"
        ) from None


def _known_providers(providers: list[str]) -> list[str]:
    if not_known(providers):
        raise NodeChangeError(not_known(providers))
    return list(dict.fromkeys(providers))


def _node_files(args: list[str], plugins: list[CloudPlugin]) -> dict[str, str]:
    """Each chosen plugin's node file (azure.json) as the old flags name it, by plugin key."""
    found: dict[str, str] = {}
    for plugin in plugins:
        for flag in plugin.node_file_flags:
            value = flag_value(args, flag)
            if value:
                found[plugin.key] = value
                break
    return found


def plan_migration(
    kubelet_flags_text: str = "",
    kubelet_config_text: str = "",
    bin_dir: str | None = None,
    config_path: str = NODE_CONFIG,
    providers: list[str] | None = None,
    *,
    flag_files: Mapping[str, str] | None = None,
    kubelet_config_path: str | None = None,
    read_existing: Callable[[str], ExistingConfig] | None = None,
) -> MigrationPlan:
    """From a kubelet's old flags (a string and/or ``flag_files``: path -> text) and its
    KubeletConfiguration, everything to change for out-of-tree login.

    ``providers`` (keys of :data:`~credprovider.tool.catalog.PLUGINS`) names the clouds when the flags do
    not (``--cloud-provider=external``), or overrides what they say. ``read_existing`` (the CLI's
    I/O) reads the config the kubelet is given today, from the path the flags or the
    KubeletConfiguration name: its providers are merged into the new one. ``bin_dir`` defaults to the
    kubelet's current bin dir (its plugins are there), else the usual one.
    """
    flag_files = dict(flag_files or {})
    texts = [kubelet_flags_text, *(flags_from_file(text) for text in flag_files.values())]
    args = split_flags(" ".join(texts))
    config = read_kubelet_config(kubelet_config_text)
    notes: list[str] = []
    chosen, drop = _chosen_clouds(args, providers, notes)
    # What the kubelet is given today: flags only (no KubeletConfiguration field sets them; a
    # file that tries is ignored by the kubelet, and said so here).
    current_bin_dir = flag_value(args, BIN_DIR_FLAG)
    existing_path = flag_value(args, CONFIG_FLAG)
    notes += settings_from([], [(kubelet_config_path or "the KubeletConfiguration", config)]).notes
    existing = read_existing(existing_path) if read_existing and existing_path else None
    bin_dir = bin_dir or current_bin_dir or NODE_BIN_DIR
    gates = _gates_to_remove(args, config, notes)
    if not chosen:
        notes.append("No in-tree cloud provider found: nothing to migrate.")
        changes = FlagChanges(frozenset(), frozenset(gates))
        new_flags: list[str] = []
    else:
        changes = FlagChanges(frozenset({*drop, CONFIG_FLAG, BIN_DIR_FLAG}), frozenset(gates))
        new_flags = kubelet_flags(config_path, bin_dir)
    if "cloud-provider" in drop:
        new_flags.insert(0, "--cloud-provider=external")
    remove, replaced = changes.describe(args)
    rendered = ""
    node_files = _node_files(args, [PLUGINS[key] for key in chosen])
    if chosen:
        rendered = _merged_config(chosen, node_files, existing, notes)
        _bin_dir_notes(existing, current_bin_dir, bin_dir, notes)
    plan = MigrationPlan(chosen, remove, replaced + new_flags, rendered, notes, bin_dir=bin_dir)
    plan.node_files, plan.existing = node_files, existing
    plan.files = rewritten_files(flag_files, changes, new_flags, kubelet_flags_text, notes)
    if kubelet_config_path and gates:
        _rewrite_kubelet_config(plan, kubelet_config_path, kubelet_config_text, gates, config)
    if remove and any(generated(path) for path in flag_files):
        notes.append(KUBEADM_LATER_NODES)
    notes.append(CCM_REMINDER)
    return plan


def _chosen_clouds(
    args: list[str], providers: list[str] | None, notes: list[str]
) -> tuple[list[str], set[str]]:
    """The plugins to configure, and the old flags their in-tree login read (to drop)."""
    chosen: list[str] = []
    drop: set[str] = set()
    cloud = flag_value(args, "cloud-provider")
    if cloud in IN_TREE_CLOUDS:
        plugin = PLUGINS[IN_TREE_CLOUDS[cloud]]
        chosen.append(plugin.key)
        drop.add("cloud-provider")
        notes.append(
            f"--cloud-provider={cloud} becomes --cloud-provider=external (KEP-2395: kubelets from "
            f"1.31 start with no other value). From then on {plugin.controller_manager} "
            "initializes this node (its addresses and providerID, and the removal of the "
            "node.cloudprovider.kubernetes.io/uninitialized taint): run it in the cluster before "
            "this kubelet restarts, or the node keeps that taint and pods that do not tolerate it "
            "are not scheduled on it."
        )
    elif cloud not in (None, "", "external"):
        known = ", ".join(sorted(IN_TREE_CLOUDS))
        raise NodeChangeError(
            f"the kubelet's flags say --cloud-provider={cloud}, a built-in cloud provider whose "
            f"nodes had no registry login to replace (migrate moves {known}); kubelets from 1.31 "
            f"start with no built-in provider at all: move it to --cloud-provider=external with "
            f"that cloud's controller manager first, then run migrate again (nothing was changed)"
        )
    elif cloud == "external" and providers is None:
        notes.append(
            "--cloud-provider=external: keep it. Which cloud the node is on is not in the "
            f"flags, so pass --providers (for example --providers {next(iter(PLUGINS))}) or edit the "
            "generated config."
        )
    for plugin in PLUGINS.values():  # a flag only that cloud's in-tree login read
        for flag in plugin.implied_by_flags:
            if flag_value(args, flag) is not None:
                drop.add(flag)
                if plugin.key not in chosen:
                    chosen.append(plugin.key)
    if providers is not None:
        chosen = _known_providers(providers)
    return chosen, drop


def _gates_to_remove(args: list[str], config: Mapping[str, Any], notes: list[str]) -> list[str]:
    set_gates = set(dict(config.get("featureGates") or {}))
    for value in flag_values(args, "feature-gates"):
        set_gates.update(item.partition("=")[0].strip() for item in value.split(","))
    found = [gate for gate in REMOVED_GATES if gate in set_gates]
    for gate in found:
        notes.append(
            f"The {gate} feature gate is {REMOVED_GATES[gate]}: a kubelet that no longer knows it "
            "refuses to start ('unrecognized feature gate'), so it is taken out of --feature-gates "
            "and featureGates."
        )
    return found


def _merged_config(
    chosen: list[str],
    node_files: dict[str, str],
    existing: ExistingConfig | None,
    notes: list[str],
) -> str:
    if existing is None or not existing.providers:
        return render_config(chosen, node_files, writer="migrate")
    kept_names = {str(provider.get("name")) for provider in existing.providers}
    ours = [key for key in chosen if PLUGINS[key].name not in kept_names]
    for key in chosen:
        plugin = PLUGINS[key]
        entry = provider_entry(plugin, node_files.get(key))
        for provider, source in zip(existing.providers, existing.sources, strict=True):
            if provider.get("name") == plugin.name:
                differing = sorted(
                    k for k in {*entry, *provider} if entry.get(k) != provider.get(k)
                )
                if differing:
                    notes.append(
                        f"Conflict: {source} already has a provider named {plugin.name}; it is kept "
                        f"as it is, though credprovider would write its {', '.join(differing)} "
                        f"otherwise (compare with: credprovider install --help)."
                    )
            elif key in ours:
                shared = sorted(set(entry["matchImages"]) & set(provider.get("matchImages") or []))
                if shared:
                    notes.append(
                        f"Conflict: {provider.get('name')} (from {source}) and {plugin.name} both "
                        f"match {', '.join(shared)}: the kubelet runs both for such an image and "
                        f"tries {provider.get('name')}'s credentials first."
                    )
    notes.append(
        f"The providers of {existing.path} ({', '.join(sorted(kept_names))}) are kept in the new "
        "config, first and with their names."
    )
    return render_config(
        ours, node_files, writer="migrate", first=existing.providers, as_json=existing.as_json
    )


def _bin_dir_notes(
    existing: ExistingConfig | None, current: str | None, bin_dir: str, notes: list[str]
) -> None:
    if existing and existing.providers and current and current != bin_dir:
        names = ", ".join(str(provider.get("name")) for provider in existing.providers)
        notes.append(
            f"The kept providers ({names}) run from {current} today: put them in {bin_dir} as "
            f"well before restarting the kubelet (credprovider validate --bin-dir {bin_dir} checks)."
        )


# kubeadm writes kubeadm-flags.env from its configuration at init and join (kubeadm's
# nodeRegistration.kubeletExtraArgs; the v1beta4 API takes a list of name/value pairs, v1beta3 a
# map), and the control plane's components get --cloud-provider from ClusterConfiguration's
# extraArgs: both must change, or every node joined later has the old flags again.
KUBEADM_LATER_NODES: Final = (
    "kubeadm: nodes joined later get their flags from kubeadm's configuration, not from this "
    "node: set cloud-provider to external (and drop DisableKubeletCloudCredentialProviders) in "
    "nodeRegistration.kubeletExtraArgs of your JoinConfiguration and InitConfiguration (v1beta4: "
    "a name/value list), and "
    "remove --cloud-provider from the control plane (ClusterConfiguration apiServer.extraArgs and "
    "controllerManager.extraArgs: kubectl -n kube-system edit cm kubeadm-config) before the next "
    "kubeadm join or upgrade."
)


_GATES_BLOCK: Final = re.compile(r"^featureGates:[ \t]*(?:#.*)?\n((?:[ \t]+.*\n?|[ \t]*\n)*)", re.M)


def _rewrite_kubelet_config(
    plan: MigrationPlan, path: str, text: str, gates: list[str], config: Mapping[str, Any]
) -> None:
    """The KubeletConfiguration without the removed gates (block-style YAML, as kubeadm writes it)."""
    in_config = [gate for gate in gates if gate in dict(config.get("featureGates") or {})]
    if not in_config:
        return
    block = _GATES_BLOCK.search(text)
    if block is None:
        plan.notes.append(f"Remove {', '.join(in_config)} from featureGates in {path} by hand.")
        return
    lines = block.group(1).splitlines(keepends=True)
    kept = [line for line in lines if line.strip().partition(":")[0].strip() not in in_config]
    body = "".join(kept)
    head = "featureGates:\n" if body.strip() else "featureGates: {}\n"
    new = text[: block.start()] + head + body + text[block.end() :]
    plan.files[path] = new
    plan.remove.extend(f"featureGates.{gate} in {path}" for gate in in_config)

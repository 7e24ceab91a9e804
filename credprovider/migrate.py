"""``credprovider migrate``: from a kubelet's in-tree cloud login to these plugins.

It reads what operators have: the kubelet's flags as a string, or the file they live in (kubeadm's
``/var/lib/kubelet/kubeadm-flags.env``, ``/etc/default/kubelet``, ``/etc/sysconfig/kubelet``, a systemd
unit or drop-in), and/or its KubeletConfiguration; and prints the flags to remove and add and the
CredentialProviderConfig to write. Pure functions: the CLI does the reading and printing.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Final

from credprovider.catalog import NODE_BIN_DIR, NODE_CONFIG, PLUGINS
from credprovider.descriptor import CloudPlugin
from credprovider.install import CCM_REMINDER, InstallError, kubelet_flags, render_config
from credprovider.yamldoc import YamlError, load_yaml

# kubelet --cloud-provider value -> the plugin (key) that replaces its in-tree login
IN_TREE_CLOUDS: Final = {
    cloud: plugin.key for plugin in PLUGINS.values() for cloud in plugin.in_tree_clouds
}
# NAME=VALUE with a shell-quoted value, as in an env file or inside systemd's Environment=.
_ASSIGNMENT: Final = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_FLAGS_VARIABLE: Final = re.compile(r"^KUBELET_[A-Z0-9_]*ARGS$|^KUBELET_OPTS$|^DAEMON_ARGS$")


@dataclass
class MigrationPlan:
    providers: list[str]
    remove: list[str]
    add: list[str]
    config: str
    notes: list[str]


def flags_from_file(text: str) -> str:
    """The kubelet flags a flags file holds, as one string.

    Understood: env files (``KUBELET_KUBEADM_ARGS="..."``, ``KUBELET_EXTRA_ARGS=...``,
    ``KUBELET_OPTS``, ``DAEMON_ARGS``; ``export`` allowed), systemd units and drop-ins
    (``Environment="KUBELET_EXTRA_ARGS=..."`` and the arguments of ``ExecStart=.../kubelet ...``,
    continued lines joined), and a file that is just the flags.
    """
    joined = re.sub(r"\\\n", " ", text)
    found: list[str] = []
    saw_structure = False
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";", "[")):
            saw_structure = saw_structure or line.startswith("[")
            continue
        key, _, rest = line.partition("=")
        if key == "Environment":
            saw_structure = True
            try:
                assignments = shlex.split(rest)
            except ValueError as exc:
                raise InstallError(f"cannot read {line[:80]!r}: {exc}") from None
            for assignment in assignments:
                name, _, value = assignment.partition("=")
                if _FLAGS_VARIABLE.match(name):
                    found.append(value)
            continue
        if key == "ExecStart":
            saw_structure = True
            words = _split(rest)
            if words and words[0].lstrip("-@+!:").rsplit("/", 1)[-1] == "kubelet":
                # $VARIABLES are the Environment= and EnvironmentFile= values read above or
                # passed on their own (kubeadm's drop-in: EnvironmentFile=kubeadm-flags.env)
                found.append(shlex.join(w for w in words[1:] if not w.startswith("$")))
            continue
        match = _ASSIGNMENT.match(line)
        if match:
            saw_structure = True
            if _FLAGS_VARIABLE.match(match.group(1)):
                values = _split(match.group(2))
                found.append(values[0] if len(values) == 1 else shlex.join(values))
            continue
        if line.startswith("-") and not saw_structure:
            found.append(line)
    return " ".join(found)


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise InstallError(f"cannot read {text[:80]!r}: {exc}") from None


def _flag_value(args: list[str], name: str) -> tuple[str | None, str | None]:
    """(value, the original flag text) for ``--name=value`` or ``--name value``."""
    for i, arg in enumerate(args):
        stripped = arg.lstrip("-")
        if stripped == name and i + 1 < len(args):
            return args[i + 1], f"{arg} {args[i + 1]}"
        if stripped.startswith(name + "="):
            return stripped.split("=", 1)[1], arg
    return None, None


def _node_files(args: list[str], plugins: list[CloudPlugin]) -> dict[str, str]:
    """Each chosen plugin's node file (azure.json) as the old flags name it, by plugin key: the
    first of the plugin's own flags that is set."""
    found: dict[str, str] = {}
    for plugin in plugins:
        for flag in plugin.node_file_flags:
            value, _ = _flag_value(args, flag)
            if value:
                found[plugin.key] = value
                break
    return found


def _read_inputs(flags_text: str, config_text: str) -> tuple[list[str], dict[str, Any]]:
    """The kubelet's flags as words, and its KubeletConfiguration as a mapping ({} if none)."""
    try:
        args = shlex.split(flags_text)
    except ValueError as exc:
        raise InstallError(f"the kubelet flags cannot be split like a shell would: {exc}") from None
    if not config_text.strip():
        return args, {}
    try:
        loaded = load_yaml(config_text)
    except YamlError as exc:
        raise InstallError(f"the KubeletConfiguration is not YAML: {exc}") from None
    return args, loaded if isinstance(loaded, dict) else {}


def _known_providers(providers: list[str]) -> list[str]:
    unknown = [key for key in providers if key not in PLUGINS]
    if unknown:
        raise InstallError(
            f"unknown provider {', '.join(unknown)}: choose from {', '.join(sorted(PLUGINS))}"
        )
    return list(dict.fromkeys(providers))


def plan_migration(
    kubelet_flags_text: str = "",
    kubelet_config_text: str = "",
    bin_dir: str = NODE_BIN_DIR,
    config_path: str = NODE_CONFIG,
    providers: list[str] | None = None,
) -> MigrationPlan:
    """From a kubelet's old flags and/or KubeletConfiguration, what to change for out-of-tree login.

    ``providers`` (keys of :data:`~credprovider.catalog.PLUGINS`) names the clouds when the flags do
    not (``--cloud-provider=external``), or overrides what they say.
    """
    args, config = _read_inputs(kubelet_flags_text, kubelet_config_text)
    chosen: list[str] = []
    remove: list[str] = []
    notes: list[str] = []
    cloud, cloud_flag = _flag_value(args, "cloud-provider")
    if cloud in IN_TREE_CLOUDS:
        chosen.append(IN_TREE_CLOUDS[cloud])
        remove.append(cloud_flag or f"--cloud-provider={cloud}")
    elif cloud == "external" and providers is None:
        notes.append(
            "--cloud-provider=external: keep it. Which cloud the node is on is not in the "
            f"flags, so pass --providers (for example --providers {next(iter(PLUGINS))}) or edit the "
            "generated config."
        )
    for plugin in PLUGINS.values():  # a flag only that cloud's in-tree login read
        for flag in plugin.implied_by_flags:
            value, written = _flag_value(args, flag)
            if value is not None:
                remove.append(written or f"--{flag}")
                if plugin.key not in chosen:
                    chosen.append(plugin.key)
    if providers is not None:
        chosen = _known_providers(providers)
    node_files = _node_files(args, [PLUGINS[key] for key in chosen])
    _feature_gate_notes(args, config, remove, notes)
    existing, _ = _flag_value(args, "image-credential-provider-config")
    existing = existing or config.get("imageCredentialProviderConfigPath")
    if existing:
        notes.append(
            f"A credential provider config is already configured ({existing}): merge the "
            "providers below into it, or point the flag at a directory (kubelet >= 1.34)."
        )
    if not chosen:
        notes.append("No in-tree cloud provider found: nothing to migrate.")
    add = ["--cloud-provider=external"] if cloud in IN_TREE_CLOUDS else []
    add += kubelet_flags(config_path, bin_dir) if chosen else []
    rendered = render_config(chosen, node_files, writer="migrate") if chosen else ""
    notes.append(CCM_REMINDER)
    return MigrationPlan(chosen, remove, add, rendered, notes)


def _feature_gate_notes(
    args: list[str], config: dict[str, Any], remove: list[str], notes: list[str]
) -> None:
    gates, gates_flag = _flag_value(args, "feature-gates")
    gate_map = dict(config.get("featureGates") or {})
    if gates:
        for item in gates.split(","):
            name, _, value = item.partition("=")
            gate_map[name.strip()] = value.strip().lower() == "true"
    if "DisableKubeletCloudCredentialProviders" in gate_map:
        notes.append(
            "The DisableKubeletCloudCredentialProviders feature gate is locked on since 1.31 "
            "and removed after 1.32: remove it from --feature-gates/featureGates."
        )
        if gates_flag:
            remove.append(f"DisableKubeletCloudCredentialProviders from {gates_flag}")

"""Would the kubelet start with a credential provider config as a change leaves it? Its own checks
at start: the config decoded and validated (as text, when it is yet to be written), and every
provider's plugin in the bin dir (a link the change re-points or removes taken as it will be)."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from credprovider.tool.images.bindir import check_binaries
from credprovider.tool.kubeconfig.model import ConfigError, LoadedConfig
from credprovider.tool.kubeconfig.validate import load_config

if TYPE_CHECKING:
    from credprovider.tool.change.migrate import MigrationPlan


def loaded_as_left(path: Path, text: str | None) -> LoadedConfig | str:
    """The config at ``path`` (``text``: the file as it will be; ``None``: as it is) as the
    kubelet loads it at start, or why the kubelet would refuse it."""
    try:
        return load_config(str(path), text=text)
    except ConfigError as exc:
        return f"the kubelet would not start with the config {path}: {exc}"


def plugins_missing(
    loaded: LoadedConfig,
    bin_dir: Path,
    removed: Collection[str],
    relinked: Mapping[str, str],
) -> list[str]:
    """The providers of ``loaded`` whose plugin would not be in ``bin_dir`` after a change that
    removes the paths ``removed`` and points each link of ``relinked`` at its target."""
    missing = []
    for provider in loaded.providers:
        plugin = bin_dir / str(provider.name)
        if str(plugin) in removed:
            missing.append(str(provider.name))
        elif str(plugin) in relinked:
            if not os.path.exists(bin_dir / relinked[str(plugin)]):
                missing.append(str(provider.name))
        elif not os.path.exists(plugin):
            missing.append(str(provider.name))
    return missing


def migration_would_not_start(plan: MigrationPlan, config_out: str) -> str | None:
    """Why the kubelet would not start on the node as --write would leave it, checked as the
    kubelet checks it at start (its config validated, every provider's plugin in its bin dir), if
    it would not."""
    if not plan.providers and not plan.config:
        return None  # no credential provider flags: the kubelet reads no config
    try:
        loaded = load_config(config_out, text=plan.config or None)
    except ConfigError as exc:
        return f"the kubelet would not start with the config it would read: {exc}"
    fatal = [str(e) for e in check_binaries(loaded, plan.bin_dir).stops_kubelet]
    if not fatal:
        return None
    return (
        f"{fatal[0]}; put the plugins there first (credprovider "
        f"{' '.join(plan.install_args(config_out))})"
    )

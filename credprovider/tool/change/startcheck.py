"""Would the kubelet start with a credential provider config as a change leaves it? Its own checks
at start: the config decoded and validated (as text, when it is yet to be written), and every
provider's plugin in the bin dir (a link the change re-points or removes taken as it will be).
And would the plugins a change links answer: each started offline with its entry's args and env,
before anything changes (a plugin refusing them fails every pull it matches)."""

from __future__ import annotations

import os
import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from credprovider.tool.change.render import bundle_launcher
from credprovider.tool.images.bindir import check_binaries
from credprovider.tool.images.startcheck import check_start
from credprovider.tool.kubeconfig.model import ConfigError, LoadedConfig
from credprovider.tool.kubeconfig.validate import load_config

if TYPE_CHECKING:
    from credprovider.tool.change.migrate import MigrationPlan


def loaded_as_left(
    path: Path, text: str | None, sa_tokens: bool = True, at: Path | None = None
) -> LoadedConfig | str:
    """The config at ``path`` (``text``: the file as it will be; ``None``: as it is; with ``at``,
    the file ``at`` in the config directory ``path`` as it will be) as the kubelet loads it at
    start (``sa_tokens``: whether it takes ``tokenAttributes``), or why the kubelet would refuse
    it."""
    try:
        return load_config(str(path), sa_tokens, text=text, at=None if at is None else str(at))
    except ConfigError as exc:
        return f"the kubelet would not start with the config {path}: {exc.describe()}"


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


def plugin_refusing(
    loaded: LoadedConfig,
    names: Collection[str],
    bin_dir: str,
    executable: str,
    settings: bool = True,
) -> str:
    """Why the first provider of ``loaded`` among ``names`` would fail every pull ("": none would):
    its plugin, started offline as ``<bin_dir>/<name>`` from ``executable`` (the bundle its link
    will name) with the entry's args and env, refuses them (``settings``: and the files they name
    on this machine, read as a pull reads them). A bundle that does not start is said elsewhere
    (install asks it its version first; the agent's dry run)."""
    for provider in loaded.providers:
        name = provider.name or ""
        if name not in names:
            continue
        args, env = provider.args or [], provider.env_pairs()
        started = check_start(name, bin_dir, args, env, executable=executable, settings=settings)
        if started.refuses_args:
            return f"{started.error}: every pull it matches would fail"
    return ""


def own_plugin_refusing(path: str, text: str, names: Collection[str]) -> str:
    """:func:`plugin_refusing` for the config ``text`` (to be written at ``path``), the plugins
    started from the bundle this process runs from ("" from source: it has none to start), on
    their args alone: the config is for other machines (render's platforms, the agent's nodes),
    whose files are not this one's."""
    launcher = bundle_launcher(Path(sys.executable).resolve())
    if launcher is None:
        return ""
    loaded = loaded_as_left(Path(path), text)
    if isinstance(loaded, str):
        return loaded
    return plugin_refusing(loaded, names, str(launcher.parent), str(launcher), settings=False)


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

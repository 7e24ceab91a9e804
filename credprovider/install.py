"""``credprovider install``: put the plugins on a node and write the kubelet config (``migrate``
is in credprovider/migrate.py)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from credprovider.api import API_V1
from credprovider.catalog import PLUGINS
from credprovider.config import CONFIG_KIND
from credprovider.config_lint import lint_providers
from credprovider.config_validate import load_config
from credprovider.descriptor import CloudPlugin
from credprovider.errors import CredproviderError

BUNDLE_COPY_DIR: Final = ".credprovider"
CCM_REMINDER: Final = (
    "The credential plugin only replaces image-pull login. Node initialization, routes, load "
    "balancers and volumes need the cloud controller manager (and CSI drivers): run them, with "
    "--cloud-provider=external on the kubelet."
)


class InstallError(CredproviderError):
    """Install would overwrite something different, or cannot find what to install."""


@dataclass
class InstallResult:
    actions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    kubelet_flags: list[str] = field(default_factory=list)


def kubelet_flags(config_path: str, bin_dir: str) -> list[str]:
    return [
        f"--image-credential-provider-config={config_path}",
        f"--image-credential-provider-bin-dir={bin_dir}",
    ]


def provider_entry(plugin: CloudPlugin, node_file: str | None = None) -> dict[str, Any]:
    """One CredentialProviderConfig provider with complete matchImages for ``plugin``; ``node_file``
    replaces the node file its first argument names (azure.json), if it takes one."""
    args = list(plugin.args)
    if plugin.node_file_arg is not None and node_file:
        args[0] = node_file
    entry: dict[str, Any] = {
        "name": plugin.name,
        "apiVersion": API_V1,
        "defaultCacheDuration": plugin.default_cache_duration,
        "matchImages": list(plugin.match_images),
    }
    if args:
        entry["args"] = args
    return entry


def render_config(
    keys: list[str], node_files: Mapping[str, str] | None = None, writer: str = "install"
) -> str:
    """The CredentialProviderConfig YAML for the chosen plugins (keys of ``catalog.PLUGINS``),
    headed by the command that wrote it. ``node_files`` maps a plugin's key to the node file it is
    given instead of its default (each plugin its own: azure.json is not another cloud's file)."""
    node_files = node_files or {}
    document = {
        "apiVersion": "kubelet.config.k8s.io/v1",
        "kind": CONFIG_KIND,
        "providers": [provider_entry(PLUGINS[key], node_files.get(key)) for key in keys],
    }
    header = (
        f"# Written by credprovider {writer}. Validate with: credprovider validate <this file>\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def bundle_launcher(interpreter: Path) -> Path | None:
    """The bundle's top-level ``credprovider`` (the launcher every name must link to), when
    ``interpreter`` is a bundle's own (``_internal/credprovider-main``); otherwise ``None``."""
    launcher = interpreter.parent.parent / "credprovider"
    if interpreter.name == "credprovider-main" and interpreter.parent.name == "_internal":
        return launcher if launcher.is_file() else None
    return None


def bundle_executable(target: str | None) -> Path:
    if target:
        path = Path(target).resolve()
    elif (launcher := bundle_launcher(Path(sys.executable).resolve())) is not None:
        path = launcher
    else:
        raise InstallError(
            "run install from the bundle (dist/credprovider/credprovider install ...) "
            "or pass --target /path/to/credprovider"
        )
    if not path.is_file() or not os.access(path, os.X_OK):
        raise InstallError(f"{path} is not an executable file")
    return path


def _place_link(link: Path, target: Path, force: bool, result: InstallResult) -> None:
    if link.is_symlink() and Path(os.readlink(link)) == target:
        result.actions.append(f"unchanged {link} -> {target}")
        return
    if link.exists() or link.is_symlink():
        if not force:
            raise InstallError(
                f"{link} exists and is not a link to {target}: pass --force to replace it"
            )
        link.unlink()
    link.symlink_to(target)
    result.actions.append(f"linked {link} -> {target}")


def _is_our_copy(destination: Path, launcher: str) -> bool:
    """A real directory (not a symlink) owned by this user, holding the launcher and the bundle's
    manifest: what :func:`_copy_bundle` writes."""
    try:
        info = destination.lstat()
    except OSError:
        return False
    import stat

    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.geteuid()
        and (destination / launcher).is_file()
        and not (destination / launcher).is_symlink()
        and (destination / "_internal" / "credprovider.files").is_file()
    )


def _copy_bundle(executable: Path, bin_dir: Path, force: bool, result: InstallResult) -> Path:
    """Copy the whole onedir bundle into the bin dir (the executable needs its _internal/)."""
    destination = bin_dir / BUNDLE_COPY_DIR
    source = executable.parent
    if destination.is_symlink() or destination.exists():
        ours = _is_our_copy(destination, executable.name)
        if not force:
            if not ours:
                raise InstallError(
                    f"{destination} exists and is not a bundle copy this tool made (a symlink, a "
                    "file, or a directory without the bundle's manifest): inspect it, then pass "
                    "--force to replace it"
                )
            result.actions.append(f"unchanged {destination} (an earlier copy; --force to refresh)")
            return destination / executable.name
        if destination.is_symlink() or not destination.is_dir():
            destination.unlink()  # the link itself, never what it points at
        else:
            shutil.rmtree(destination)
    shutil.copytree(
        source,
        destination,
        symlinks=True,
        ignore=lambda _, names: [n for n in names if (source / n).is_symlink()],
    )
    result.actions.append(f"copied the bundle {source} to {destination}")
    return destination / executable.name


def install(
    bin_dir: str,
    config_out: str,
    keys: list[str],
    node_files: Mapping[str, str] | None = None,
    copy: bool = False,
    force: bool = False,
    target: str | None = None,
) -> InstallResult:
    """Install the plugin names into ``bin_dir`` and write a validated config to ``config_out``."""
    unknown = [key for key in keys if key not in PLUGINS]
    if unknown:
        raise InstallError(
            f"unknown provider(s) {', '.join(unknown)}: choose from {', '.join(PLUGINS)}"
        )
    result = InstallResult()
    executable = bundle_executable(target)
    directory = Path(bin_dir)
    directory.mkdir(parents=True, exist_ok=True)
    link_target = _copy_bundle(executable, directory, force, result) if copy else executable
    for key in keys:
        _place_link(directory / PLUGINS[key].name, link_target, force, result)
    text = render_config(keys, node_files)
    out = Path(config_out)
    try:
        current: bytes | None = out.read_bytes() if out.exists() else None
    except OSError as exc:
        raise InstallError(f"cannot read {out}: {exc.strerror or exc}") from None
    if current is not None and current != text.encode() and not force:
        raise InstallError(f"{out} exists with other content: pass --force to replace it")
    if current == text.encode():
        result.actions.append(f"unchanged {out}")
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        result.actions.append(f"wrote {out}")
    loaded = load_config(str(out))
    result.warnings = lint_providers(loaded, str(directory))
    result.kubelet_flags = kubelet_flags(str(out.resolve()), str(directory.resolve()))
    return result

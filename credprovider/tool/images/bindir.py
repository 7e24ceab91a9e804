"""A bin dir checked as the kubelet finds and starts each provider's binary (validate --bin-dir,
install, migrate --write and doctor): a missing bin dir or binary, or a dangling link, means the
kubelet would NOT start; a binary that cannot run fails every pull it matches. Each finding
carries its provider as data."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from credprovider.tool.images.startcheck import check_start
from credprovider.tool.kubeconfig.model import LoadedConfig
from credprovider.tool.node.access import check_access
from credprovider.tool.node.root import NodeRoot, RootPathError
from credprovider.tool.node.trust import config_problem


@dataclass(frozen=True)
class Finding:
    """One line of a bin dir check, with what it is about as data: ``provider`` ("" for the bin
    dir itself) and whether the kubelet would not start at all (``stops_kubelet``), rather than
    one provider failing every pull it matches."""

    provider: str
    text: str  # the line as every command prints it
    stops_kubelet: bool = False
    refuses_args: bool = False  # the plugin runs, and refuses its args, env or settings files

    def __str__(self) -> str:
        return self.text


@dataclass
class BinaryCheck:
    """What the bin dir proved for each provider: ``errors`` (the kubelet would not start, or a
    provider can never run), ``warnings`` (it runs, but not all could be proven), ``proven``."""

    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    proven: list[Finding] = field(default_factory=list)

    @property
    def stops_kubelet(self) -> list[Finding]:
        """The errors with which the kubelet would not start at all."""
        return [finding for finding in self.errors if finding.stops_kubelet]


def texts(found: list[Finding]) -> list[str]:
    """Findings as the lines every command prints."""
    return [finding.text for finding in found]


def check_binaries(
    loaded: LoadedConfig,
    bin_dir: str,
    environment: Mapping[str, str] | None = None,
    root: NodeRoot | None = None,
    both_or_neither: bool = False,
) -> BinaryCheck:
    """Check every provider's binary in ``bin_dir`` as the kubelet would find and start it (in
    ``environment``, the kubelet's; default: this process's): the
    kubelet refuses to start without the bin dir or a binary; a binary that cannot run fails every
    pull it matches. Raises :class:`~credprovider.tool.node.access.UnreadableError` where this (non-root)
    user may not look. Under ``root`` (a node's filesystem mounted there, ``bin_dir`` under it), a
    plugin's links are followed inside the root, as the node's kubelet follows them.
    ``both_or_neither``: the platform passes the kubelet the two flags only when both paths exist
    (k3s, RKE2), so a missing bin dir leaves the kubelet without plugins instead."""
    result = BinaryCheck()
    if not _is_directory(bin_dir):
        first = loaded.providers[0].name or ""
        result.errors.append(
            Finding(
                "",
                f"the bin dir {bin_dir} does not exist: the platform passes the kubelet neither "
                "credential provider flag until both exist as it starts, so no provider runs and "
                "every pull that needs one has no credentials",
            )
            if both_or_neither
            else Finding(
                "",
                f"the bin dir {bin_dir} does not exist: the kubelet would NOT start (plugin binary "
                f"executable {Path(bin_dir) / first} did not exist)",
                stops_kubelet=True,
            )
        )
        return result
    for provider, source in zip(loaded.providers, loaded.provider_sources, strict=True):
        name = provider.name or ""
        where = f"provider {name!r}"
        missing = _missing_binary(Path(bin_dir) / name, root)
        if missing:
            result.errors.append(Finding(name, f"{where}: {missing}", stops_kubelet=True))
            continue
        refused = config_problem(str(source))
        if refused:
            result.warnings.append(Finding(name, f"{where}: {refused}"))
            continue
        started = check_start(
            name,
            bin_dir,
            provider.args or [],
            provider.env_pairs(),
            base=environment,
            executable=_inside(root, Path(bin_dir) / name),
            settings=root is None or root.is_host,  # under a root, the files are the node's
        )
        if started.error:
            result.errors.append(
                Finding(
                    name,
                    f"{where}: {started.error}: every pull it matches fails",
                    refuses_args=started.refuses_args,
                )
            )
        if started.warning:
            result.warnings.append(Finding(name, f"{where}: {started.warning}"))
        if started.proven and not started.warning:  # a warning says what it proved too
            result.proven.append(Finding(name, f"{where}: {started.path}: {started.proven}"))
    return result


def _inside(root: NodeRoot | None, binary: Path) -> str | None:
    """Under a node's root: the file ``binary`` is on that node, its links (an install's absolute
    ones too) followed inside the root, as the node's kubelet follows them."""
    if root is None or root.is_host:
        return None
    try:
        return str(root.host(root.node_path(binary)))
    except RootPathError:
        return None  # a loop of links: exec reports it


def _is_directory(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError as exc:
        check_access(path, exc)
        return False
    except ValueError:
        return False


def _missing_binary(binary: Path, root: NodeRoot | None = None) -> str | None:
    """Why the kubelet would find no binary at ``binary`` (it refuses to start), if so."""
    try:
        os.lstat(binary)
    except OSError as exc:
        check_access(str(binary), exc)
        return (
            f"{binary} does not exist: the kubelet would NOT start (plugin binary executable "
            "did not exist)"
        )
    except ValueError:  # a NUL in the name
        return f"{str(binary)!r} cannot exist: the kubelet would NOT start"
    try:
        if root is not None and not root.is_host:
            os.stat(root.host(root.node_path(binary)))  # its links followed inside the root
        else:
            os.stat(binary)
    except (OSError, RootPathError) as exc:
        if isinstance(exc, OSError):
            check_access(str(binary), exc)
        return (
            f"{binary} is a symlink to {os.readlink(binary)}, which does not exist: the kubelet "
            "would NOT start (plugin binary executable did not exist)"
        )
    return None

"""``credprovider install`` as a plan, then its application: all or nothing.

:func:`plan_install` looks at the bin dir and the config and runs the executable to be linked (it
must answer as credprovider), and changes nothing. Each step is a :class:`Step`: to make, already
so, or refused (something of someone else's would be replaced: ``--force`` replaces it, keeping a
backup beside it). When any step is refused, nothing is applied.
:mod:`credprovider.tool.change.install_apply` then makes the changes so that the kubelet never
finds a plugin name missing or dangling: links and the config are replaced by rename, a bundle
copy is put in place before the links move.

Upgrades are ordinary: a link into another credprovider bundle, or an earlier ``--copy``, is an
upgrade ("from 0.1.0 to 0.2.0") and needs no ``--force``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from credprovider.runtime.nodefile import special_kind
from credprovider.tool.catalog import PLUGINS, not_known
from credprovider.tool.change.confine import BUNDLE_MANIFEST as MANIFEST
from credprovider.tool.change.engine import BACKUP_SUFFIX, backup_stamp
from credprovider.tool.change.merge import (
    dropped_comments,
    holds_providers,
    other_providers,
    without_plugin,
)
from credprovider.tool.change.render import (
    BUNDLE_COPY_DIR,
    bundle_executable,
    render_config,
    written_as_json,
)
from credprovider.tool.change.results import Action, Step
from credprovider.tool.change.settings import Settings
from credprovider.tool.change.startcheck import loaded_as_left, plugin_refusing
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.images.startcheck import NotCredprovider, credprovider_version
from credprovider.tool.kubeconfig.model import CONFIG_EXTENSIONS
from credprovider.tool.node.access import (
    FileProblem,
    link_target,
    read_bytes,
    unreadable,
)
from credprovider.tool.node.root import HOST
from credprovider.tool.node.trust import place_problem, untrusted


@dataclass
class InstallPlan:
    bin_dir: Path
    config_out: Path
    config_text: str
    executable: Path
    version: str
    copy: bool
    changes: list[Step] = field(default_factory=list)
    # The config directory the kubelet reads whole (1.34+), config_out one file in it
    config_directory: Path | None = None

    @property
    def kubelet_reads(self) -> Path:
        """What the kubelet's --image-credential-provider-config names: the config directory
        the config is written in, else the config."""
        return self.config_directory or self.config_out

    @property
    def refused(self) -> list[Step]:
        return [change for change in self.changes if change.refused]


def plan_install(
    bin_dir: str,
    config_out: str,
    keys: list[str],
    node_files: Mapping[str, str] | None = None,
    copy: bool = False,
    force: bool = False,
    target: str | None = None,
    as_name: str | None = None,
    settings: Settings | None = None,
    sa_tokens: bool = True,
    config_directory: str | None = None,
) -> InstallPlan:
    """Every change install would make, each checked; nothing is changed. ``as_name``: one more
    provider of the one plugin in ``keys``, under that name (install --as): its link, and its entry
    added to the config's providers, which are kept. ``settings``: per key, fields replacing the
    shipped defaults (``--provider-settings``, change/settings.py); ``sa_tokens``: whether the
    node's kubelet takes ``tokenAttributes``; ``config_directory``: the config directory the
    kubelet reads, ``config_out`` a file in it (checked with the others, as the kubelet reads
    them: a provider named in two of them, and it would not start)."""
    if not_known(keys):
        raise NodeChangeError(not_known(keys))
    for place in (Path(bin_dir), Path(config_out).parent):
        check_writable(place)
    executable = bundle_executable(target)
    if not copy:
        _require_roots(executable)
    try:
        version = credprovider_version(str(executable))
    except NotCredprovider as exc:
        raise NodeChangeError(f"{exc}: nothing was installed") from None
    directory = Path(bin_dir)
    stamp = backup_stamp()
    names = {key: as_name for key in keys} if as_name else {}
    current = _current_config(Path(config_out))
    # a config the node has keeps its other providers, first and as they are, in its own format
    ours = {names.get(key) or PLUGINS[key].name for key in keys}
    kept = [p for p in other_providers(current[0], None) if p.get("name") not in ours]
    as_json = written_as_json(current[0])
    text = render_config(
        keys, node_files, first=kept, names=names, settings=settings, as_json=as_json
    )
    plan = InstallPlan(directory, Path(config_out), text, executable, version, copy)
    plan.config_directory = Path(config_directory) if config_directory else None
    link_target = executable
    if copy:
        link_target = directory / BUNDLE_COPY_DIR / executable.name
        plan.changes.append(_plan_copy(plan, force, stamp))
    for key in keys:
        link = directory / (names.get(key) or PLUGINS[key].name)
        plan.changes.append(_plan_link(link, link_target, version, force, stamp))
    config = _plan_config(plan.config_out, current, plan.config_text, force, stamp, adds=as_name)
    if config.action is not Action.UNCHANGED:
        config.refused = config.refused or _config_refused(plan, kept, ours, sa_tokens) or None
    plan.changes.append(config)
    return plan


def _config_refused(
    plan: InstallPlan, kept: list[dict[str, object]], ours: set[str], sa_tokens: bool
) -> str:
    """Why the config as install would write it must not be ("": it may): the kubelet's own checks
    on the text (a setting, or a kept provider, it refuses), every kept provider's plugin in the
    bin dir, and each of ours started offline with its args and env, from the executable its link
    will name (a plugin refusing them fails every pull it matches)."""
    loaded = loaded_as_left(plan.config_out, plan.config_text, sa_tokens)
    if isinstance(loaded, str):
        return f"{loaded}; nothing is written that it would refuse"
    if plan.config_directory is not None:
        if not plan.config_out.name.endswith(CONFIG_EXTENSIONS):
            return (
                f"the kubelet reads only the {', '.join(CONFIG_EXTENSIONS)} files of its config "
                f"directory {plan.config_directory}, and would never read "
                f"{plan.config_out.name}: give it one of those endings"
            )
        whole = loaded_as_left(plan.config_directory, plan.config_text, sa_tokens, plan.config_out)
        if isinstance(whole, str):
            return (
                f"the kubelet reads the directory {plan.config_directory} whole, and with "
                f"{plan.config_out} written there, {whole.removeprefix('the kubelet ')}; nothing "
                "is written that it would refuse"
            )
    missing = without_plugin(kept, lambda name: os.path.lexists(plan.bin_dir / name))
    if missing:
        return (
            f"it keeps the provider(s) {', '.join(missing)} of {plan.config_out}, whose plugin is "
            f"not in {plan.bin_dir}: the kubelet would not start; put it there, or give another "
            "--config-out"
        )
    return plugin_refusing(loaded, ours, str(plan.bin_dir), str(plan.executable))


def _require_roots(executable: Path) -> None:
    """Root linking the kubelet's plugins into a bundle someone else could change (one unpacked
    in a user's home, say) gives that user the kubelet's root at its next pull: refused, with
    ``--copy`` (the bin dir then holds a copy that is root's) or a root-owned place to use."""
    if os.geteuid() != 0 or not os.path.isfile(executable):
        return  # an unprivileged install links to what its own user controls; what is not a
        # file is said by the version check (a FIFO, a directory, nothing there)
    problem = untrusted(str(executable), user=0)
    if problem:
        raise NodeChangeError(
            f"nothing was changed: the bundle {executable.parent} is not root's alone ({problem}), "
            "and the kubelet would run the plugins linked there as root, so whoever can change "
            "it could run code as root: install --copy (a copy that is root's goes into the bin "
            "dir), or move the bundle where only root can write"
        )


def _current_config(out: Path) -> tuple[bytes | None, str | None]:
    """What the config file ``out`` holds now (read once, bounded), and why it could not be read;
    ``(None, None)`` when there is nothing there."""
    if not (out.exists() or out.is_symlink()):
        return None, None
    try:
        return read_bytes(str(out)), None
    except FileProblem as exc:
        return None, exc.reason


def check_writable(directory: Path) -> None:
    """Refuse, before anything is changed, a directory this user could not create or write in,
    and, as root, one someone else could change (the kubelet runs as root what is put there)."""
    if os.geteuid() == 0 and (problem := place_problem(str(directory))):
        raise NodeChangeError(f"nothing was changed: {problem}")
    existing = directory
    while not os.path.exists(existing) and existing != existing.parent:  # False when refused too
        existing = existing.parent
    if os.path.exists(existing) and not os.path.isdir(existing):
        under = "" if existing == directory else f", so {directory} cannot be made in it"
        raise NodeChangeError(
            f"{existing} is not a directory{under}: nothing was changed; give a path in a directory"
        )
    if os.access(existing, os.W_OK | os.X_OK):
        return
    if os.geteuid() != 0:
        error = PermissionError(13, "permission denied")
        raise unreadable(str(existing), error, "write in")
    raise NodeChangeError(
        f"cannot write in {existing} (a read-only file system?): nothing was changed"
    )


def _bundle_of(path: Path) -> Path | None:
    """The credprovider bundle directory ``path`` (resolved) lives in, if it is one."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    return real.parent if (real.parent / MANIFEST).is_file() else None


def _version_of(bundle: Path) -> str:
    try:
        return credprovider_version(str(bundle / "credprovider"))
    except NotCredprovider:
        return "an unknown version"


def _plan_link(link: Path, target: Path, version: str, force: bool, stamp: str) -> Step:
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return Step(Action.UNCHANGED, str(link), f"unchanged {link} -> {target}")
    if not (link.exists() or link.is_symlink()):
        return Step(Action.LINK, str(link), f"linked {link} -> {target}")
    old = _bundle_of(link) if link.is_symlink() else None
    if old is not None:
        was = _version_of(old)
        what = f"upgrade from {was} to {version}" if was != version else f"same version {version}"
        return Step(Action.UPGRADE, str(link), f"re-pointed {link} -> {target} ({what}; was {old})")
    if link.is_symlink() and not link.exists():
        return Step(
            Action.REPLACE, str(link), f"replaced the dangling link {link} (to {os.readlink(link)})"
        )
    shown = f"a link to {os.readlink(link)}" if link.is_symlink() else "not credprovider"
    return _overwrite(
        Step(Action.REPLACE, str(link), f"replaced {link} ({shown}) with a link to {target}"),
        force,
        stamp,
        "it is not a credprovider link: pass --force to replace it (a backup is kept)",
    )


def _plan_copy(plan: InstallPlan, force: bool, stamp: str) -> Step:
    destination = plan.bin_dir / BUNDLE_COPY_DIR
    source = plan.executable.parent
    if _mounted_noexec(str(plan.bin_dir)):
        return Step(
            Action.COPY,
            str(destination),
            f"copy the bundle {source} to {destination}",
            refused="the bin dir's filesystem is mounted noexec, so nothing copied there can run: "
            "install without --copy (the links then name this bundle), or give a bin dir on a "
            "mount programs may run from",
        )
    if not (destination.exists() or destination.is_symlink()):
        return Step(Action.COPY, str(destination), f"copied the bundle {source} to {destination}")
    if _is_copy(destination, plan.executable.name):
        was = _version_of(destination)
        if was == plan.version and _same_bundle(source, destination):
            return Step(Action.UNCHANGED, str(destination), f"unchanged {destination} ({was})")
        return Step(
            Action.UPGRADE,
            str(destination),
            f"replaced the bundle copy {destination} from {source} (upgrade from {was} to "
            f"{plan.version})",
        )
    return _overwrite(
        Step(Action.REPLACE, str(destination), f"replaced {destination} with a bundle copy"),
        force,
        stamp,
        "it exists and is not a bundle copy this tool made: inspect it, then pass --force "
        "(a backup is kept)",
        directory_expected=True,
    )


def _mounted_noexec(path: str) -> bool:
    """Whether the filesystem ``path`` is on (or would be made on) is mounted noexec."""
    try:
        return bool(HOST.mount_of(path)[1] & os.ST_NOEXEC)
    except OSError:  # cannot tell: the check after the copy says what it finds
        return False


def _plan_config(
    out: Path,
    now: tuple[bytes | None, str | None],
    text: str,
    force: bool,
    stamp: str,
    adds: str | None = None,
) -> Step:
    """The config step; ``now``: what :func:`_current_config` read of ``out``."""
    current, problem = now
    if current is None and problem is None:
        return Step(Action.WRITE, str(out), f"wrote {out}")
    unreadable = f" ({problem})" if problem else ""
    if current == text.encode():
        return Step(Action.UNCHANGED, str(out), f"unchanged {out}")
    if current is not None and holds_providers(current, text.encode()):
        return Step(Action.UNCHANGED, str(out), f"unchanged {out} (it already has these providers)")
    if current is not None and holds_providers(text.encode(), current):
        # every provider it has is kept as it is: ours are added (install --as: one more)
        added = adds or "ours"
        lost = dropped_comments(current)
        kept = "its other providers kept" + (f"; {lost}" if lost else "")
        step = Step(
            Action.WRITE,
            str(out),
            f"added provider {added} to {out} ({kept})"
            if adds
            else f"added our providers to {out} ({kept})",
            backup=f"{out}{BACKUP_SUFFIX}{stamp}",
        )
        if not out.is_symlink():
            return step
        # written, the link becomes a file: what it points to (config management's copy, say)
        # would no longer be what the kubelet reads
        target = link_target(str(out))
        return _overwrite(
            step, force, stamp,
            f"it is a link to {target}, which writing would replace with a file: pass --force to "
            f"replace the link (it is kept as a backup), or give --config-out {target}",
        )  # fmt: skip
    return _overwrite(
        Step(Action.WRITE, str(out), f"replaced {out}"),
        force,
        stamp,
        f"it exists with other content{unreadable}: pass --force to replace it (a backup is kept)",
    )


def _never_replaced(path: str, directory_expected: bool) -> str:
    """What is at ``path`` when it is something ``--force`` never replaces: a device, FIFO or
    socket (a node's ``/dev/full`` is not a config), or a directory where a file or link goes."""
    try:
        mode = os.lstat(path).st_mode
    except (OSError, ValueError):
        return ""
    if stat.S_ISLNK(mode) or stat.S_ISREG(mode) or (stat.S_ISDIR(mode) and directory_expected):
        return ""
    return special_kind(mode)


def _overwrite(
    change: Step, force: bool, stamp: str, refusal: str, *, directory_expected: bool = False
) -> Step:
    """A step that replaces something not credprovider's: with --force it keeps a backup beside
    it (``NAME.credprovider-backup-TIMESTAMP``), without it is refused for ``refusal``. A device,
    FIFO, socket or unexpected directory is refused even with --force."""
    kind = _never_replaced(change.path, directory_expected)
    if kind:
        change.refused = f"it is {kind}: nothing replaces that, not even --force; name another path"
        return change
    if force:
        change.backup = f"{change.path}{BACKUP_SUFFIX}{stamp}"
    else:
        change.refused = refusal
    return change


def _is_copy(destination: Path, launcher: str) -> bool:
    """A real directory owned by this user, holding the launcher and the bundle's manifest: what
    ``--copy`` writes."""
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
        and (destination / MANIFEST).is_file()
    )


def _same_bundle(source: Path, copy: Path) -> bool:
    """Same manifest (every file and its size) and the same launcher bytes."""
    try:
        return (source / MANIFEST).read_bytes() == (copy / MANIFEST).read_bytes() and (
            source / "credprovider"
        ).read_bytes() == (copy / "credprovider").read_bytes()
    except OSError:
        return False

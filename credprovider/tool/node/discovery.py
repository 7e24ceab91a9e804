"""What this node's kubelet uses for credentials, found without flags: from the running kubelet
(its command line, ``--config`` file and ``--config-dir`` drop-ins, environment, binary), else from
the kubelet's systemd unit as systemd would start it (``units``: inline flags, drop-ins and
environment files, wherever the platform keeps them), else from the kubelet flag files and the
distribution layouts (``layouts``).

``root`` is where the node's filesystem is (``/``, or a mounted image with ``--root``): every path
the node names is read under it, and reported as the node names it. A running kubelet is looked
for only when ``root`` is ``/``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from credprovider.paths import NODE_BIN_DIR, NODE_CONFIG
from credprovider.tool.node.access import FileProblem, UnreadableError, lexists, read_text
from credprovider.tool.node.flagfiles import flags_from_file
from credprovider.tool.node.kubelet_facts import (
    CLOUD_LOGIN_GATE,
    node_kubelet_version,
    stamped,
    takes_token_attributes,
)
from credprovider.tool.node.kubelet_flags import (
    CONFIG_FLAG,
    DROP_IN_SUFFIX,
    KUBELET_CONFIG_DIR_FLAG,
    KUBELET_CONFIG_FLAG,
    KubeletSettings,
    flag_value,
    flag_values,
    settings_from,
)
from credprovider.tool.node.kubelet_proc import KubeletProcess, find_kubelets
from credprovider.tool.node.layouts import LAYOUTS, RANCHER_CONFIG, Layout
from credprovider.tool.node.rancher import SERVICES, RancherConfigError, given_paths
from credprovider.tool.node.root import HOST, NodeRoot, RootPathError
from credprovider.tool.node.units import KubeletUnit, on_node, read_kubelet_unit

NOTHING: Final = "nothing"  # what found the kubelet's settings, when nothing did
# More drop-ins than any node has: a directory of thousands is not read to the end.
_MAX_DROP_INS = 256
_MAX_WALKED = 10_000


@dataclass
class NodeView:
    """What was found, each fact with its source. Paths are the node's own (not under root)."""

    root: NodeRoot
    found_by: str  # "running kubelet (pid N)", "flag file F", "layout NAME", or "nothing"
    settings: KubeletSettings = field(default_factory=KubeletSettings)
    kubelet: KubeletProcess | None = None
    other_kubelets: list[int] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # processes named kubelet that are not trusted
    layout_note: str = ""
    both_or_neither: bool = False  # the layout's platform passes both flags or neither (k3s)
    notes: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    # the files that could hold the kubelet's credential provider flags and could not be read
    unread_sources: list[str] = field(default_factory=list)
    # the flag files read (a layout's, with no kubelet running) and the kubelet flags each holds
    flag_words: dict[str, list[str]] = field(default_factory=dict)
    unit: KubeletUnit | None = None  # the kubelet's unit, read when no kubelet is running

    def host_path(self, path: str) -> str:
        """``path`` as the node names it, where this tool reads it: under ``root``, every link and
        ``..`` resolved inside it (``node.root``)."""
        return str(self.root.host(path))

    @property
    def environment(self) -> Mapping[str, str] | None:
        """The environment the plugins inherit: the running kubelet's, when readable."""
        return self.kubelet.environ if self.kubelet is not None else None


def takes_token_attributes_here(view: NodeView) -> bool:
    """Whether this node's kubelet takes a provider's ``tokenAttributes``, as doctor decides it:
    the feature gate its flags and config give, else its version's default (the running
    kubelet's binary, else the one its unit runs; unknown: the current default, on)."""
    version = stamped(node_kubelet_version(view.kubelet)) if view.root.is_host else None
    return takes_token_attributes(view.settings.feature_gates, version)


def settings_under(root: NodeRoot, argv: Sequence[str]) -> KubeletSettings:
    """The settings a kubelet started with ``argv`` has on the node under ``root`` (the agent's
    reading of the flags its files give): those flags, and the KubeletConfiguration and drop-ins
    they name, read there; one that cannot be read gives nothing."""
    return _settings(NodeView(root, "its flag files"), list(argv), None)


def absolute_in(path: str | None, cwd: str | None) -> str | None:
    """A path the kubelet was given, as it reads it: a relative one against its working
    directory (``cwd``, when known)."""
    if path is None or os.path.isabs(path) or cwd is None:
        return path
    return os.path.normpath(os.path.join(cwd, path))


def _load_document(view: NodeView, path: str) -> Mapping[str, Any] | None:
    from credprovider.tool.node.yamldoc import YamlError, load_yaml

    try:
        text = read_text(view.host_path(path))
    except RootPathError as exc:  # a NUL in a path a flags file gives, read under a root
        view.notes.append(f"the kubelet's configuration {exc}")
        return None
    except UnreadableError as exc:
        view.unreadable.append(str(exc))
        view.unread_sources.append(str(exc))
        return None
    except FileProblem as exc:
        view.notes.append(f"the kubelet's configuration {exc}")
        return None
    try:
        document = load_yaml(text) if text.strip() else {}
    except YamlError as exc:
        view.notes.append(f"the kubelet's configuration {path} is not YAML: {exc}")
        return None
    return document if isinstance(document, Mapping) else {}


def _drop_ins(view: NodeView, directory: str) -> list[str]:
    """``--config-dir``'s ``*.conf`` files, subdirectories included, in lexical order. A tree of
    more than ``_MAX_WALKED`` names is not walked to the end (and that is said)."""
    try:
        base = view.host_path(directory)
    except RootPathError as exc:
        view.notes.append(f"the kubelet's --{KUBELET_CONFIG_DIR_FLAG} {exc}")
        return []
    found: list[str] = []
    walked = 0
    for current, dirs, files in os.walk(base):
        walked += len(dirs) + len(files)
        found += [
            os.path.relpath(os.path.join(current, name), base)
            for name in files
            if name.endswith(DROP_IN_SUFFIX)
        ]
        if walked > _MAX_WALKED:
            view.notes.append(
                f"--{KUBELET_CONFIG_DIR_FLAG} {directory} holds more than {_MAX_WALKED} names: "
                "only those met first were read"
            )
            break
    return [os.path.join(directory, path) for path in sorted(found)[:_MAX_DROP_INS]]


def _settings(view: NodeView, argv: list[str], cwd: str | None) -> KubeletSettings:
    documents: list[tuple[str, Mapping[str, Any]]] = []
    config = absolute_in(flag_value(argv, KUBELET_CONFIG_FLAG), cwd)
    if config:
        document = _load_document(view, config)
        if document is not None:
            documents.append((config, document))
    config_dir = absolute_in(flag_value(argv, KUBELET_CONFIG_DIR_FLAG), cwd)
    if config_dir:
        for path in _drop_ins(view, config_dir):
            document = _load_document(view, path)
            if document is not None:
                documents.append((path, document))
    settings = settings_from(argv, documents)
    return replace(
        settings,
        provider_config=absolute_in(settings.provider_config, cwd),
        bin_dir=absolute_in(settings.bin_dir, cwd),
        kubelet_config=config,
        config_dir=config_dir,
        static_pod_path=absolute_in(settings.static_pod_path, cwd),
    )


def _from_flag_files(view: NodeView, files: tuple[str, ...]) -> list[str]:
    argv: list[str] = []
    for path in files:
        try:
            words = flags_from_file(read_text(view.host_path(path))).split()
        except UnreadableError as exc:
            view.unreadable.append(str(exc))
            view.unread_sources.append(str(exc))
            continue
        except FileProblem:
            continue
        if words:
            view.flag_words[path] = words
        argv += words
    return argv


def _from_unit(view: NodeView) -> bool:
    """The kubelet's flags from its systemd unit (``units``), taken when they name a provider
    config, a bin dir or the in-tree login; each flag word kept under the file that holds it."""
    try:
        unit = read_kubelet_unit(*on_node(view.host_path))
    except UnreadableError as exc:
        view.unreadable.append(str(exc))
        view.unread_sources.append(str(exc))
        return False
    if unit is None:
        return False
    view.unit = unit
    view.flag_words = _by_file(unit)  # what systemd passes, whatever the layout's files say
    view.notes += list(unit.problems)  # what would stop systemd starting the kubelet at all
    settings = _settings(view, list(unit.argv), None)
    if not (settings.provider_config or settings.bin_dir or in_tree(settings)):
        return False
    view.found_by = f"the kubelet's unit {unit.unit} (as systemd starts it)"
    view.settings = settings
    return True


def _not_passed(view: NodeView, unit: KubeletUnit, files: tuple[str, ...]) -> None:
    """Say which of a layout's flag files give a credential provider config that the kubelet, as
    its unit starts it, is not given (a file the unit does not read, or a variable its command
    line does not use: an edit in the wrong file)."""
    for path in files:
        try:
            words = flags_from_file(read_text(view.host_path(path))).split()
        except (UnreadableError, FileProblem):
            continue
        named = flag_value(words, CONFIG_FLAG)
        if named:
            reads = ", ".join(unit.environment_files) or "no environment file"
            view.notes.append(
                f"{path} gives --{CONFIG_FLAG}={named}, but the kubelet as its unit {unit.unit} "
                f"starts it is not given that (the unit reads {reads}): an edit in a file this "
                "kubelet does not read"
            )


def _by_file(unit: KubeletUnit) -> dict[str, list[str]]:
    """Each flag word of the kubelet's unit under the file that holds it."""
    found: dict[str, list[str]] = {}
    for word, path in unit.word_files:
        found.setdefault(path, []).append(word)
    return found


def in_tree(settings: KubeletSettings) -> bool:
    """The kubelet still names a built-in cloud provider, or the gate that turned the built-in
    registry logins off: what KEP-2395 removed, and ``credprovider migrate`` moves it from."""
    return (
        settings.cloud_provider not in (None, "", "external")
        or CLOUD_LOGIN_GATE in settings.feature_gates
    )


def flags_file_of(view: NodeView, name: str) -> str | None:
    """The first of the node's kubelet flag files (its layout's) that gives ``--name``: read now
    when discovery did not (a running kubelet's flags are its command line)."""
    _read_flag_files(view)
    return next((p for p, words in view.flag_words.items() if flag_values(words, name)), None)


def _read_flag_files(view: NodeView) -> None:
    if not view.flag_words:
        for layout in LAYOUTS:
            if layout.flag_files:
                _from_flag_files(view, layout.flag_files)


def start_flags(view: NodeView) -> dict[str, list[str]]:
    """The kubelet's flags as it will start next, by the file each comes from: its systemd unit's
    as systemd starts it (the unit, a drop-in, an environment file; read now when a running
    kubelet's command line was taken instead), else its layout's flag files ({}: none)."""
    if view.kubelet is not None:
        try:
            unit = read_kubelet_unit(*on_node(view.host_path))
        except UnreadableError:
            unit = None
        if unit is not None and unit.word_files:
            return _by_file(unit)
    _read_flag_files(view)  # with no kubelet running, discovery read the unit's already
    return {path: list(words) for path, words in view.flag_words.items()}


def discover(root: NodeRoot = HOST, proc: str = "/proc") -> NodeView:
    """The node's kubelet settings as found (see the module)."""
    view = NodeView(root=root, found_by=NOTHING)
    candidates = find_kubelets(proc) if root.is_host else []
    kubelets = [k for k in candidates if not k.distrust]
    view.ignored = [
        f"process {k.pid} is named kubelet but is not taken for this node's kubelet: "
        f"{k.distrust}; nothing of it is read or run"
        for k in candidates
        if k.distrust
    ]
    if kubelets:
        chosen = kubelets[0]
        view.kubelet = chosen
        view.other_kubelets = [k.pid for k in kubelets[1:]]
        view.unreadable += chosen.unreadable
        view.found_by = f"running kubelet (pid {chosen.pid})"
        view.settings = _settings(view, list(chosen.argv[1:]), chosen.cwd)
        if view.other_kubelets:
            which = f"the service {chosen.service}" if chosen.service else "the oldest"
            view.notes.append(
                f"{len(kubelets)} kubelets are running (pids {', '.join(str(k.pid) for k in kubelets)}): "
                f"{which}, {chosen.pid}, is checked"
            )
        view.notes += view.settings.notes
        return view
    if root.is_host:
        view.notes.append("no kubelet is running: the node's files are read instead")
    if _from_unit(view) or view.unread_sources:  # the unit hidden from this user: no guess
        return view
    for layout in LAYOUTS:
        if layout.flag_files and view.unit is not None:
            _not_passed(view, view.unit, layout.flag_files)  # its unit is what systemd starts
            continue
        if layout.flag_files:
            argv = _from_flag_files(view, layout.flag_files)
            settings = _settings(view, argv, None)
            if settings.provider_config or settings.bin_dir or in_tree(settings):
                view.found_by = f"layout {layout.name} (kubelet flags in its flag files)"
                view.settings = settings
                view.layout_note = layout.note
                return view
            continue
        try:
            layout = _as_the_node_names_it(view, layout)
            config_there = bool(layout.config) and lexists(view.host_path(layout.config))
            dirs = [d for d in layout.bin_dirs if lexists(view.host_path(d))]
        except UnreadableError as exc:  # hidden from this user: root may find the layout there
            view.unreadable.append(str(exc))
            view.unread_sources.append(str(exc))
            continue
        bin_dir = next((d for d in dirs if os.path.isdir(view.host_path(d))), layout.bin_dirs[0])
        if config_there or (not layout.config and os.path.isdir(view.host_path(bin_dir))):
            view.found_by = f"layout {layout.name} ({layout.source})"
            view.layout_note, view.both_or_neither = layout.note, layout.both_or_neither
            view.settings = KubeletSettings(
                provider_config=layout.config or None,
                bin_dir=bin_dir,
                sources={"image-credential-provider-config": f"layout {layout.name}"},
            )
            return view
    return view


def _as_the_node_names_it(view: NodeView, layout: Layout) -> Layout:
    """k3s' and RKE2's layout with the paths their own configuration names, where it names any
    (node/rancher.py); a configuration they could not read is said in a note."""
    if layout.config != RANCHER_CONFIG:
        return layout
    for product in SERVICES:
        try:
            given = given_paths(product, *on_node(view.host_path))
        except RancherConfigError as exc:
            view.notes.append(
                f"{exc}: {product} would not start with it" if exc.fails else str(exc)
            )
            continue
        if given.said_by:
            return replace(
                layout,
                config=given.config,
                bin_dirs=(given.bin_dir,),
                source=f"{product}: named in {given.said_by}",
            )
    return layout


@dataclass(frozen=True)
class NodePaths:
    """The credential provider config and bin dir this node's kubelet uses, and where they were
    found. ``unreadable``: why this user could not see where they are (no verdict then: a default
    path would be a guess)."""

    config: str | None
    bin_dir: str | None
    found_by: str
    ignored: tuple[str, ...] = ()  # processes named kubelet that discovery did not trust
    unreadable: tuple[str, ...] = ()


def kubelet_paths(root: NodeRoot = HOST, view: NodeView | None = None) -> NodePaths:
    """The one discovery every command uses: what :func:`discover` finds (``view``: what it
    found already, under its root); else, when nothing it needed was unreadable, the standard
    paths (``None`` where nothing is there)."""
    if view is None:
        view = discover(root)
    root = view.root
    ignored = tuple(view.ignored)
    if view.settings.provider_config or view.settings.bin_dir:
        return NodePaths(
            view.settings.provider_config,
            view.settings.bin_dir,
            view.found_by,
            ignored,
            tuple(view.unread_sources),
        )
    if view.unread_sources:
        return NodePaths(None, None, view.found_by, ignored, tuple(view.unread_sources))
    try:
        config = NODE_CONFIG if lexists(str(root.host(NODE_CONFIG, follow=False))) else None
        bin_dir = NODE_BIN_DIR if lexists(str(root.host(NODE_BIN_DIR, follow=False))) else None
    except UnreadableError as exc:  # the default path is hidden from this user: no guess
        return NodePaths(None, None, view.found_by, ignored, (str(exc),))
    return NodePaths(config, bin_dir, "the default path", ignored)

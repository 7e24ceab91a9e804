"""The kubelet's command line as systemd would start it, read from the node's unit files: for a node
whose kubelet is not running (an image, ``doctor --root``, a kubelet that will not start), wherever
its platform keeps the flags (inline in ``ExecStart=`` on OpenShift, ``$KUBELET_OPTS`` from
``/etc/default/kubelet`` on GKE, ``$NODEADM_KUBELET_ARGS`` on EKS, ``"$DAEMON_ARGS"`` on kOps,
kubeadm's drop-in: docs/platforms.md names each platform's file).

systemd's own rules, from its manuals:

* **Where** (systemd.unit(5), "Unit File Load Path"; "Description" on drop-ins): the unit is the
  first ``kubelet.service`` found in the load path, ``/etc`` before ``/run`` before ``/usr/local/lib``
  before ``/usr/lib`` (and Debian's ``/lib``); a link to ``/dev/null`` masks it. Drop-ins are every
  ``kubelet.service.d/*.conf`` of every directory of the path, a name in an earlier directory
  hiding the same name in a later one, all applied after the unit in the order of their names.
* **Command lines** (systemd.service(5), "Command lines"; systemd.syntax(7), "Quoting"): the line is
  split into words, double and single quotes and C-style backslash escapes removed; prefixes
  ``@ - : + !`` before the executable; an empty ``ExecStart=`` resets the list. A word that is
  exactly ``$NAME`` becomes the variable's value split at white space (quotes respected, then
  removed): zero or more words. ``${NAME}`` anywhere in a word is replaced by the exact value, the
  word staying one word. ``$$`` is a dollar sign. An unset variable is empty.
* **Environment** (systemd.exec(5), ``Environment=``, ``EnvironmentFile=``): ``Environment=`` takes
  quoted ``NAME=VALUE`` words; ``EnvironmentFile=`` names a file of ``NAME=VALUE`` lines (``#`` and
  ``;`` comments, quotes, backslash continuation), ``-`` before it making a missing file no error
  (without it the unit fails to start). Values from files override ``Environment=``, a later file
  a former; an empty assignment resets either list.

Pure functions over the texts, and one reader (:func:`read_kubelet_unit`) under a node root.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from credprovider.tool.node.access import (
    FileProblem,
    UnreadableError,
    check_access,
    lexists,
    read_text,
)
from credprovider.tool.node.layouts import KUBEADM_EXTRA_ARGS_FILES
from credprovider.tool.node.unitsyntax import (
    UnitSyntaxError,
    expand,
    is_variable_name,
    logical_lines,
    parse_environment_file,
    split_words,
)

# systemd.unit(5)'s system unit load path, highest priority first (Debian keeps units in /lib too).
UNIT_LOAD_PATH: Final = (
    "/etc/systemd/system",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
)
KUBELET_UNIT: Final = "kubelet.service"
# k0s runs the kubelet itself: `k0s install worker` (or controller --enable-worker) writes these
# units, the kubelet's own flags kept in --kubelet-extra-args (platforms.md, k0s row).
K0S_UNITS: Final = ("k0sworker.service", "k0scontroller.service")
K0S_EXTRA_ARGS: Final = "--kubelet-extra-args"
_MAX_DROP_INS: Final = 256


@dataclass
class ServiceSettings:
    """What a unit and its drop-ins say about how the service starts (``[Service]`` only)."""

    environment: dict[str, str] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # the file that set each variable
    environment_files: list[tuple[str, bool]] = field(default_factory=list)  # (path, optional)
    exec_start: list[list[str]] = field(default_factory=list)  # each line's words, unexpanded
    sources: list[str] = field(default_factory=list)  # the unit files read, in order


def apply_unit_text(settings: ServiceSettings, text: str, path: str = "") -> None:
    """The ``[Service]`` settings of one unit file or drop-in (``path``), applied over
    ``settings``."""
    section = ""
    for line in logical_lines(text):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        if section != "Service":
            continue
        key, equals, value = stripped.partition("=")
        key, value = key.strip(), value.strip()
        if not equals:
            continue
        if key == "Environment":
            if not value:
                settings.environment.clear()
            for item in split_words(value):
                name, has, item_value = item.partition("=")
                if has and is_variable_name(name):
                    settings.environment[name] = item_value
                    settings.origin[name] = path
        elif key == "EnvironmentFile":
            if not value:
                settings.environment_files.clear()
            else:
                optional = value.startswith("-")
                settings.environment_files.append((value.lstrip("-"), optional))
        elif key == "ExecStart":
            if not value:
                settings.exec_start.clear()
            else:
                settings.exec_start.append(split_words(value))


def kubelet_argv(words: list[str]) -> list[str] | None:
    """The kubelet's own arguments in an ``ExecStart=`` line: those after the first word naming a
    kubelet (``/usr/bin/kubelet``; behind a wrapper, ``kubenswrapper /usr/bin/kubelet``, or
    ``hyperkube kubelet``), None when no word does."""
    for index, word in enumerate(words):
        if word.lstrip("@-:+!").rsplit("/", 1)[-1] == "kubelet":
            return words[index + 1 :]
    return None


def k0s_kubelet_argv(words: list[str], environment: Mapping[str, str]) -> list[str] | None:
    """The kubelet's flags a k0s unit's ``ExecStart=`` passes (``k0s worker ...
    --kubelet-extra-args='--a=b --c=d'``: the value split as a shell splits it, as ``k0s
    install`` wrote it), None when no word runs k0s. Without the option: no flags of ours."""
    expanded = expand(words, environment)
    for index, word in enumerate(expanded):
        if word.lstrip("@-:+!").rsplit("/", 1)[-1] == "k0s":
            rest = expanded[index + 1 :]
            break
    else:
        return None
    value = ""
    for index, word in enumerate(rest):
        if word.startswith(f"{K0S_EXTRA_ARGS}="):
            value = word.split("=", 1)[1]
        elif word == K0S_EXTRA_ARGS and index + 1 < len(rest):
            value = rest[index + 1]
    try:
        return shlex.split(value)
    except ValueError:  # an unclosed quote: k0s would not start the kubelet with it either
        return []


@dataclass(frozen=True)
class KubeletUnit:
    """The kubelet's arguments as systemd would pass them, and where each came from."""

    unit: str  # the unit file that was read (the node's path)
    argv: tuple[str, ...]
    sources: tuple[str, ...]  # the unit, its drop-ins and the environment files read, in order
    # the environment file each flag word came from (a word of ExecStart itself: the unit file)
    word_files: tuple[tuple[str, str], ...] = ()
    problems: tuple[str, ...] = ()  # what would stop systemd starting it, as systemd says it
    environment_files: tuple[str, ...] = ()  # every EnvironmentFile= it names, in order


# Reads a node path's text; raises OSError when it is missing or unreadable (the caller's rules).
Reader = Callable[[str], str]
Lister = Callable[[str], list[str]]


def read_kubelet_unit(
    read: Reader, listdir: Lister, exists: Callable[[str], bool]
) -> KubeletUnit | None:
    """The kubelet's unit on a node (``read``, ``listdir`` and ``exists`` take the node's paths),
    None when it has none or ``ExecStart=`` runs no kubelet."""
    unit = find_unit(exists, (KUBELET_UNIT, *K0S_UNITS))
    if unit is None:
        return None
    name = unit.rsplit("/", 1)[1]
    settings, environment, origin, problems = read_service(read, listdir, unit)
    if not settings.exec_start:
        return None
    words = settings.exec_start[-1]
    named = tuple(path for path, _ in settings.environment_files)
    if name != KUBELET_UNIT:  # k0s: its option's value, expanded by systemd, split by k0s
        given = k0s_kubelet_argv(words, environment)
        if given is None:
            return None
        return KubeletUnit(
            unit, tuple(given), tuple(settings.sources), tuple((w, unit) for w in given),
            tuple(problems), named,
        )  # fmt: skip
    argv = kubelet_argv(words)
    if argv is None:
        return None
    expanded: list[str] = []
    word_files: list[tuple[str, str]] = []
    for word in argv:
        these = expand([word], environment)
        variable = word[1:] if word.startswith("$") and is_variable_name(word[1:]) else ""
        from_file = origin.get(variable, unit) if variable else unit
        expanded += these
        word_files += [(value, from_file) for value in these]
    return KubeletUnit(
        unit, tuple(expanded), tuple(settings.sources), tuple(word_files), tuple(problems), named
    )


def find_unit(exists: Callable[[str], bool], names: Iterable[str]) -> str | None:
    """The path of the first of the units ``names`` (``NAME.service``) that has a file on the
    load path, each looked for in the load path's order (None: none has)."""
    return next(
        (f"{d}/{name}" for name in names for d in UNIT_LOAD_PATH if exists(f"{d}/{name}")), None
    )


def read_service(
    read: Reader, listdir: Lister, unit: str
) -> tuple[ServiceSettings, dict[str, str], dict[str, str], list[str]]:
    """The unit file ``unit`` with its drop-ins, as systemd starts its service: its settings, its
    environment (files included), the file that set each variable, and what stops it starting."""
    settings = ServiceSettings()
    problems: list[str] = []
    for path in (unit, *_drop_ins(listdir, unit.rsplit("/", 1)[1])):
        try:
            apply_unit_text(settings, read(path), path)
        except (OSError, UnitSyntaxError) as exc:  # masked (a link to /dev/null), or gone
            problems.append(f"{path}: {exc}")
            continue
        settings.sources.append(path)
    environment, origin = dict(settings.environment), dict(settings.origin)
    name = unit.rsplit("/", 1)[1]
    settings.environment_files = [(_specifiers(p, name), o) for p, o in settings.environment_files]
    for path, optional in settings.environment_files:
        try:
            found = parse_environment_file(read(path))
        except OSError:
            if not optional:
                problems.append(
                    f"EnvironmentFile={path} is missing: systemd will not start the unit"
                )
            continue
        settings.sources.append(path)
        environment.update(found)
        origin.update(dict.fromkeys(found, path))
    return settings, environment, origin, problems


def _specifiers(text: str, unit: str) -> str:
    """systemd.unit(5)'s unit name specifiers in ``text``: ``%n`` the full name, ``%N`` it
    without its type suffix (k3s' install.sh names ``EnvironmentFile=-/etc/default/%N``)."""
    names = {"n": unit, "N": unit.rsplit(".", 1)[0], "%": "%"}
    return re.sub(r"%([nN%])", lambda found: names[found.group(1)], text)


def _drop_ins(listdir: Lister, unit: str = KUBELET_UNIT) -> list[str]:
    """``<unit>.d/*.conf`` over the load path: by name, the first directory's winning; a directory
    so named is no drop-in (systemd's conf_files_list takes only a file or a link:
    src/basic/conf-files.c, "not a regular file with suffix")."""
    chosen: dict[str, str] = {}
    for directory in UNIT_LOAD_PATH:
        folder = f"{directory}/{unit}.d"
        try:
            names = listdir(folder)
        except OSError:
            continue
        for name in names[:_MAX_DROP_INS]:
            if name in chosen or not name.endswith(".conf"):
                continue  # hidden by an earlier directory's, or no drop-in's name
            if not is_directory(f"{folder}/{name}", listdir):
                chosen[name] = f"{folder}/{name}"
    return [chosen[name] for name in sorted(chosen)][:_MAX_DROP_INS]


def is_directory(path: str, listdir: Lister) -> bool:
    """``path`` is a directory, as ``listdir`` sees it (one this user may not list included)."""
    try:
        listdir(path)
    except UnreadableError:
        return True
    except OSError:
        return False  # a file, or nothing there any more
    return True


def on_node(root_host: Callable[[str], str]) -> tuple[Reader, Lister, Callable[[str], bool]]:
    """The three readers for a node whose paths ``root_host`` maps to this tool's (bounded reads,
    never a FIFO or device: ``access``). A file this user may not read raises
    :class:`~credprovider.tool.node.access.UnreadableError`: no guess is made from the rest."""

    def read(path: str) -> str:
        try:
            return read_text(root_host(path))
        except FileProblem as exc:
            raise OSError(str(exc)) from None

    def listdir(path: str) -> list[str]:
        where = root_host(path)
        try:
            return sorted(os.listdir(where))
        except OSError as exc:  # hidden from this user, not absent: no guess from the rest
            check_access(where, exc)
            raise

    def exists(path: str) -> bool:
        return lexists(root_host(path))

    return read, listdir, exists


def extra_args_files(root_host: Callable[[str], str]) -> tuple[str, ...]:
    """The distribution's files kubeadm's drop-in may read ``KUBELET_EXTRA_ARGS`` from
    (``layouts.KUBEADM_EXTRA_ARGS_FILES``), narrowed to the one this node's kubelet unit names:
    the project's deb names ``/etc/default/kubelet``; its rpm, and the drop-in that the kubeadm
    docs' install without a package manager fetches, ``/etc/sysconfig/kubelet`` (kubernetes/release
    cmd/krel/templates/latest/kubeadm/10-kubeadm.conf, and kubeadm.spec's sed for the deb). None
    where the unit names neither (a layout of its own); both, in the layout's order, where no
    unit is found or it cannot be read."""
    try:
        unit = read_kubelet_unit(*on_node(root_host))
    except (OSError, UnreadableError):  # no narrowing from a unit this user cannot read
        unit = None
    if unit is None:
        return KUBEADM_EXTRA_ARGS_FILES
    named = [path for path in unit.environment_files if path in KUBEADM_EXTRA_ARGS_FILES]
    return tuple(named[-1:])

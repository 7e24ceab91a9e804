"""The credential provider config and bin dir k3s and RKE2 give their kubelet, read as they read
their own configuration. Both are flags of theirs with these defaults (k3s-io/k3s
``pkg/cli/cmds/agent.go``: ``image-credential-provider-config``, ``image-credential-provider-bin-dir``;
rancher/rke2 ``pkg/cli/cmds/agent.go`` copies both from k3s), passed to the kubelet once both exist
as the service starts (``pkg/daemons/agent``). Where their values come from (k3s
``pkg/configfilearg``): the config file (``<PRODUCT>_CONFIG_FILE`` in the service's environment,
else ``--config``/``-c`` on its command line, else ``/etc/rancher/<product>/config.yaml``), then its
drop-ins ``config.yaml.d/*.yaml`` (``.yml``, any case; directories skipped) in name order, a later
value replacing an earlier one; the service's own command line last. A config file named by an
``http(s)://`` address is fetched as they start: its paths are not the node's to read (refused).
``kubelet-arg`` entries reach the kubelet after k3s' own flags, so one naming either flag wins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.kubelet_flags import BIN_DIR_FLAG, CONFIG_FLAG
from credprovider.tool.node.layouts import RANCHER_BIN_DIR, RANCHER_CONFIG
from credprovider.tool.node.units import Lister, Reader, find_unit, is_directory, read_service
from credprovider.tool.node.unitsyntax import expand
from credprovider.tool.node.yamldoc import YamlError, load_yaml

# Each product's services (install.sh's k3s.service and k3s-agent.service; RKE2's units).
SERVICES: Final = {"k3s": ("k3s", "k3s-agent"), "rke2": ("rke2-server", "rke2-agent")}
KUBELET_ARG: Final = "kubelet-arg"
MAX_DROP_INS: Final = 256


class RancherConfigError(NodeChangeError):
    """k3s' or RKE2's own configuration cannot be read as they read it (``fails``: nor by them)."""

    def __init__(self, message: str, fails: bool = True) -> None:
        super().__init__(message)
        self.fails = fails


@dataclass(frozen=True)
class GivenPaths:
    """What the kubelet is given, and the file (or command line) that said so last ("": the
    defaults)."""

    config: str = RANCHER_CONFIG
    bin_dir: str = RANCHER_BIN_DIR
    said_by: str = ""


def given_paths(
    product: str, read: Reader, listdir: Lister, exists: Callable[[str], bool]
) -> GivenPaths:
    """The config and bin dir ``product`` (``k3s``, ``rke2``) gives its kubelet on the node whose
    paths ``read``, ``listdir`` and ``exists`` take. :class:`RancherConfigError` for a config file
    that is not YAML they would read."""
    argv, environment = _command_line(product, read, listdir, exists)
    config_file = environment.get(f"{product.upper()}_CONFIG_FILE") or _option(
        argv, ("config", "c")
    )
    values: dict[str, str] = {}
    said: dict[str, str] = {}
    kubelet_args: list[str] = []
    base = config_file or f"/etc/rancher/{product}/config.yaml"
    if base.startswith(("http://", "https://")):  # fetched at start (parser.go readConfigFileData)
        raise RancherConfigError(
            f"{product} takes its configuration from {base[:200]!r}, over the network: what it "
            "gives the kubelet cannot be read from the node's files",
            fails=False,
        )
    for path in [base, *_drop_ins(base, listdir)]:
        document = _document(path, read, exists)
        for key in (CONFIG_FLAG, BIN_DIR_FLAG):
            if key in document:
                values[key], said[key] = _path(document[key], key, path), path
        if KUBELET_ARG in document:
            kubelet_args = _strings(document[KUBELET_ARG])
        kubelet_args += _strings(document.get(f"{KUBELET_ARG}+", []))
    for key in (CONFIG_FLAG, BIN_DIR_FLAG):
        if found := _option(argv, (key,)):
            said[key] = "the service's command line"
            values[key] = _path(found, key, said[key])
    kubelet_args += _options(argv, KUBELET_ARG)
    for entry in kubelet_args:
        name, _, value = entry.lstrip("-").partition("=")
        if name in (CONFIG_FLAG, BIN_DIR_FLAG) and value:
            said[name] = f"its {KUBELET_ARG}"
            values[name] = _path(value, name, said[name])
    return GivenPaths(
        values.get(CONFIG_FLAG, RANCHER_CONFIG),
        values.get(BIN_DIR_FLAG, RANCHER_BIN_DIR),
        said.get(CONFIG_FLAG) or said.get(BIN_DIR_FLAG, ""),
    )


def _command_line(
    product: str, read: Reader, listdir: Lister, exists: Callable[[str], bool]
) -> tuple[list[str], dict[str, str]]:
    """The arguments after the program of the product's first service with a unit, as systemd
    gives them, and its environment (none: no unit)."""
    unit = find_unit(exists, (f"{service}.service" for service in SERVICES.get(product, ())))
    if unit is None:
        return [], {}
    settings, environment, _, _ = read_service(read, listdir, unit)
    words = settings.exec_start[-1] if settings.exec_start else []
    return expand(words[1:], environment), environment


def _option(argv: list[str], names: tuple[str, ...]) -> str:
    """The last value of the option ``names`` (``--name value``, ``--name=value``, one dash too)."""
    found = [value for name, value in _pairs(argv) if name in names]
    return found[-1] if found else ""


def _options(argv: list[str], name: str) -> list[str]:
    return [value for given, value in _pairs(argv) if given == name]


def _pairs(argv: list[str]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for index, word in enumerate(argv):
        if not word.startswith("-"):
            continue
        name, equals, value = word.lstrip("-").partition("=")
        if not equals:
            following = argv[index + 1] if index + 1 < len(argv) else ""
            value = "" if following.startswith("-") else following
        pairs.append((name, value))
    return pairs


def _drop_ins(base: str, listdir: Lister) -> list[str]:
    """``<base>.d/*.yaml`` (``.yml``, in any case) by name, a directory so named skipped, as k3s
    lists them (k3s-io/k3s pkg/configfilearg/parser.go ``dotDFiles``)."""
    try:
        names = listdir(f"{base}.d")
    except OSError:
        return []
    chosen = [name for name in names if name.lower().endswith((".yaml", ".yml"))]
    found = [f"{base}.d/{name}" for name in sorted(chosen)[:MAX_DROP_INS]]
    return [path for path in found if not is_directory(path, listdir)]


def _document(path: str, read: Reader, exists: Callable[[str], bool]) -> dict[str, Any]:
    """The file's mapping ({} where it is absent or empty); one that cannot be read (a FIFO, a
    directory, too large) is refused, as they would fail reading it."""
    if not exists(path):
        return {}
    try:
        text = read(path)
    except OSError as exc:
        raise RancherConfigError(f"{path} cannot be read: {exc}") from None
    try:
        document = load_yaml(text) if text.strip() else {}
    except YamlError as exc:
        said = " ".join(str(exc).split())  # one line
        raise RancherConfigError(f"{path} is not a config they read: {said}") from None
    if not isinstance(document, dict):
        raise RancherConfigError(f"{path} is not a config they read: not a mapping of options")
    return document


def _path(value: object, key: str, where: str) -> str:
    """A path the node's files name, refused unless it is one: absolute, one line, bounded."""
    if (
        isinstance(value, str)
        and value.startswith("/")
        and value.isprintable()
        and len(value) < 4096
    ):
        return value
    shown = repr(value)[:80]
    raise RancherConfigError(f"{where}: {key} is not an absolute path: {shown}")


def _strings(value: object) -> list[str]:
    return [str(item) for item in value] if isinstance(value, list) else [str(value)]

"""The exec path is a package the tree shows, held to an allow-list.

Every module a plugin's exec may import (credprovider/runtime/, each cloud's folder but its
``descriptor``, and the dispatcher) imports only the stdlib modules below, the runtime, its own
cloud and that cloud's SDK: never the operator tool, pydantic, YAML (but one lazy exception) or
another cloud. Lazy imports inside functions count; imports for type checking do not.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

from credprovider.entry import PLUGIN_PACKAGES
from release.bundle import REPO

PACKAGE = REPO / "credprovider"
# The stdlib modules the exec path uses (a new one is a decision: add it here with its reason).
STDLIB = frozenset(
    {
        "__future__",
        "_collections",  # deque without collections' import cost (runtime/log.py)
        "_json",  # cjson: json's C scanner without json's import
        "_sha256",
        "_ssl",
        "_thread",
        "base64",
        "binascii",
        "collections",
        "datetime",
        "enum",  # loaded at start-up by re (and by the runtime): a Backend enum costs nothing
        "errno",
        "fcntl",
        "hashlib",
        "hmac",
        "http",
        "io",  # loaded by every interpreter at start-up (runtime/requests_session.py)
        "ipaddress",
        "json",
        "logging",
        "os",  # on a miss only: a hit takes what it needs from posix (runtime/_os.py)
        "posix",
        "random",
        "re",
        "reprlib",  # runtime/excerpt.py: a non-string value quoted in an error, walked bounded
        "socket",
        "ssl",
        "stat",
        "sys",
        "time",
        "traceback",
        "types",
        "typing",  # only in runtime/_typing.py, under TYPE_CHECKING, or lazily
        "urllib",
        "zlib",  # runtime/answer.py: a gzip or deflate answer, decoded under the size cap
    }
)
SHARED = (
    "credprovider",
    "credprovider.entry",  # the dispatcher (the bundle's script is __main__.py)
    "credprovider.errors",
    "credprovider.version",
    "credprovider._buildinfo",  # written by the build: the version's commit and date
    "credprovider.runtime",
)
# Each cloud's SDK (imported lazily, when the route needs it) and what it brings.
SDKS = {
    "credprovider.aws": {"botocore", "certifi"},
    "credprovider.azure": {"azure", "requests", "certifi"},
    "credprovider.gcp": {"google"},
    "credprovider.registries": {
        "certifi"
    },  # no SDK: the runtime's client (requests via the runtime)
}
# Never on the exec path, whatever the module.
# The tool's side: the operator tool, and the cloud interface (credprovider/cloud.py) with each
# cloud's descriptor that fills it in. The exec path imports none of them.
TOOL_SIDE = ("credprovider.tool", "credprovider.cloud", "credprovider.paths")
FORBIDDEN = (*TOOL_SIDE, "pydantic", "yaml")
# (module, import) pairs allowed lazily only: a YAML azure.json (cloud-provider-azure reads both).
LAZY_EXCEPTIONS = (
    {("credprovider.azure.cloudconfig", "yaml")}
    | {
        # a credential helper run for an SDK (runtime/child.py), only on a route whose SDK (botocore,
        # google-auth's executable source) has loaded them already
        ("credprovider.runtime.child", name)
        for name in ("subprocess", "selectors", "signal", "contextlib")
    }
    # as google.auth.pluggable splits the command; and the X.509 source's certificate and key
    # checked with cryptography, which google-auth's X.509 source loads for it anyway
    | {("credprovider.gcp.sources", "shlex"), ("credprovider.gcp.sources", "cryptography")}
    # a plugin's --help wrapped to the terminal's width: never on a request
    | {("credprovider.runtime.args", "textwrap")}
    # the deadline's alarm, only where no worker thread can be started (a process limit)
    | {("credprovider.runtime.serve", "signal")}
)
# Build-time modules inside a cloud folder (read by build.spec, never by a plugin).
BUILD_ONLY = {"credprovider.aws.bundle"}
# runtime/http.py's default CA bundle, as botocore and requests find theirs; and requests for
# runtime/requests_session.py, the bounded session of the SDKs that use it (imported by them).
RUNTIME_EXTRA = {"certifi", "requests"}


def _name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def exec_path_modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _name(path)
        if _within(name, TOOL_SIDE) or name.endswith(".descriptor"):
            continue
        if name not in BUILD_ONLY:
            modules[name] = path
    return modules


def imports(path: Path) -> list[tuple[str, bool]]:
    """(module, lazy) for every import outside ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    skipped = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for child in ast.walk(node)
    }
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) not in top_level) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, id(node) not in top_level))
    return found


def _within(module: str, packages: Iterable[str]) -> bool:
    return any(module == p or module.startswith(f"{p}.") for p in packages)


def verdict(module: str, imported: str, lazy: bool) -> str | None:
    """Why ``module`` may not import ``imported``, or ``None``."""
    if _within(imported, FORBIDDEN) and not (lazy and (module, imported) in LAZY_EXCEPTIONS):
        return "the operator tool, pydantic and YAML are never on the exec path"
    if imported.endswith(".descriptor"):
        return "a cloud's descriptor is the tool's view of it, never on the exec path"
    cloud = next((p for p in SDKS if _within(module, [p])), None)
    if imported.startswith("credprovider"):
        own = [*SHARED[1:], cloud] if cloud else SHARED[1:]
        if imported == "credprovider" or _within(imported, own):
            return None
        return "a cloud imports only the runtime and its own folder; the runtime no cloud"
    top = imported.split(".")[0]
    allowed = STDLIB | (SDKS[cloud] if cloud else RUNTIME_EXTRA)
    if top in allowed or (module, top) in LAZY_EXCEPTIONS:
        return None
    return f"{top} is not on the exec path's allow-list"


def test_the_exec_path_imports_only_what_it_is_allowed() -> None:
    modules = exec_path_modules()
    assert "credprovider.runtime.serve" in modules and "credprovider.aws.provider" in modules
    assert set(SDKS) == set(PLUGIN_PACKAGES.values())
    problems = [
        f"{module} imports {imported}: {why}"
        for module, path in modules.items()
        for imported, lazy in imports(path)
        if (why := verdict(module, imported, lazy))
    ]
    assert problems == []


@pytest.mark.parametrize(
    ("module", "imported", "lazy", "allowed"),
    [
        ("credprovider.runtime.serve", "credprovider.tool.kubeconfig.model", True, False),
        ("credprovider.runtime.serve", "yaml", True, False),
        ("credprovider.aws.provider", "credprovider.cloud", True, False),
        ("credprovider.aws.provider", "credprovider.aws.descriptor", True, False),
        ("credprovider.azure.cloudconfig", "yaml", True, True),
        ("credprovider.azure.cloudconfig", "yaml", False, False),
        ("credprovider.azure.provider", "pydantic", True, False),
        ("credprovider.runtime.caching", "credprovider.aws.provider", True, False),
        ("credprovider.gcp.provider", "credprovider.aws.registry", True, False),
        ("credprovider.gcp.provider", "botocore", True, False),
        ("credprovider.gcp.provider", "google.auth", True, True),
        ("credprovider.aws.provider", "credprovider.runtime.cachestore", False, True),
        ("credprovider.runtime.log", "asyncio", True, False),
        ("credprovider.entry", "credprovider.version", True, True),
    ],
)
def test_the_allow_list_refuses_what_it_should(
    module: str, imported: str, lazy: bool, allowed: bool
) -> None:
    assert (verdict(module, imported, lazy) is None) == allowed


def test_the_tool_package_holds_every_command() -> None:
    from credprovider.tool.commands import COMMANDS

    for command in COMMANDS:
        assert (PACKAGE / "tool" / "commands" / f"{command}.py").is_file(), command
    # At the top only what both sides share: the dispatcher, the error root, --version; and what
    # the tool reads of the clouds and the node's paths (release/ and the chart read those too).
    assert {p.name for p in PACKAGE.glob("*.py")} == {
        "__init__.py",
        "__main__.py",
        "cloud.py",
        "paths.py",
        "entry.py",
        "errors.py",
        "version.py",
    }

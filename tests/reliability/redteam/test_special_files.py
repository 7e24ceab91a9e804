"""#30 class 4: every path option of every subcommand, given a special file, is one line at once.

A FIFO (which would block a reader forever), ``/dev/zero`` and ``/dev/urandom`` (which never end), a
socket, a directory where a file belongs, a file where a directory belongs, ``/dev/full`` as the
file to write: through the built bundle, as root and as nobody, each must end in seconds with
exit 1 or 2, no traceback, a line naming the path, and nothing changed on the node. :data:`PATH_OPTIONS` is checked against
the parser, so a new path option without a row fails here.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from credprovider.tool.cli import build_parser
from release.bundle import BUNDLE_DIR
from tests.helpers import private, require_bundle

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/app"
CONFIG = (
    "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
    "  - name: ecr-credential-provider\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
    "    defaultCacheDuration: 1h\n    matchImages: ['*.dkr.ecr.*.amazonaws.com']\n"
)
# What a path option takes: a file it reads, a directory, or a file it writes.
READ, DIRECTORY, WRITE = "file it reads", "directory", "file it writes"
Argv = Callable[[str, Path], list[str]]


def _install(option: str) -> Argv:
    def argv(path: str, tmp: Path) -> list[str]:
        given = {
            "--bin-dir": str(tmp / "bin"),
            "--config-out": str(tmp / "out.yaml"),
            "--target": str(BUNDLE_DIR / "credprovider"),
        }
        given[option] = path
        return ["install", "--providers", "aws,azure", *[p for pair in given.items() for p in pair]]

    return argv


def _migrate(option: str) -> Argv:
    def argv(path: str, tmp: Path) -> list[str]:
        given = {
            "--kubelet-flags": "--cloud-provider=aws",
            "--bin-dir": str(tmp / "bin"),
            "--config-out": str(tmp / "out.yaml"),
        }
        if option in ("--kubelet-flags-file", "--kubelet-config"):
            del given["--kubelet-flags"]
        given[option] = path
        return ["migrate", "--write", *[f"{name}={value}" for name, value in given.items()]]

    return argv


def _agent_rows() -> dict[tuple[str, str], tuple[str, Argv]]:
    """The node agent: --root and --bundle given special files; the node paths --bin-dir and
    --config (read under --root) through plan with --root /, which only reads."""
    files_only = ["--files-only", "--providers", "aws"]

    def node(option: str) -> Argv:
        def argv(path: str, tmp: Path) -> list[str]:
            given = {"--bin-dir": str(tmp / "bin"), "--config": str(tmp / "c.yaml"), option: path}
            return [
                "agent",
                "plan",
                "--root",
                "/",
                *files_only,
                *[x for kv in given.items() for x in kv],
            ]

        return argv

    rows: dict[tuple[str, str], tuple[str, Argv]] = {
        ("agent plan", "--bin-dir"): (DIRECTORY, node("--bin-dir")),
        ("agent plan", "--config"): (READ, node("--config")),
        ("agent plan", "--root"): (DIRECTORY, lambda p, t: ["agent", "plan", "--root", p]),
        ("agent uninstall", "--root"): (
            DIRECTORY,
            lambda p, t: ["agent", "uninstall", "--root", p],
        ),
    }
    for action in ("apply", "run"):
        rows[(f"agent {action}", "--root")] = (
            DIRECTORY,
            lambda p, t, a=action: [
                "agent",
                a,
                "--root",
                p,
                "--bundle",
                str(BUNDLE_DIR),
                *files_only,
                "--bin-dir",
                "/b",
                "--config",
                "/c.yaml",
            ],
        )
        rows[(f"agent {action}", "--bundle")] = (
            DIRECTORY,
            lambda p, t, a=action: [
                "agent",
                a,
                "--root",
                str(t),
                "--bundle",
                p,
                *files_only,
                "--bin-dir",
                "/b",
                "--config",
                "/c.yaml",
            ],
        )
    return rows


# The agent's node paths (read under --root) of the commands that change the node: the plan they
# share refuses a special file there before anything is written, and is run above (agent plan),
# so that no test gives the agent the host's root to write in.
NODE_PATHS_THROUGH_PLAN = {
    (f"agent {action}", option)
    for action in ("apply", "run")
    for option in ("--bin-dir", "--config")
} | {
    # uninstall's: where the bootstrap goes, used only where the agent's state records its own
    # config at --config and its links in --bin-dir (test_agent_apply's mode-files rows)
    ("agent uninstall", option)
    for option in ("--bin-dir", "--config")
}

PATH_OPTIONS: dict[tuple[str, str], tuple[str, Argv]] = {
    ("validate", "path"): (READ, lambda p, t: ["validate", p, "--bin-dir", str(t)]),
    ("validate", "--bin-dir"): (DIRECTORY, lambda p, t: ["validate", str(t / "c.yaml"), "--bin-dir", p]),
    ("get", "--config"): (READ, lambda p, t: ["get", IMAGE, "--config", p, "--bin-dir", str(t)]),
    ("get", "--bin-dir"): (DIRECTORY, lambda p, t: ["get", IMAGE, "--config", str(t / "c.yaml"), "--bin-dir", p]),
    ("get", "--sa-token-file"): (
        READ,
        lambda p, t: ["get", IMAGE, "--config", str(t / "c.yaml"), "--bin-dir", str(t), "--sa-token-file", p],
    ),
    ("explain", "--config"): (READ, lambda p, t: ["explain", IMAGE, "--config", p]),
    ("install", "--bin-dir"): (DIRECTORY, _install("--bin-dir")),
    ("install", "--config-out"): (WRITE, _install("--config-out")),
    ("install", "--azure-config"): (READ, _install("--azure-config")),
    ("install", "--target"): (READ, _install("--target")),
    ("migrate", "--kubelet-flags-file"): (READ, _migrate("--kubelet-flags-file")),
    ("migrate", "--kubelet-config"): (READ, _migrate("--kubelet-config")),
    ("migrate", "--bin-dir"): (DIRECTORY, _migrate("--bin-dir")),
    ("migrate", "--config-out"): (WRITE, _migrate("--config-out")),
    # nothing recorded beside a special file: nothing to undo, naming it
    ("undo", "--config"): (READ, lambda p, t: ["undo", "--config", p]),
    ("undo", "--kubelet-flags-file"): (
        READ, lambda p, t: ["undo", "--config", str(t / "c.yaml"), "--kubelet-flags-file", p],
    ),
    ("doctor", "--config"): (READ, lambda p, t: ["doctor", "--offline", "--config", p, "--bin-dir", str(t)]),
    ("doctor", "--bin-dir"): (DIRECTORY, lambda p, t: ["doctor", "--offline", "--config", str(t / "c.yaml"), "--bin-dir", p]),
    ("doctor", "--root"): (DIRECTORY, lambda p, t: ["doctor", "--offline", "--root", p]),
    **_agent_rows(),
    ("fleet status", "--kubeconfig"): (READ, lambda p, t: ["fleet", "status", "--kubeconfig", p]),
    ("fleet uninstall", "--kubeconfig"): (
        READ,
        lambda p, t: ["fleet", "uninstall", "--namespace=ns", "--daemonset=d", "--kubeconfig", p],
    ),
    # doctor with a kubeconfig that cannot be read: the Node is not checked (a warning naming
    # it), and nothing else is found on this node: exit 1
    ("doctor", "--kubeconfig"): (READ, lambda p, t: ["doctor", "--kubeconfig", p]),
    ("agent run", "--kubeconfig"): (
        READ,
        lambda p, t: ["agent", "run", "--node", "n", "--root", str(t), "--bundle", str(BUNDLE_DIR),
                      "--kubeconfig", p],
    ),
    ("agent run", "--ready-file"): (
        WRITE,
        lambda p, t: ["agent", "run", "--node", "n", "--root", str(t), "--bundle", str(BUNDLE_DIR),
                      "--kubeconfig", str(t / "c.yaml"), "--ready-file", p],
    ),
    ("agent ready", "--ready-file"): (READ, lambda p, t: ["agent", "ready", "--ready-file", p]),
    # systemd's socket, given something else: refused before the node is read or changed
    **{
        (f"agent {action}", "--systemd-socket"): (
            READ,
            lambda p, t, a=action: [
                "agent", a, "--root", str(t), "--systemd-socket", p,
                *(["--bundle", str(BUNDLE_DIR)] if a != "uninstall" else []),
            ],
        )
        for action in ("apply", "uninstall", "run")
    },
    # the node's own rollback (run by its systemd): refused before the node is read or changed
    ("agent rollback", "--root"): (
        DIRECTORY, lambda p, t: ["agent", "rollback", "--root", p, "--armed-as", "x.service"],
    ),
    ("agent rollback", "--systemd-socket"): (
        READ,
        lambda p, t: ["agent", "rollback", "--root", str(t), "--armed-as", "x.service",
                      "--systemd-socket", p],
    ),
}  # fmt: skip
# Options that take something other than a path.
NOT_PATHS = {
    "help", "json", "image", "pattern", "offline", "show_password", "timeout", "sa_annotation",
    "provider", "providers", "copy", "force", "kubelet_flags", "write", "as_name",
    "version", "files_only", "uninstall", "restart_command", "healthz", "health_timeout",
    "node", "namespace", "slots", "lease_seconds", "metrics", "dry_run_launcher", "width",
    "provider_settings", "armed_as", "after", "shipped", "node_name", "daemonset", "platform",
    "environment", "migrate_in_tree", "beside", "cloud", "role", "dry_run", "context",
}  # fmt: skip


def _fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "a.fifo", 0o666)
    return str(tmp / "a.fifo")


def _socket(tmp: Path) -> str:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp / "a.sock"))
    _SOCKETS.append(server)
    return str(tmp / "a.sock")


def _directory(tmp: Path) -> str:
    (tmp / "a.dir").mkdir()
    return str(tmp / "a.dir")


def _regular(tmp: Path) -> str:
    (tmp / "a.file").write_text("not a directory\n")
    return str(tmp / "a.file")


_SOCKETS: list[socket.socket] = []
SPECIAL: dict[str, list[tuple[str, Callable[[Path], str]]]] = {
    READ: [
        ("a FIFO", _fifo),
        ("/dev/zero", lambda _: "/dev/zero"),
        ("/dev/urandom", lambda _: "/dev/urandom"),
        ("a socket", _socket),
        ("a directory", _directory),
    ],
    DIRECTORY: [("a FIFO", _fifo), ("/dev/zero", lambda _: "/dev/zero"), ("a file", _regular)],
    WRITE: [("/dev/full", lambda _: "/dev/full"), ("a FIFO", _fifo), ("a directory", _directory)],
}
CASES = [
    (command, option, special)
    for (command, option), (kind, _) in PATH_OPTIONS.items()
    for special, _ in SPECIAL[kind]
]


def _path_options(parser: argparse.ArgumentParser, command: str) -> set[tuple[str, str]]:
    """(command, option) for every option that is not known not to be a path, subcommands of
    subcommands included (``agent plan``)."""
    found = set()
    for option in parser._actions:
        if isinstance(option, argparse._SubParsersAction):
            for name, sub in option.choices.items():
                found |= _path_options(sub, f"{command} {name}".strip())
        elif option.dest not in NOT_PATHS:
            found.add(
                (command, option.option_strings[-1] if option.option_strings else option.dest)
            )
    return found


def test_every_path_option_of_every_subcommand_has_a_row() -> None:
    found = _path_options(build_parser(), "")
    assert found == set(PATH_OPTIONS) | NODE_PATHS_THROUGH_PLAN


# Who runs the tool: root, and an operator without root (nobody), whose node is writable by all
# (sticky, as /tmp).
AS_USER = {"root": [], "nobody": ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]}


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Path]:
    place = Path(tempfile.mkdtemp(prefix="special-", dir="/tmp"))
    place.chmod(0o1777)  # as /tmp: nobody may make files here, and cannot replace root's
    (place / "c.yaml").write_text(CONFIG)
    yield place
    while _SOCKETS:
        _SOCKETS.pop().close()
    shutil.rmtree(place, ignore_errors=True)


@pytest.mark.parametrize("who", AS_USER)
@pytest.mark.parametrize(("command", "option", "special"), CASES, ids=[" ".join(c) for c in CASES])
def test_a_special_file_is_one_line_at_once(
    node: Path, command: str, option: str, special: str, who: str
) -> None:
    require_bundle()
    if who != "root" and os.geteuid() != 0:
        pytest.skip("switching to nobody needs root")
    kind, argv = PATH_OPTIONS[(command, option)]
    path = dict(SPECIAL[kind])[special](node)
    before = sorted(p.name for p in node.iterdir())
    try:
        done = subprocess.run(
            # in namespaces of its own: its /run (the node's lock) is not the host's
            private([*AS_USER[who], str(BUNDLE_DIR / "credprovider"), *argv(path, node)]),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{command} {option} {special}: still running after 30 s")
    output = done.stdout + done.stderr
    assert done.returncode in (1, 2), output[-600:]
    assert "Traceback" not in output and "internal error" not in output, output[-600:]
    # A user who cannot write in the file's directory is told that, naming the directory.
    named = path in output or (kind == WRITE and f"in {os.path.dirname(path)} as uid" in output)
    assert named, output[-600:]
    assert max(map(len, output.splitlines() or [""])) <= 1200, "a line longer than 1,200"
    if kind == WRITE or command in ("install", "migrate", "undo"):
        assert sorted(p.name for p in node.iterdir()) == before, "the node was changed"

"""The kubelet's half of the exec protocol, for the tests, the demo and the bench: a request
encoded as the kubelet encodes it, the plugin run as a subprocess with it on stdin, its answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import credprovider
from credprovider.runtime.api import encode_request

# The tree the credprovider under test was imported from (its source runs with it on PYTHONPATH),
# and the bundle built there (release.bundle.BUNDLE_DIR, which tests/unit/test_architecture.py
# holds this to: the emulators import nothing from release/).
_SOURCE = Path(credprovider.__file__).resolve().parent.parent
_BUNDLE = _SOURCE / "dist" / "credprovider"
V1 = "credentialprovider.kubelet.k8s.io/v1"


def request_bytes(
    image: str,
    api_version: str = V1,
    token: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> bytes:
    """Encode a request exactly as the kubelet does (key order, compact, trailing newline)."""
    return encode_request(image, api_version, token or "", annotations)


@dataclass
class PluginRun:
    code: int
    stdout: bytes
    stderr: str
    seconds: float

    @property
    def response(self) -> dict[str, Any]:
        assert self.code == 0, f"plugin failed ({self.code}): {self.stderr}"
        parsed: dict[str, Any] = json.loads(self.stdout)
        return parsed

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]

    @property
    def error_lines(self) -> list[str]:
        """stderr lines other than the test-mode notice."""
        return [line for line in self.stderr_lines if "test mode:" not in line]


# The fixed node directories a test may give a plugin files in (each an overlay of the host's).
NODE_FILE_DIRS = ("/etc", "/opt", "/run", "/var/opt")


def with_node_files(command: list[str], files: Mapping[str, NodeFile], scratch: Path) -> list[str]:
    """``command`` in a private mount namespace whose :data:`NODE_FILE_DIRS` are overlays of the
    host's with ``files`` (absolute paths under them) written into their upper layers, in
    ``scratch``. A value of ``b"<fifo>"`` makes a FIFO there, ``(content, mode)`` a file of that
    mode."""
    mounts = []
    for top in NODE_FILE_DIRS:
        given = {path: data for path, data in files.items() if path.startswith(f"{top}/")}
        if not given:
            continue
        upper, work = scratch / top.strip("/") / "upper", scratch / top.strip("/") / "work"
        work.mkdir(parents=True)
        for path, data in given.items():
            target = upper / path.removeprefix(f"{top}/")
            target.parent.mkdir(parents=True, exist_ok=True)
            if data == FIFO:
                os.mkfifo(target)
            elif isinstance(data, tuple):  # (content, mode)
                target.write_bytes(data[0])
                target.chmod(data[1])
            else:
                target.write_bytes(data)
        mounts.append(
            f"mount -t overlay overlay -o lowerdir={top},upperdir={upper},workdir={work} {top}"
        )
    if unknown := [p for p in files if not p.startswith(tuple(f"{t}/" for t in NODE_FILE_DIRS))]:
        raise ValueError(f"{unknown}: only files under {' and '.join(NODE_FILE_DIRS)} can be given")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            f'{" && ".join(mounts)} && exec "$@"', "sh", *command]  # fmt: skip


FIFO = b"<fifo>"
# What a node file is given as: its content, FIFO, or (content, mode).
NodeFile = bytes | tuple[bytes, int]
# A command run as nobody (uid and gid 65534, no groups): the operator without root.
AS_NOBODY: Final = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def plugin_command(name: str, use_bundle: bool = False) -> list[str]:
    if use_bundle:
        return [str(_BUNDLE / name)]
    return [sys.executable, "-m", "credprovider", name]


def run_plugin(
    name: str,
    stdin: bytes,
    args: list[str] | None = None,
    env: Mapping[str, str | None] | None = None,
    use_bundle: bool = False,
    timeout: float = 90,
    own_network: bool = False,
    address_space: int | None = None,
    node_files: Mapping[str, NodeFile] | None = None,
    as_nobody: bool = False,
    wrapper: Sequence[str] = (),
) -> PluginRun:
    """Run a plugin with ``stdin``; ``env`` is added to the (already sanitized) test environment
    (a value of None unsets that variable).

    ``node_files`` (paths under :data:`NODE_FILE_DIRS` -> contents, :data:`FIFO` for a FIFO) are
    what the plugin finds at those fixed paths: it runs in a mount namespace of its own where
    those directories are overlays holding them (root only), so the host's never change.

    ``address_space`` (bytes) runs it under ``prlimit --as``: memory it would grow past that fails
    its allocations, so a test sees an unbounded read instead of assuming there is none.

    ``own_network`` runs it in a network namespace of its own (``unshare --net``, loopback down):
    for a test that points it at a real metadata address, so that even a broken connect guard
    could not reach one. ``as_nobody`` runs it as an operator without root would (its node files
    are still set up by root). ``wrapper`` goes before the plugin's command, inside those
    namespaces (``sh -c SCRIPT sh``: a script that sets the namespace up, then runs ``"$@"``)."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(_SOURCE)
    for variable, value in (env or {}).items():  # None: unset (the test environment sets it)
        if value is None:
            full_env.pop(variable, None)
        else:
            full_env[variable] = value
    start = time.monotonic()
    command = (
        (["unshare", "--net"] if own_network else [])
        + list(wrapper)
        + (["prlimit", f"--as={address_space}", "--"] if address_space else [])
        + (AS_NOBODY if as_nobody else [])
        + plugin_command(name, use_bundle)
        + list(args or [])
    )
    with tempfile.TemporaryDirectory() as scratch:
        if node_files:
            command = with_node_files(command, node_files, Path(scratch))
        proc = subprocess.run(
            command,
            input=stdin,
            capture_output=True,
            env=full_env,
            timeout=timeout,
            check=False,
        )
    return PluginRun(
        proc.returncode,
        proc.stdout,
        proc.stderr.decode("utf-8", "replace"),
        time.monotonic() - start,
    )

"""#30 class 4: writing into a closed pipe (``credprovider validate ... | head -1``) stops quietly,
as other command-line tools do: no ``BrokenPipeError`` traceback, whatever the subcommand and
however much it had to print. Each case runs the bundle with its stdout a pipe whose reading end
is already closed, so every write fails. And a stdout that cannot take the output at all (a full
disk under ``doctor --json > report.json``: ``/dev/full``; or closed, ``>&-``) is one line saying
so and exit 1, for the tool and every program's ``--version``: both were tracebacks."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.configs import HEAD, provider_yaml
from release.bundle import BUNDLE_DIR
from tests.helpers import require_bundle

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/app"


def _config(tmp: Path, providers: int = 1) -> str:
    path = tmp / "config.yaml"
    pattern = ["*.dkr.ecr.*.amazonaws.com"]
    path.write_text(HEAD + "".join(provider_yaml(f"p{i}", pattern) for i in range(providers)))
    return str(path)


COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "--help": lambda t: ["--help"],
    "install --help": lambda t: ["install", "--help"],
    "validate": lambda t: ["validate", _config(t), "--bin-dir", str(t)],
    "validate --json, 5,000 providers": lambda t: [
        "validate", _config(t, 5000), "--bin-dir", str(t), "--json"
    ],
    "explain": lambda t: ["explain", IMAGE, "--config", _config(t)],
    "match": lambda t: ["match", "*.dkr.ecr.*.amazonaws.com", f"{IMAGE}:v1"],
    "migrate": lambda t: ["migrate", "--kubelet-flags=--cloud-provider=aws"],
    "doctor": lambda t: ["doctor", "--offline", "--config", _config(t), "--bin-dir", str(t)],
    "get": lambda t: ["get", IMAGE, "--config", _config(t), "--bin-dir", str(t)],
}  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS)
def test_a_closed_pipe_on_stdout_is_a_quiet_stop(tmp_path: Path, command: str) -> None:
    require_bundle()
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write
    try:
        done = subprocess.run(
            [str(BUNDLE_DIR / "credprovider"), *COMMANDS[command](tmp_path)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    stderr = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr[-600:]
    assert "Exception ignored" not in stderr, stderr[-600:]
    assert done.returncode in (1, 2, 141), (done.returncode, stderr[-300:])


# Every program's --version, and each of the tool's commands above.
VERSIONS = ["credprovider", "ecr-credential-provider", "acr-credential-provider",
            "auth-provider-gcp", "registry-credential-provider"]  # fmt: skip


@pytest.mark.parametrize("stdout", ["/dev/full", "closed"])
@pytest.mark.parametrize("command", [*COMMANDS, *(f"{name} --version" for name in VERSIONS)])
def test_a_stdout_that_takes_nothing_is_one_line(tmp_path: Path, command: str, stdout: str) -> None:
    require_bundle()
    if command.endswith(" --version"):
        argv = [str(BUNDLE_DIR / command.split()[0]), "--version"]
    else:
        argv = [str(BUNDLE_DIR / "credprovider"), *COMMANDS[command](tmp_path)]
    if stdout == "closed":
        argv = ["sh", "-c", 'exec "$@" >&-', "sh", *argv]
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            argv,
            stdout=full if stdout == "/dev/full" else None,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
    stderr = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr[-600:]
    if done.returncode == 2:  # a usage error said on stderr (the command's own refusal)
        return
    assert done.returncode == 1, (done.returncode, stderr[-300:])
    said = "No space left on device" if stdout == "/dev/full" else "standard output is closed"
    assert f"cannot write to standard output: {said}" in stderr, stderr[-600:]

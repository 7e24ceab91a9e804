"""#30 class 3: a broken process environment. Each plugin of the bundle, started as the kubelet
starts it but with a standard descriptor closed or broken, gives the kubelet its answer or one
clear line, never a traceback; logging never decides the outcome."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from emulators.harness import Emulator
from emulators.kubelet_exec import request_bytes
from release.bundle import BUNDLE_DIR
from tests.helpers import require_bundle


@dataclass(frozen=True)
class Cloud:
    plugin: str
    image: str
    first_args: tuple[str, ...] = ()
    node_file: str = ""  # the emulator's file passed as the first argument (azure.json)


CLOUDS = {
    "aws": Cloud("ecr-credential-provider", "111122223333.dkr.ecr.us-west-2.amazonaws.com/app"),
    "gcp": Cloud("auth-provider-gcp", "gcr.io/p/app", ("get-credentials",)),
    "azure": Cloud("acr-credential-provider", "contoso.azurecr.io/app", node_file="config"),
}


@dataclass(frozen=True)
class Broken:
    redirect: str  # what the shell does to the plugin's descriptors before exec
    args: tuple[str, ...]
    answers: bool  # a full answer on stdout, exit 0
    says: str = ""  # else: the one stderr line contains this


CASES = {
    "stdin closed": Broken(
        "<&-", (), False, "stdin is closed: there is no CredentialProviderRequest"
    ),
    "stdout closed": Broken(">&-", (), False, "could not write the response to stdout"),
    "stderr closed": Broken("2>&-", (), True),
    "stderr closed, -v=1": Broken("2>&-", ("-v=1",), True),
    "stderr on a full device, -v=4": Broken("2>/dev/full", ("-v=4",), True),
}


def _as_the_kubelet_starts(
    request: pytest.FixtureRequest, cloud: str
) -> tuple[list[str], dict[str, str]]:
    """The bundle's plugin for ``cloud`` with its config's args, and the emulator's environment."""
    require_bundle()
    emulator: Emulator = request.getfixturevalue(cloud)
    spec = CLOUDS[cloud]
    node_file = [emulator.files[spec.node_file]] if spec.node_file else []
    command = [str(BUNDLE_DIR / spec.plugin), *spec.first_args, *node_file]
    return command, {**os.environ, **emulator.env}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("cloud", list(CLOUDS))
def test_a_closed_descriptor_never_costs_the_answer_or_gives_a_traceback(
    request: pytest.FixtureRequest, cloud: str, case: str, tmp_path: Path
) -> None:
    spec, broken = CLOUDS[cloud], CASES[case]
    command, env = _as_the_kubelet_starts(request, cloud)
    stderr_file = tmp_path / "stderr"
    with stderr_file.open("wb") as stderr:
        proc = subprocess.run(
            ["bash", "-c", f'exec "$@" {broken.redirect}', "bash", *command, *broken.args],
            input=request_bytes(spec.image),
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            timeout=90,
            check=False,
        )  # fmt: skip
    said = stderr_file.read_text(errors="replace")
    assert "Traceback" not in said and "report it" not in said, said
    if broken.answers:
        assert proc.returncode == 0, said
        answer = json.loads(proc.stdout)
        assert answer["kind"] == "CredentialProviderResponse" and answer["auth"], answer
    else:
        assert (proc.returncode, proc.stdout) == (1, b""), said
        lines = [line for line in said.splitlines() if "test mode" not in line]
        assert len(lines) == 1 and broken.says in lines[0], said


@pytest.mark.parametrize("given", ["--cache-dir", "CREDPROVIDER_CACHE_DIR"])
@pytest.mark.parametrize("cloud", list(CLOUDS))
def test_a_deleted_working_directory_under_a_relative_cache_is_a_warning(
    request: pytest.FixtureRequest, cloud: str, given: str, tmp_path: Path
) -> None:
    """The cache cannot be used, so the request is answered without it, with one warning."""
    spec = CLOUDS[cloud]
    command, env = _as_the_kubelet_starts(request, cloud)
    if given == "--cache-dir":
        command.append("--cache-dir=relative/cache")
    else:
        env["CREDPROVIDER_CACHE_DIR"] = "relative/cache"
    gone = tmp_path / "gone"
    gone.mkdir()
    proc = subprocess.run(
        ["bash", "-c", 'cd "$0" && rmdir "$0" && exec "$@"', str(gone), *command],
        input=request_bytes(spec.image),
        capture_output=True,
        env=env,
        timeout=90,
        check=False,
    )  # fmt: skip
    said = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0 and "Traceback" not in said and "report it" not in said, said
    assert json.loads(proc.stdout)["auth"]
    assert "working directory cannot be found" in said and "give an absolute --cache-dir" in said

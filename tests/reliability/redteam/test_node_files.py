"""#30 class 4 on the plugins' side: a file on the node that a plugin reads (azure.json, the file
GOOGLE_APPLICATION_CREDENTIALS names) which is a FIFO, a device, a directory or far too large is
one line naming it, at once: never a wait until the deadline blamed on the network, never a read
until memory runs out."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from emulators.harness import Emulator
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.helpers import require_bundle


def _fifo(tmp: Path) -> str:
    os.mkfifo(tmp / "fifo")
    return str(tmp / "fifo")


def _huge(tmp: Path) -> str:
    (tmp / "huge.json").write_bytes(b" " * (2 << 20))
    return str(tmp / "huge.json")


SPECIAL: dict[str, tuple[Callable[[Path], str], str]] = {
    "a FIFO": (_fifo, "is a FIFO, not a regular file"),
    "/dev/zero": (lambda tmp: "/dev/zero", "is a character device, not a regular file"),
    "a directory": (lambda tmp: str(tmp), "is a directory, not a regular file"),
    "2 MiB": (_huge, "is larger than 1 MiB"),
}
# cloud -> (plugin, image, how the file is named: args, env)
NAMED_BY: dict[str, tuple[str, str, Callable[[str], tuple[list[str], dict[str, str]]]]] = {
    "azure.json": (
        "acr-credential-provider",
        "contoso.azurecr.io/app",
        lambda path: ([path], {}),
    ),
    "GOOGLE_APPLICATION_CREDENTIALS": (
        "auth-provider-gcp",
        "gcr.io/p/app",
        lambda path: (["get-credentials"], {"GOOGLE_APPLICATION_CREDENTIALS": path}),
    ),
}


@pytest.mark.parametrize("special", list(SPECIAL))
@pytest.mark.parametrize("named_by", list(NAMED_BY))
def test_a_special_node_file_is_one_line_at_once(
    gcp: Emulator, azure: Emulator, tmp_path: Path, named_by: str, special: str
) -> None:
    require_bundle()
    plugin, image, naming = NAMED_BY[named_by]
    make, says = SPECIAL[special]
    path = make(tmp_path)
    args, env = naming(path)
    emulator_env = azure.env if plugin.startswith("acr") else gcp.env
    started = time.monotonic()
    run = run_plugin(
        plugin,
        request_bytes(image),
        [*args, "--deadline=20s"],
        {**emulator_env, **env},
        use_bundle=True,
    )
    assert time.monotonic() - started < 10, "waited for the deadline"
    lines = [line for line in run.stderr.splitlines() if "test mode" not in line]
    assert run.code == 1 and run.stdout == b"" and len(lines) == 1, run.stderr
    assert path in lines[0] and says in lines[0], run.stderr
    assert "Traceback" not in run.stderr and "report it" not in run.stderr

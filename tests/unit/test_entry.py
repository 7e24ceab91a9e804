"""The multi-call entry point and the lean exec path (which modules each plugin imports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from credprovider.entry import PLUGIN_MODULES, program_name, resolve
from tests.helpers import REPO


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["/usr/libexec/kubernetes/kubelet-plugins/ecr-credential-provider", "get-credentials"],
            ("ecr-credential-provider", ["get-credentials"]),
        ),
        (["ecr-credential-provider.exe"], ("ecr-credential-provider", [])),
        (
            ["/opt/credprovider/credprovider", "match", "a", "b"],
            ("credprovider", ["match", "a", "b"]),
        ),
        (
            ["/opt/credprovider/credprovider", "ecr-credential-provider", "-v=1"],
            ("ecr-credential-provider", ["-v=1"]),
        ),
        (
            ["/x/__main__.py", "ecr-credential-provider", "get-credentials"],
            ("ecr-credential-provider", ["get-credentials"]),
        ),
        (["/x/__main__.py"], None),
        (["/x/something-else", "nope"], None),
    ],
)
def test_dispatch(argv: list[str], expected: tuple[str, list[str]] | None) -> None:
    assert resolve(argv) == expected


def test_program_name_strips_directory_and_exe() -> None:
    assert program_name("/a/b/ecr-credential-provider") == "ecr-credential-provider"
    assert program_name("auth-provider-gcp.EXE") == "auth-provider-gcp"
    assert program_name("C:\\k\\x") != "x"  # Linux paths only: backslashes are name characters


def test_unknown_name_is_a_clear_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "credprovider", "nope"],
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        check=False,
    )
    assert proc.returncode == 1 and proc.stdout == b""
    assert b"unknown program name; run as one of ecr-credential-provider" in proc.stderr


_PROBE = """
import importlib, io, json, sys
from credprovider import plugin
from credprovider.entry import PROGRAM_MODULES
name, args, stdin = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3].encode()
spec = importlib.import_module(PROGRAM_MODULES[name]).SPEC
class In(io.BytesIO):
    def isatty(self): return False
code = plugin.run(spec, args, stdin=In(stdin), stdout=io.BytesIO(), stderr=io.StringIO(),
                  environ={})
roots = sorted({m.split(".")[0] for m in sys.modules})
print(json.dumps({"code": code, "roots": roots}))
"""
HEAVY = {
    "pydantic",
    "pydantic_core",
    "yaml",
    "botocore",
    "boto3",
    "azure",
    "msal",
    "google",
    "requests",
    "urllib3",
    "cryptography",
}


@pytest.mark.parametrize("name", sorted(PLUGIN_MODULES))
def test_plugin_start_up_imports_nothing_heavy(name: str) -> None:
    """Until a token is fetched (here: the request is invalid) no SDK, pydantic or YAML is loaded."""
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, name, "[]", "not a request"],
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        check=True,
        cwd=REPO,
    )
    result = json.loads(proc.stdout)
    assert result["code"] == 1
    assert HEAVY.isdisjoint(result["roots"]), HEAVY.intersection(result["roots"])

"""Context.sdk_environment: while a provider fetches, the process environment (what the SDKs and
any child process read) is the context's; afterwards it is exactly what it was."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from credprovider.runtime.deadline import Deadline
from credprovider.runtime.log import Logger
from credprovider.runtime.provider import Context


def _context(environ: dict[str, str] | os._Environ[str]) -> Context:
    return Context(Deadline(5.0), Logger("test", 0, io.StringIO()), environ)


def _child_sees(name: str) -> str:
    """What a child process (inheriting the C environment) reads for ``name``."""
    code = f"import os; print(os.environ.get({name!r}, '<unset>'))"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True
    ).stdout.strip()


def test_the_process_environment_is_the_contexts_and_then_what_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CREDPROVIDER_ONLY_OUTSIDE", "outside")
    monkeypatch.setenv("CREDPROVIDER_BOTH", "outside")
    before = dict(os.environ)
    wanted = {"CREDPROVIDER_BOTH": "inside", "AWS_REGION": "eu-west-3"}
    with _context(wanted).sdk_environment():
        assert dict(os.environ) == wanted
        assert _child_sees("CREDPROVIDER_ONLY_OUTSIDE") == "<unset>"
        assert _child_sees("CREDPROVIDER_BOTH") == "inside"
    assert dict(os.environ) == before
    assert _child_sees("CREDPROVIDER_BOTH") == "outside"


def test_it_is_restored_when_the_fetch_raises() -> None:
    before = dict(os.environ)
    with pytest.raises(RuntimeError), _context({"ONLY": "this"}).sdk_environment():
        raise RuntimeError("the SDK failed")
    assert dict(os.environ) == before


def test_in_a_plugins_exec_it_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin's context holds os.environ itself: nothing is copied or replaced."""
    monkeypatch.setenv("CREDPROVIDER_SET_DURING", "no")
    with _context(os.environ).sdk_environment():
        os.environ["CREDPROVIDER_SET_DURING"] = "yes"  # as if the SDK set it
    assert os.environ["CREDPROVIDER_SET_DURING"] == "yes"

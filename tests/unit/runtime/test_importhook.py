"""runtime/importhook.when_imported, on real imports of modules written for the test."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from credprovider.runtime.importhook import _AfterImport, when_imported


@pytest.fixture
def modules(tmp_path: Path) -> Iterator[Path]:
    """A directory on sys.path for the test's modules; sys.path, sys.meta_path and sys.modules are
    as they were afterwards."""
    saved_path, saved_meta = list(sys.path), list(sys.meta_path)
    before = set(sys.modules)
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    try:
        yield tmp_path
    finally:
        sys.path[:], sys.meta_path[:] = saved_path, saved_meta
        for name in set(sys.modules) - before:
            del sys.modules[name]


def _pending() -> list[str]:
    return [finder.name for finder in sys.meta_path if isinstance(finder, _AfterImport)]


def test_an_action_runs_after_the_first_import_and_the_module_keeps_its_loader(
    modules: Path,
) -> None:
    (modules / "hooked_a.py").write_text("VALUE = 1\n")
    seen: list[object] = []
    when_imported("hooked_a", lambda: seen.append(sys.modules["hooked_a"].VALUE))
    when_imported("hooked_a", lambda: seen.append("second"))
    assert seen == [] and _pending() == ["hooked_a"]  # one finder for both actions
    module = importlib.import_module("hooked_a")
    assert seen == [1, "second"]  # after the module's code, in the order given
    assert type(module.__loader__).__name__ == "SourceFileLoader"
    assert module.__spec__.loader is module.__loader__
    assert _pending() == []
    importlib.reload(module)
    assert seen == [1, "second"]  # once


def test_an_action_for_a_loaded_module_runs_at_once(modules: Path) -> None:
    seen: list[str] = []
    when_imported("sys", lambda: seen.append("now"))
    assert seen == ["now"] and _pending() == []


def test_other_imports_pass_the_finder_by(modules: Path) -> None:
    (modules / "hooked_b.py").write_text("")
    (modules / "other_c.py").write_text("")
    seen: list[str] = []
    when_imported("hooked_b", lambda: seen.append("b"))
    importlib.import_module("other_c")
    assert seen == [] and _pending() == ["hooked_b"]


def test_a_module_no_finder_finds_fails_as_usual_and_the_action_waits(modules: Path) -> None:
    """No finder returns a spec: the import raises what it would have raised, the action does not
    run, and it runs when a later import of the module succeeds."""
    seen: list[str] = []
    when_imported("hooked_d", lambda: seen.append("d"))
    with pytest.raises(ModuleNotFoundError, match="hooked_d"):
        importlib.import_module("hooked_d")
    assert seen == [] and _pending() == ["hooked_d"]
    (modules / "hooked_d.py").write_text("")
    importlib.invalidate_caches()
    importlib.import_module("hooked_d")
    assert seen == ["d"] and _pending() == []

"""credprovider/runtime/cjson.py gives exactly what the json module gives: the same values for what json
accepts, json's own errors for what it does not, the same bytes out."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credprovider.runtime import cjson
from release.bundle import REPO

TEXTS = [
    '{"kind":"CredentialProviderRequest","apiVersion":"v1","image":"a/b"}',
    ' \n\t{"a": [1, 2.5, -3e2, true, false, null, "\\u00e9\\n"]}\r\n ',
    "[]", '""', "0", "-0.0", "1e400", '"\\ud83d\\ude00"',
    "", "   ", "{", '{"a":1} x', '{"a":1}{}', "[1,]", '{"a" 1}', "nul", "NaN", "[Infinity]",
    '{"a":"\\x"}', '"unterminated', "\x00", "[" * 50 + "]" * 50, '{"a":1,"a":2}',
    "123" + "4" * 5000,
]  # fmt: skip


def _outcome(loads: Any, text: str, **options: Any) -> tuple[str, Any]:
    try:
        return "value", repr(loads(text, **options))
    except Exception as exc:
        return type(exc).__name__, str(exc)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("duplicate")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise ValueError(f"constant {name}")


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("hooks", [False, True])
def test_loads_is_json_loads(text: str, hooks: bool) -> None:
    options: dict[str, Any] = (
        {"object_pairs_hook": _pairs, "parse_constant": _no_constant} if hooks else {}
    )
    assert _outcome(cjson.loads, text, **options) == _outcome(json.loads, text, **options)


@given(st.text(alphabet='{}[]":,0123456789.eE+-tfnrulsa \\\n', max_size=40))
def test_loads_is_json_loads_on_any_text(text: str) -> None:
    assert _outcome(cjson.loads, text) == _outcome(json.loads, text)


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(VALUES)
def test_dumps_is_json_dumps(value: Any) -> None:
    assert cjson.dumps(value) == json.dumps(value, separators=(",", ":"))
    assert cjson.dumps(value, compact=False) == json.dumps(value)


def test_the_module_does_not_import_json_or_re() -> None:
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); from credprovider.runtime import cjson; "
        "cjson.loads(cjson.dumps({'a': [1]})); print('json' in sys.modules, 're' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe, str(REPO)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["False", "False"]


_FRESH_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
from credprovider.runtime import cjson
try:
    print("value", repr(cjson.loads(sys.stdin.read())))
except Exception as exc:
    print(type(exc).__name__, exc)
"""


@pytest.mark.parametrize("text", TEXTS)
def test_loads_in_a_process_that_has_not_imported_json(text: str) -> None:
    # The C scanner finds json's error class in sys.modules only; before json is imported it
    # used to fail with SystemError instead of json's own error.
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _FRESH_PROBE, str(REPO)],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    kind, _, detail = out.rstrip("\n").partition(" ")
    assert (kind, detail) == _outcome(json.loads, text)

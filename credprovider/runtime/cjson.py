"""``json.loads`` and compact ``json.dumps`` through ``_json`` (the C code the json module uses)
without importing the json module, which imports ``re`` and so ``enum``, ``functools`` and
``collections``: more than a cache hit's whole work. Same scanner and encoder, same results:

* :func:`loads` gives what ``json.loads`` gives for any text it accepts, and for anything else hands
  the text to ``json.loads`` itself, so every error (class, message, position) is json's own;
* :func:`dumps` is ``json.dumps(obj, separators=(",", ":"))``, or ``json.dumps(obj)`` (ASCII, NaN
  allowed, as json's defaults are; no check for circular references: nothing here is circular).
"""

from __future__ import annotations

import _json

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable

_WHITESPACE: Final = " \t\n\r"  # json's WHITESPACE pattern: [ \t\n\r]*


class _Context:
    """The attributes ``_json.make_scanner`` reads from a JSONDecoder."""

    def __init__(
        self,
        object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None,
        parse_constant: Callable[[str], Any] | None,
        parse_int: Callable[[str], Any] | None = None,
        parse_float: Callable[[str], Any] | None = None,
    ) -> None:
        self.strict = True
        self.object_hook = None
        self.object_pairs_hook = object_pairs_hook
        self.parse_float = parse_float or float
        self.parse_int = parse_int or int
        self.parse_constant = parse_constant or _CONSTANTS.__getitem__
        self.memo: dict[str, str] = {}


_CONSTANTS: Final = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def loads(
    text: str,
    *,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    parse_constant: Callable[[str], Any] | None = None,
    parse_int: Callable[[str], Any] | None = None,
    parse_float: Callable[[str], Any] | None = None,
) -> Any:
    context = _Context(object_pairs_hook, parse_constant, parse_int, parse_float)
    scan = _json.make_scanner(context)  # type: ignore[arg-type]
    start = _skip(text, 0)
    value, end = None, -1  # no value where one must be: json.loads says so, below
    if start < len(text):  # the C scanner must not be asked to scan past the end
        try:
            value, end = scan(text, start)
        except (StopIteration, SystemError):
            # StopIteration: no value at ``start``. SystemError: the scanner met an error and went to
            # raise json.decoder.JSONDecodeError, which it looks up in sys.modules only (CPython 3.11
            # ``raise_errmsg``), finding nothing when json has not been imported. Either way json
            # itself parses the text again and raises its own error.
            end = -1
    if end < 0 or _skip(text, end) != len(text):
        import json

        return json.loads(
            text,
            object_pairs_hook=object_pairs_hook,
            parse_constant=parse_constant,
            parse_int=parse_int,
            parse_float=parse_float,
        )
    return value


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


def _not_serializable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_ENCODERS: Final = {
    compact: _json.make_encoder(
        None,
        _not_serializable,
        _json.encode_basestring_ascii,
        None,
        ":" if compact else ": ",
        "," if compact else ", ",
        False,
        False,
        True,
    )
    for compact in (True, False)
}


def dumps(value: object, *, compact: bool = True) -> str:
    """``json.dumps(value, separators=(",", ":"))``, or ``json.dumps(value)`` when not
    ``compact``."""
    return "".join(_ENCODERS[compact](value, 0))


class NotJson(CredproviderError, ValueError):
    """The text holds NaN, Infinity or -Infinity: Python's json accepts them, JSON does not."""

    def __init__(self, constant: str) -> None:
        super().__init__(f"{constant} is not JSON")
        self.constant = constant


def reject_constant(name: str) -> Any:
    """The ``parse_constant`` of every decode here: raises :class:`NotJson`."""
    raise NotJson(name)


def json_type(value: object) -> str:
    """The JSON type of a decoded value, in Go's words (its unmarshal errors say ``bool``)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "null" if value is None else "object"

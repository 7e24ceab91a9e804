"""What a message quotes of a value from outside (runtime/excerpt.py): never more than an excerpt,
whatever the value costs to write out whole."""

from __future__ import annotations

import pytest

from credprovider.runtime.excerpt import QUOTE_LIMIT, quoted


def _laughs(depth: int) -> list[object]:
    """Ten references to the level below, ``depth`` levels deep: 10**depth strings written out."""
    level: list[object] = ["lol"] * 10
    for _ in range(depth - 1):
        level = [level] * 10
    return level


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("tenant", "'tenant'"),
        (None, "None"),
        (True, "True"),
        ([1, 2], "[1, 2]"),
        ({"a": 1}, "{'a': 1}"),
    ],
)
def test_a_small_value_is_quoted_as_its_repr(value: object, expected: str) -> None:
    assert quoted(value) == expected


def test_a_billion_laughs_is_quoted_by_an_excerpt_not_written_out() -> None:
    """repr() of this writes 10**10 strings: the excerpt walks what it shows."""
    text = quoted(_laughs(10))
    assert text.startswith("[[[[...], [...],")
    assert len(text) <= QUOTE_LIMIT + 20


def test_an_int_past_pythons_digit_limit_is_said_not_written() -> None:
    assert quoted(10**5000) == "an int too large to write"
    assert quoted(10**100).startswith("1000")


def test_a_long_bare_registry_host_is_quoted_by_excerpts_in_its_hint() -> None:
    """The hint for an image that is only a host named it three times: once cut, twice whole."""
    from credprovider.runtime.imageref import bare_host_hint

    host = "a." * 5000 + "example"
    hint = bare_host_hint(host)
    assert hint is not None and hint.count("…(10007 bytes)") == 3
    assert len(hint) < 4 * QUOTE_LIMIT + 250

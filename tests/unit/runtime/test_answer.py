"""The one bounded reader and JSON decoder every endpoint's answer goes through: each cap, at
its edge (the largest answer it lets through, the smallest it refuses)."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator

import pytest

from credprovider.runtime.answer import (
    MAX_BODY_BYTES,
    MAX_JSON_DEPTH,
    MAX_JSON_NUMBER,
    BadAnswer,
    check_structure,
    decode_json,
    decoded,
    number_in_string,
    read_bounded,
    sdk_body,
)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (_nested(2), [[]]),
        ('{"a": {"b": [1, 2.5, "x", null, true]}}', {"a": {"b": [1, 2.5, "x", None, True]}}),
        (str(MAX_JSON_NUMBER), MAX_JSON_NUMBER),
        (str(-MAX_JSON_NUMBER), -MAX_JSON_NUMBER),
        ("9007199254740992.0", 9007199254740992.0),
        ("1.7e12", 1.7e12),
        ('"' + "9" * 5000 + '"', "9" * 5000),  # a long string is not a number
    ],
)
def test_answers_within_the_caps_decode_as_json_does(text: str, value: object) -> None:
    assert decode_json(text.encode()) == value


def test_the_deepest_answer_allowed_decodes() -> None:
    value = decode_json(_nested(MAX_JSON_DEPTH))
    for _ in range(MAX_JSON_DEPTH - 1):
        (value,) = value
    assert value == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (_nested(MAX_JSON_DEPTH + 1), f"is JSON nested more than {MAX_JSON_DEPTH} levels deep"),
        (_nested(100_000), "nested more than"),  # past Python's recursion limit
        ('{"a":' * 5000 + "1" + "}" * 5000, "nested more than"),
        ("[" * 100_000, "nested more than"),  # never closed
        (str(MAX_JSON_NUMBER + 1), "has a number out of range (9007199254740993)"),
        ("9" * 400, "out of range (999999999999…(400 characters))"),
        ("9" * 5000, "out of range"),  # past int()'s 4300-digit limit
        ("-" + "9" * 400, "out of range"),
        ("1e400", "out of range (1e400)"),
        ("-1e400", "out of range"),
        ("1e16", "out of range"),
        ('{"exp": NaN}', "has NaN, which is not a JSON number"),
        ("[Infinity]", "has Infinity"),
        ("-Infinity", "has -Infinity"),
    ],
)
def test_answers_past_a_cap_are_bad_answers(text: str, reason: str) -> None:
    with pytest.raises(BadAnswer) as caught:
        decode_json(text)
    assert reason in caught.value.predicate
    assert "Traceback" not in str(caught.value) and len(str(caught.value)) < 300


@pytest.mark.parametrize("text", ["", "not json", '{"a": 1', "[1,]", "\ufeff{}"])
def test_what_is_not_json_stays_json_s_error(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        decode_json(text)
    assert not isinstance(caught.value, BadAnswer)


def test_a_body_past_the_size_cap_is_refused_before_decoding() -> None:
    with pytest.raises(BadAnswer, match="is larger than 1 MiB"):
        decode_json(b'"' + b"x" * MAX_BODY_BYTES + b'"')


def test_a_bad_answer_names_its_endpoint_once_and_says_what_to_check() -> None:
    bad = BadAnswer("is larger than 1 MiB").at("https://sts.example/v1/token?secret=1")
    assert bad.detail == "the answer from https://sts.example/v1/token is larger than 1 MiB"
    assert bad.at("https://other/") is bad
    assert str(bad).startswith(bad.detail + "; something other than the service may have")
    assert isinstance(bad, ValueError)  # parsers that catch ValueError still do


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"  " + _nested(40).encode(), "JSON nested more than 32"),
        (b"<a>" * 40 + b"</a>" * 40, "XML nested more than 32"),
        (b'{"expires_in": 1e999}', "out of range"),
    ],
)
def test_what_an_sdk_would_parse_is_checked_first(body: bytes, reason: str) -> None:
    with pytest.raises(BadAnswer, match=reason):
        check_structure(body)


@pytest.mark.parametrize(
    "body",
    [
        b"<a><b/><c>text</c><?xml?><!-- x --></a>" * 100,
        b"<r>" * 32 + b"</r>" * 32,
        b"plain text [[[[[",
        b'{"broken": [',  # the SDK says it is broken, in its words
        b"",
    ],
)
def test_what_an_sdk_may_parse_passes(body: bytes) -> None:
    check_structure(body)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1700000000", 1700000000), (" 3599 ", 3599), (42, 42), ("-5", -5)],
)
def test_numbers_in_strings(value: object, expected: int) -> None:
    assert number_in_string(value) == expected


@pytest.mark.parametrize(
    ("value", "bad"),
    [("9" * 400, True), ("9" * 5000, True), (str(MAX_JSON_NUMBER + 1), True),
     ("1e400", False), ("soon", False), (None, False), (True, False), (1.5, False)],
)  # fmt: skip
def test_numbers_in_strings_refused(value: object, bad: bool) -> None:
    with pytest.raises(ValueError) as caught:
        number_in_string(value)
    assert isinstance(caught.value, BadAnswer) == bad


def _blocks(count: int, size: int = 1 << 16) -> Iterator[bytes]:
    for _ in range(count):
        yield b"x" * size


def test_a_body_is_read_up_to_the_cap_and_no_further() -> None:
    assert len(read_bounded(_blocks(16), declared=None, remaining=lambda: 5.0)) == MAX_BODY_BYTES
    endless = _blocks(1 << 30)
    with pytest.raises(BadAnswer, match="larger than 1 MiB"):
        read_bounded(endless, declared=None, remaining=lambda: 5.0)
    assert len(list(zip(range(3), endless, strict=False))) == 3  # the rest was never read
    with pytest.raises(BadAnswer, match="larger than 1 MiB"):
        read_bounded(_blocks(0), declared=str(1 << 40), remaining=lambda: 5.0)
    with pytest.raises(BadAnswer, match="larger than"):  # int() refuses 4,300 digits and more
        read_bounded(_blocks(0), declared="9" * 5000, remaining=lambda: 5.0)
    for odd in ("\u00b2", " 12 ", "-5", "1e9"):  # "²" passes isdigit; none is a length to act on
        assert read_bounded(_blocks(1), declared=odd, remaining=lambda: 5.0) == b"x" * 65536


def test_a_trickle_ends_with_the_deadline() -> None:
    left = iter([3.0, 2.0, 0.0])
    with pytest.raises(BadAnswer, match="still arriving when the deadline passed"):
        read_bounded(_blocks(10, 1), declared=None, remaining=lambda: next(left))


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [
        ("gzip", gzip.compress),
        ("x-gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data)[2:-4]),  # a bare deflate stream
    ],
)
def test_encoded_answers_are_undone_under_the_cap(encoding: str, encode: object) -> None:
    assert callable(encode)
    assert decoded(encode(b'{"ok": 1}'), encoding) == b'{"ok": 1}'
    with pytest.raises(BadAnswer, match="larger than 1 MiB"):
        decoded(encode(b" " * (64 << 20)), encoding)


@pytest.mark.parametrize(
    ("encoding", "data", "reason"),
    [("br", b"x", "Content-Encoding 'br', which is not supported"),
     ("gzip", b"\x1f\x8bnot gzip", "is not valid gzip")],
)  # fmt: skip
def test_encodings_that_cannot_be_read(encoding: str, data: bytes, reason: str) -> None:
    with pytest.raises(BadAnswer, match=reason):
        decoded(data, encoding)


def test_an_sdk_body_names_the_url() -> None:
    with pytest.raises(BadAnswer) as caught:
        sdk_body(
            iter([_nested(33).encode()]),
            declared=None,
            encoding="identity",
            remaining=lambda: 1.0,
            where="http://127.0.0.1:9/token?x=1",
        )
    assert caught.value.detail.startswith("the answer from http://127.0.0.1:9/token is JSON")


def test_the_operators_docs_state_the_caps_the_code_holds() -> None:
    from pathlib import Path

    import credprovider.runtime.answer as answer

    docs = (Path(__file__).resolve().parents[3] / "docs" / "security.md").read_text()
    assert f"| Body size | {MAX_BODY_BYTES >> 20} MiB" in docs
    assert f"| {MAX_JSON_DEPTH} levels |" in docs
    assert MAX_JSON_NUMBER == 2**53 and "±2^53" in docs
    assert f"{answer.READ_BLOCK_BYTES >> 10} KiB blocks" in docs

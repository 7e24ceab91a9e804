"""systemd's syntax for the lines of a unit, pure: how a command line is split into words
(systemd.syntax(7), "Quoting"), how ``$NAME`` and ``${NAME}`` expand (systemd.service(5),
"Command lines"), and how an ``EnvironmentFile=`` is read (systemd.exec(5)). The rules are stated in
:mod:`credprovider.tool.node.units`, which applies them to the kubelet's unit."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from credprovider.errors import CredproviderError

_ESCAPES: Final = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                   "s": " ", "\\": "\\", '"': '"', "'": "'"}  # fmt: skip
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACED: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\$")


def is_variable_name(name: str) -> bool:
    """Whether systemd takes ``name`` as a variable's name (``$NAME``, ``NAME=VALUE``)."""
    return _NAME.fullmatch(name) is not None


class UnitSyntaxError(CredproviderError):
    """A line systemd would not parse (an unclosed quote): the unit would not load."""


def split_words(text: str) -> list[str]:
    """``text`` split as systemd splits a command line or an ``Environment=`` value: white space
    between words, quotes and backslash escapes removed."""
    words: list[str] = []
    current: list[str] = []
    in_word = False
    quote = ""
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            following = text[index + 1]
            if following == "\n":  # a continued line
                index += 2
                continue
            current.append(_ESCAPES.get(following, following))
            in_word = True
            index += 2
            continue
        if quote:
            if char == quote:
                quote = ""
            else:
                current.append(char)
        elif char in "\"'":
            quote = char
            in_word = True
        elif char.isspace():
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
        else:
            current.append(char)
            in_word = True
        index += 1
    if quote:
        raise UnitSyntaxError(f"unclosed {quote} in {text[:80]!r}")
    if in_word:
        words.append("".join(current))
    return words


def expand(words: list[str], environment: Mapping[str, str]) -> list[str]:
    """A command line's words after systemd's variable substitution (see the module)."""
    expanded: list[str] = []
    for word in words:
        if word.startswith("$") and _NAME.fullmatch(word[1:]):
            expanded += split_words(environment.get(word[1:], ""))
            continue

        def braced(match: re.Match[str]) -> str:
            return "$" if match.group(0) == "$$" else environment.get(match.group(1), "")

        expanded.append(_BRACED.sub(braced, word))
    return expanded


def parse_environment_file(text: str) -> dict[str, str]:
    """``NAME=VALUE`` lines as systemd reads an ``EnvironmentFile=`` (see the module): the value
    as written, quotes removed (a backslash keeps the next character), outer white space dropped;
    a line that is not an assignment is skipped, as systemd skips it."""
    found: dict[str, str] = {}
    for line in logical_lines(text):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        name, equals, value = stripped.partition("=")
        name = name.strip()
        if equals and _NAME.fullmatch(name):
            found[name] = _unquoted(value.strip())
    return found


def _unquoted(raw: str) -> str:
    out: list[str] = []
    quote = ""
    index = 0
    while index < len(raw):
        char = raw[index]
        if char == "\\" and quote != "'" and index + 1 < len(raw):
            out.append(raw[index + 1])
            index += 2
            continue
        if quote:
            if char == quote:
                quote = ""
            else:
                out.append(char)
        elif char in "\"'":
            quote = char
        else:
            out.append(char)
        index += 1
    return "".join(out)


def logical_lines(text: str) -> list[str]:
    """Lines, one ending in a backslash joined to the next."""
    lines: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines

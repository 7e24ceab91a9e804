"""The kubelet's flags in the files operators keep them in: read them, and edit them in place.

Understood: env files (kubeadm's ``KUBELET_KUBEADM_ARGS="..."``, ``KUBELET_EXTRA_ARGS=...``,
``KUBELET_OPTS``, ``DAEMON_ARGS``; ``export`` allowed), systemd units and drop-ins
(``Environment="KUBELET_EXTRA_ARGS=..."`` and the arguments of ``ExecStart=.../kubelet ...``, continued
lines joined), and a file that is just the flags. Each place flags are written is a :class:`Unit`: a
span of the file and the words in it, each word with its own span, so an edit removes or replaces
exactly the words it names and leaves every other byte of the file as it was. Pure functions.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from credprovider.tool.errors import NodeChangeError

# NAME=VALUE with a shell-quoted value, as in an env file.
_ASSIGNMENT: Final = re.compile(r"^((?:export\s+)?)([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
_FLAGS_VARIABLE: Final = re.compile(r"^KUBELET_[A-Z0-9_]*ARGS$|^KUBELET_OPTS$|^DAEMON_ARGS$")
# One word: unquoted characters, backslash escapes, and quoted runs, up to unquoted white space.
# Possessive: a 4 MiB file with an unclosed quote is one linear scan, no backtracking stack.
_WORD: Final = re.compile(r"""(?:[^\s"'\\]++|\\[^\n]|"(?:[^"\\]++|\\.)*+"|'[^']*+')++""", re.DOTALL)
_SEPARATOR: Final = re.compile(r"(?:\s|\\\n)*")
# One assignment inside systemd's Environment=: "NAME=VALUE" or NAME=VALUE (a name starts only
# where no word does, so a long run of letters is scanned once, not once per letter).
_ENVIRONMENT_ITEM: Final = re.compile(
    r'"([A-Za-z_][A-Za-z0-9_]*)=((?:[^"\\]++|\\.)*+)"|(?<!\w)([A-Za-z_]\w*+)=(\S*+)'
)


@dataclass(frozen=True)
class Word:
    start: int
    end: int
    value: str  # unquoted, as the kubelet receives it


@dataclass(frozen=True)
class Unit:
    """One place a file writes kubelet flags: ``text[start:end]`` holds ``words``."""

    start: int
    end: int
    words: tuple[Word, ...]
    # Where the quote goes when an unquoted value gains a space: before NAME in systemd's
    # Environment= ("NAME=a b"), before the value in an env file (NAME="a b"); else systemd (or a
    # shell) would read the second word as something else.
    quote_from: int | None = None


# An edit of one unit's words: which to drop (by index) and which to replace (index -> new word).
WordEdit = Callable[[Sequence[str]], tuple[set[int], dict[int, str]]]


def _words(text: str, start: int, end: int) -> tuple[Word, ...]:
    words: list[Word] = []
    position = start
    while True:
        position = _SEPARATOR.match(text, position, end).end()  # type: ignore[union-attr]
        if position >= end:
            return tuple(words)
        match = _WORD.match(text, position, end)
        if match is None or match.end() == position:
            raise NodeChangeError(f"cannot read {text[start:end][:80]!r}: No closing quotation")
        raw = match.group(0)
        try:
            split = shlex.split(raw.replace("\\\n", ""))
        except ValueError as exc:
            raise NodeChangeError(f"cannot read {text[start:end][:80]!r}: {exc}") from None
        words.append(Word(position, match.end(), split[0] if split else ""))
        position = match.end()


def _logical_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line, a line ending in a backslash continued by the next."""
    lines: list[tuple[int, int]] = []
    start = position = 0
    while position < len(text):
        newline = text.find("\n", position)
        if newline < 0:
            newline = len(text)
        if newline > 0 and text[newline - 1] == "\\" and newline < len(text):
            position = newline + 1
            continue
        lines.append((start, newline))
        start = position = newline + 1
    return lines


def _quoted_region(text: str, start: int, end: int) -> tuple[int, int]:
    """The span inside matching quotes around ``text[start:end]`` (stripped), else the span."""
    while start < end and text[start] in " \t":
        start += 1
    while end > start and text[end - 1] in " \t\r":
        end -= 1
    if end - start >= 2 and text[start] in "\"'" and text[end - 1] == text[start]:
        return start + 1, end - 1
    return start, end


def units(text: str) -> list[Unit]:
    """Every place ``text`` writes kubelet flags, in file order."""
    found: list[Unit] = []
    saw_structure = False
    for line_start, line_end in _logical_lines(text):
        line = text[line_start:line_end]
        stripped = line.strip()
        offset = line_start + len(line) - len(line.lstrip())
        if not stripped or stripped.startswith(("#", ";", "[")):
            saw_structure = saw_structure or stripped.startswith("[")
            continue
        key, equals, _ = stripped.partition("=")
        rest = offset + len(key) + len(equals)
        if key == "Environment":
            saw_structure = True
            for item in _ENVIRONMENT_ITEM.finditer(text, rest, line_end):
                group = 1 if item.group(1) else 3
                if _FLAGS_VARIABLE.match(item.group(group)):
                    value_start, value_end = item.span(group + 1)
                    words = _words(text, value_start, value_end)
                    quote_from = item.start(group) if group == 3 else None
                    found.append(Unit(value_start, value_end, words, quote_from))
            continue
        if key == "ExecStart":
            saw_structure = True
            words = _words(text, rest, line_end)
            if words and words[0].value.lstrip("-@+!:").rsplit("/", 1)[-1] == "kubelet":
                found.append(Unit(words[0].end, line_end, words[1:]))
            continue
        assignment = _ASSIGNMENT.match(line.strip())
        if assignment:
            saw_structure = True
            if _FLAGS_VARIABLE.match(assignment.group(2)):
                value_offset = offset + len(assignment.group(1)) + len(assignment.group(2)) + 1
                start, end = _quoted_region(text, value_offset, line_end)
                quoted = start > value_offset and text[start - 1] in "\"'"
                found.append(Unit(start, end, _words(text, start, end), None if quoted else start))
            continue
        if stripped.startswith("-") and not saw_structure:
            found.append(Unit(offset, line_end, _words(text, offset, line_end)))
    return found


def flags_from_file(text: str) -> str:
    """The kubelet flags ``text`` holds, as one string (``$VARIABLES`` of an ExecStart= left out:
    they are the Environment= and EnvironmentFile= values, read on their own)."""
    parts = [
        shlex.join(word.value for word in unit.words if not word.value.startswith("$"))
        for unit in units(text)
    ]
    return " ".join(parts)


def rewrite(text: str, edit: WordEdit, add: Sequence[str] = (), add_to: int | None = None) -> str:
    """``text`` with each unit's words edited by ``edit``, and ``add`` appended to unit ``add_to``
    (an index into :func:`units`). The bytes between kept words stay as they were."""
    found = units(text)
    for index in reversed(range(len(found))):
        unit = found[index]
        drop, replace = edit([word.value for word in unit.words])
        extra = list(add) if index == add_to else []
        if not drop and not replace and not extra:
            continue
        new = _edited(text, unit, drop, replace, extra)
        if unit.quote_from is not None and len(new.split()) > 1:
            head = text[unit.quote_from : unit.start]
            text = f'{text[: unit.quote_from]}"{head}{new}"{text[unit.end :]}'
        else:
            text = text[: unit.start] + new + text[unit.end :]
    return text


def _edited(text: str, unit: Unit, drop: set[int], replace: dict[int, str], add: list[str]) -> str:
    words = unit.words
    leading = text[unit.start : words[0].start] if words else ""
    pieces: list[str] = []
    for index, word in enumerate(words):
        if index in drop:
            continue
        separator = text[words[index - 1].end : word.start] if pieces else leading
        original = text[word.start : word.end]
        pieces.append(separator + (shlex.quote(replace[index]) if index in replace else original))
    tail = text[words[-1].end if words else unit.start : unit.end]
    joined = "".join(pieces)
    added = " ".join(shlex.quote(flag) for flag in add)
    if added:
        joined = f"{joined} {added}" if joined.strip() else leading + added
    return joined + tail

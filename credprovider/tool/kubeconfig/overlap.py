"""Two providers whose matchImages can match the same image.

The kubelet then runs both plugins for that image and hands the container runtime every credential
they return, which it tries in turn: two identities for one registry (a second provider of a plugin
under another name, ``<plugin name>-<suffix>``) are usually a mistake in matchImages. Pure:
patterns in, overlaps out, each with an image both match (the kubelet's own matching decides).
"""

from __future__ import annotations

from itertools import combinations
from typing import NamedTuple

from credprovider.runtime.matching import UrlParts, go_path_match, url_parts, urls_match

# Characters Go's path.Match treats as pattern syntax: a label without them matches only itself.
GLOB_CHARACTERS = frozenset("*?[\\")


class Overlap(NamedTuple):
    first: str  # provider names, in config order
    first_pattern: str
    second: str
    second_pattern: str
    image: str  # one image both patterns match


class _Pattern(NamedTuple):
    order: int  # the provider's place in the config
    provider: str
    text: str
    parts: UrlParts


def overlaps(providers: list[tuple[str, list[str]]], most: int = 20) -> list[Overlap]:
    """Pairs of providers (name, matchImages) that both match some image: one overlap per pair, in
    config order, at most ``most``. Literal hosts are indexed, so a config of thousands of
    providers with hosts of their own is checked in linear time; globs are compared with every
    pattern of the same shape (port and label count)."""
    literal: dict[tuple[str, int], dict[tuple[str, ...], list[_Pattern]]] = {}
    globs: list[_Pattern] = []
    for index, (name, patterns) in enumerate(providers):
        for text in patterns:
            parts = url_parts(text)
            if parts is None:
                continue
            pattern = _Pattern(index, name, text, parts)
            if any(GLOB_CHARACTERS.intersection(label) for label in parts.labels):
                globs.append(pattern)
            else:
                shape = literal.setdefault((parts.port, len(parts.labels)), {})
                shape.setdefault(tuple(parts.labels), []).append(pattern)
    found: dict[tuple[int, int], Overlap] = {}

    def note(a: _Pattern, b: _Pattern) -> None:
        if a.order == b.order or (min(a.order, b.order), max(a.order, b.order)) in found:
            return
        image = witness(a.parts, b.parts)
        if image is not None and urls_match(a.text, image) and urls_match(b.text, image):
            first, second = sorted((a, b))
            found[(first.order, second.order)] = Overlap(
                first.provider, first.text, second.provider, second.text, image
            )

    for shape in literal.values():
        for same_host in shape.values():
            for a, b in combinations(same_host, 2):
                note(a, b)
                if len(found) >= most:
                    return _ordered(found)
    for position, a in enumerate(globs):
        others = [*globs[position + 1 :]]
        for host, same in literal.get((a.parts.port, len(a.parts.labels)), {}).items():
            if all(go_path_match(g, label) for g, label in zip(a.parts.labels, host, strict=True)):
                others += same
        for b in others:
            note(a, b)
            if len(found) >= most:
                return _ordered(found)
    return _ordered(found)


def _ordered(found: dict[tuple[int, int], Overlap]) -> list[Overlap]:
    return [found[pair] for pair in sorted(found)]


def witness(a: UrlParts, b: UrlParts) -> str | None:
    """An image (host, port and path) that may match both patterns, or ``None`` when none is
    found: the same port and label count, paths of which one begins the other, and for each label
    a candidate both globs match (either literal, or a glob with its '*'s filled in)."""
    if a.port != b.port or len(a.labels) != len(b.labels):
        return None
    if not (a.path.startswith(b.path) or b.path.startswith(a.path)):
        return None
    labels = []
    for first, second in zip(a.labels, b.labels, strict=True):
        candidates = (
            first,
            second,
            first.replace("*", "x"),
            second.replace("*", "x"),
            # each glob's '*' filled with the other's literal text: '*-docker' and 'europe-*'
            first.replace("*", second.replace("*", "")),
            second.replace("*", first.replace("*", "")),
            "x",
        )
        label = next(
            (
                c
                for c in candidates
                if not GLOB_CHARACTERS.intersection(c)
                and go_path_match(first, c)
                and go_path_match(second, c)
            ),
            None,
        )
        if label is None:
            return None
        labels.append(label)
    host = ".".join(labels) + (f":{a.port}" if a.port else "")
    return host + max(a.path, b.path, key=len)

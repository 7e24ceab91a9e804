"""A name one slip from another: the typo an operator makes (a letter added, left out or changed,
two neighbours swapped, or another case), which validate and render name with the name meant."""

from __future__ import annotations

from collections.abc import Iterable


def one_slip(given: str, known: str, min_length: int = 0) -> bool:
    """``given`` differs from ``known`` by one slip: only in case, or by one letter inserted,
    left out or changed, or two neighbours swapped. A ``known`` shorter than ``min_length`` is
    one letter from too many others to call a letter's slip (its case still is)."""
    if given == known:
        return False
    if given.upper() == known.upper():
        return True
    if len(known) < min_length:
        return False
    if len(given) == len(known):
        diff = [i for i in range(len(given)) if given[i] != known[i]]
        return len(diff) == 1 or (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and given[diff[0]] == known[diff[1]]
            and given[diff[1]] == known[diff[0]]
        )
    if abs(len(given) - len(known)) != 1:
        return False
    short, long = (given, known) if len(given) < len(known) else (known, given)
    i = next((i for i in range(len(short)) if short[i] != long[i]), len(short))
    return short[i:] == long[i + 1 :]


def meant(given: str, known: Iterable[str]) -> str | None:
    """The one of ``known`` that ``given`` is a slip of (one letter, or only case, ``_`` and
    ``-``: ``match_images`` for ``matchImages``), if any."""
    folded = given.lower().replace("_", "").replace("-", "")
    for name in known:
        if one_slip(given, name, 4) or (given != name and folded == name.lower()):
            return name
    return None

"""Which providers the kubelet runs for an image: the one selection ``get``, ``explain`` and
``validate`` share (``match`` applies the same rule to one pattern), so that no two commands can
disagree about an image. Pure; not on the exec path.

The image is first turned into what the kubelet passes (:func:`credprovider.runtime.imageref.kubelet_image`,
which refuses what is not an image with the one hint every command and plugin gives); then each
provider, in config order, is matched by its ``matchImages`` with the kubelet's ``URLsMatchStr``.
A provider that does not match lists its nearest patterns of the same host family and why each
misses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from credprovider.runtime.matching import urls_match
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.images.misses import closest_misses


@dataclass(frozen=True)
class Selection:
    name: str
    matched: bool
    # not matched: the nearest patterns of the image's host family and why each misses (none when
    # every pattern is for another registry)
    misses: tuple[tuple[str, str], ...] = ()


def select_providers(image: str, providers: Sequence[tuple[str, Sequence[str]]]) -> list[Selection]:
    """``image`` as the kubelet passes it; ``providers``: (name, matchImages) in config order."""
    selections = []
    for name, patterns in providers:
        if any(urls_match(pattern, image) for pattern in patterns):
            selections.append(Selection(name, True))
        else:
            selections.append(Selection(name, False, tuple(closest_misses(list(patterns), image))))
    return selections


def shipped_providers() -> list[tuple[str, Sequence[str]]]:
    """Our plugins with the matchImages they ship with (config/), in the catalog's order: an
    opt-in plugin ships none (its registries are the operator's), so it is not among them."""
    return [(p.name, p.match_images) for p in PLUGINS.values() if not p.opt_in]

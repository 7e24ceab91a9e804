"""``credprovider explain``: which provider the kubelet would run for an image and what that plugin
would do. Offline and pure: no network, no SDK import. The selection is the one ``get`` makes
(credprovider/tool/images/selection.py), over the shipped matchImages or a config's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from credprovider.runtime.imageref import kubelet_image, parse_image
from credprovider.tool.catalog import PLUGINS, plugin_for_name
from credprovider.tool.images.selection import select_providers, shipped_providers


def explain_image(
    image: str,
    provider: str | None = None,
    providers: Sequence[tuple[str, Sequence[str]]] | None = None,
    args_of: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """The explanation as a JSON-ready dict (raises ``imageref.ImageError`` for what is not an
    image, with the hint every command gives).

    ``providers``: (name, matchImages) in config order; default, our plugins as shipped. The first
    that matches claims the image. ``provider`` (a plugin key) asks about that plugin alone: what it
    would do, and whether its matchImages send it the image."""
    name = kubelet_image(image)
    ref = parse_image(name)
    candidates = list(providers if providers is not None else shipped_providers())
    if provider is not None:
        plugin = PLUGINS[provider]
        candidates = [c for c in candidates if c[0] == plugin.name] or [
            (plugin.name, plugin.match_images)
        ]
    selections = select_providers(name, candidates)
    claimed = next((s.name for s in selections if s.matched), None)
    chosen = PLUGINS[provider].name if provider is not None else claimed
    # a suffixed name (ecr-credential-provider-prod) is the plugin it links to
    behind = plugin_for_name(chosen) if chosen is not None else None
    result: dict[str, Any] = {
        "image": name,
        "registry": ref.registry,
        "plugin": chosen,
        "provider": behind.key if behind is not None else None,
        "matched": chosen is not None and chosen == claimed,
        "misses": {
            s.name: [{"pattern": p, "reason": r} for p, r in s.misses]
            for s in selections
            if not s.matched and s.misses
        },
    }
    if chosen is None:
        return {
            **result,
            "recognized": False,
            "action": "nothing: the kubelet runs no plugin for it and pulls without their "
            "credentials (pull secrets and the node's docker config may still apply)",
        }
    if behind is None:
        return {
            **result,
            "recognized": False,
            "action": f"run {chosen} (not a credprovider plugin)",
        }
    args = (args_of or {}).get(chosen, ())
    return {**result, **behind.explain(ref.host, ref.registry, args).as_json()}

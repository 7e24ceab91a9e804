"""``credprovider explain``: which plugin claims an image and what it would do. Offline and pure:
no network, no SDK import."""

from __future__ import annotations

from typing import Any

from credprovider.catalog import PLUGINS
from credprovider.imageref import ImageError, bare_registry_host, parse_image


def explain_image(image: str, provider: str | None = None) -> dict[str, Any]:
    """The explanation as a JSON-ready dict (raises ``imageref.ImageError`` for a bad reference).

    Without ``provider``, the first plugin that recognises the registry claims the image (or none).
    """
    bare_host = bare_registry_host(image)
    if bare_host is not None:
        raise ImageError(
            f"{image!r} names only a registry host, no repository: did you mean "
            f"{bare_host}/<repository>?"
        )
    ref = parse_image(image)
    result: dict[str, Any] = {"image": ref.name, "registry": ref.registry}
    candidates = [provider] if provider else list(PLUGINS)
    for key in candidates:
        details = PLUGINS[key].explain(ref.host, ref.registry)
        if provider or details["recognized"]:
            return {**result, "provider": key, "plugin": PLUGINS[key].name, **details}
    return {
        **result,
        "provider": None,
        "plugin": None,
        "recognized": False,
        "action": "no credprovider plugin treats this registry as its own",
    }

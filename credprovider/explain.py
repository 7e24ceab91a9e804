"""``credprovider explain``: which plugin claims an image and what it would do. Offline and pure:
no network, no SDK import."""

from __future__ import annotations

from typing import Any

from credprovider.aws.registry import classify_host
from credprovider.azure.registry import CLOUDS, login_server_suffix
from credprovider.catalog import PLUGINS
from credprovider.gcp.registry import TOKEN_USERNAME, is_google_registry_host, registry_keys
from credprovider.matching import ImageError, bare_registry_host, parse_image

_PUBLIC_AZURE = CLOUDS["azurepubliccloud"]


def _aws(host: str, registry: str) -> dict[str, Any]:
    ecr = classify_host(host)
    recognized = ecr.kind != "other"
    if ecr.kind == "public":
        action = (
            f"call the ECR Public API (GetAuthorizationToken) in us-east-1 and return the token "
            f"under {registry} (cacheKeyType Registry, half the token's 12h validity)"
        )
    elif recognized:
        action = (
            f"call ECR GetAuthorizationToken in {ecr.region} and return the token under "
            f"{registry} (cacheKeyType Registry, half the token's 12h validity)"
        )
    else:
        action = (
            f"{host} is not an ECR host: only if matchImages sends it there (pull-through cache, "
            f"mirror), return a token for the default region (AWS_REGION) under {registry}"
        )
    return {
        "recognized": recognized,
        "region": ecr.region if recognized else None,
        "public": ecr.kind == "public",
        "action": action,
    }


def _azure(host: str, registry: str) -> dict[str, Any]:
    recognized = login_server_suffix(host, _PUBLIC_AZURE) is not None
    action = (
        f"get an AAD token for https://containerregistry.azure.net/.default, exchange it at "
        f"https://{registry}/oauth2/exchange for an ACR refresh token and return it under "
        f"{registry} (cacheKeyType Registry)"
        if recognized
        else f"{host} is not an ACR login server: answer with no credentials and cacheDuration 0s "
        "(or use --registry-mirror to map it to one)"
    )
    return {
        "recognized": recognized,
        "loginServer": registry.lower() if recognized else None,
        "action": action,
    }


def _gcp(host: str, registry: str) -> dict[str, Any]:
    recognized = is_google_registry_host(host)
    keys = registry_keys(registry, host) if recognized else []
    action = (
        f"get an access token (GOOGLE_APPLICATION_CREDENTIALS or the metadata server) and return "
        f"it as {TOKEN_USERNAME} under {', '.join(keys)} (cacheKeyType Global)"
        if recognized
        else f"{host} is not a Google registry: no token is sent to it"
    )
    return {"recognized": recognized, "action": action}


_EXPLAINERS = {"aws": _aws, "azure": _azure, "gcp": _gcp}


def explain_image(image: str, provider: str | None = None) -> dict[str, Any]:
    """The explanation as a JSON-ready dict (raises ``matching.ImageError`` for a bad reference).

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
    candidates = [provider] if provider else list(_EXPLAINERS)
    for key in candidates:
        details = _EXPLAINERS[key](ref.host, ref.registry)
        if provider or details["recognized"]:
            return {**result, "provider": key, "plugin": PLUGINS[key].name, **details}
    return {
        **result,
        "provider": None,
        "plugin": None,
        "recognized": False,
        "action": "no credprovider plugin treats this registry as its own",
    }

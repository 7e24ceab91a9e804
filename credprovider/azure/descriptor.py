"""The ACR plugin as the ``credprovider`` tool sees it (credprovider/tool/descriptor.py). Pure."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Final

from credprovider.azure import PLUGIN_NAME
from credprovider.azure.registry import (
    ANNOTATION_KEYS,
    CLOUDS,
    MATCH_IMAGES,
    SAMPLE_IMAGES,
    login_server_suffix,
)
from credprovider.tool.descriptor import CloudPlugin, both_port_forms, samples_with_port

DEFAULT_AZURE_CONFIG: Final = "/etc/kubernetes/azure.json"
_PUBLIC_AZURE = CLOUDS["azurepubliccloud"]


def explain(host: str, registry: str) -> dict[str, Any]:
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


def lints(match_images: Sequence[str], args: Sequence[str], env: Collection[str]) -> list[str]:
    if any(not arg.startswith("-") for arg in args):
        return []
    return [f"args lack the azure.json path (e.g. {DEFAULT_AZURE_CONFIG})"]


DESCRIPTOR = CloudPlugin(
    key="azure",
    name=PLUGIN_NAME,
    match_images=both_port_forms(MATCH_IMAGES),
    default_cache_duration="10m",
    args=(DEFAULT_AZURE_CONFIG,),
    annotation_keys=ANNOTATION_KEYS,
    sample_images=samples_with_port(SAMPLE_IMAGES),
    explain=explain,
    lints=lints,
    node_file_arg=DEFAULT_AZURE_CONFIG,
    in_tree_clouds=("azure",),
    node_file_flags=("azure-container-registry-config", "cloud-config"),
    implied_by_flags=("azure-container-registry-config",),
)

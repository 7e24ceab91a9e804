"""What the ``credprovider`` tool knows about its three plugins. Pure: no SDK is imported."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from credprovider.aws import registry as aws
from credprovider.azure import registry as azure
from credprovider.gcp import registry as gcp


@dataclass(frozen=True)
class PluginInfo:
    key: str  # aws | azure | gcp
    name: str  # the binary name in the kubelet's bin dir
    match_images: tuple[str, ...]
    default_cache_duration: str
    args: tuple[str, ...]
    annotation_keys: tuple[str, ...]  # service-account annotations the plugin reads
    sample_images: Mapping[str, str]  # host form -> an image of that form


DEFAULT_AZURE_CONFIG: Final = "/etc/kubernetes/azure.json"

PLUGINS: Final = {
    "aws": PluginInfo(
        "aws",
        "ecr-credential-provider",
        aws.MATCH_IMAGES,
        "12h",
        (),
        aws.ROLE_ARN_ANNOTATIONS,
        aws.SAMPLE_IMAGES,
    ),
    "azure": PluginInfo(
        "azure",
        "acr-credential-provider",
        azure.MATCH_IMAGES,
        "10m",
        (DEFAULT_AZURE_CONFIG,),
        azure.ANNOTATION_KEYS,
        azure.SAMPLE_IMAGES,
    ),
    "gcp": PluginInfo(
        "gcp",
        "auth-provider-gcp",
        gcp.MATCH_IMAGES,
        "1m",
        ("get-credentials",),
        (gcp.WI_ANNOTATION,),
        gcp.SAMPLE_IMAGES,
    ),
}
BY_NAME: Final = {info.name: info for info in PLUGINS.values()}


def plugin_for_name(provider_name: str) -> PluginInfo | None:
    """Our plugin behind a config's provider name (``.exe`` tolerated), if any."""
    name = provider_name[:-4] if provider_name.lower().endswith(".exe") else provider_name
    return BY_NAME.get(name)

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
# Where install and migrate put things by default, and where get looks when not told.
NODE_BIN_DIR: Final = "/etc/kubernetes/image-credential-provider"
NODE_CONFIG: Final = "/etc/kubernetes/image-credential-provider-config.yaml"
# The kubelet matches ports exactly: a pattern without a port never matches an image that names one,
# and `host:443/...` is common (copied registry URLs, some mirrors). Every shipped pattern and every
# pattern `install` writes has both forms, and validate warns about a config without them.
DEFAULT_HTTPS_PORT: Final = "443"


def with_https_port(reference: str) -> str:
    """``host/path`` -> ``host:443/path`` (patterns and images alike)."""
    host, slash, path = reference.partition("/")
    return f"{host}:{DEFAULT_HTTPS_PORT}{slash}{path}"


def both_port_forms(patterns: tuple[str, ...]) -> tuple[str, ...]:
    return (*patterns, *(with_https_port(pattern) for pattern in patterns))


def samples_with_port(samples: Mapping[str, str]) -> dict[str, str]:
    return {
        **samples,
        **{
            f"{form} (:{DEFAULT_HTTPS_PORT})": with_https_port(image)
            for form, image in samples.items()
        },
    }


PLUGINS: Final = {
    "aws": PluginInfo(
        "aws",
        "ecr-credential-provider",
        both_port_forms(aws.MATCH_IMAGES),
        "12h",
        (),
        aws.ROLE_ARN_ANNOTATIONS,
        samples_with_port(aws.SAMPLE_IMAGES),
    ),
    "azure": PluginInfo(
        "azure",
        "acr-credential-provider",
        both_port_forms(azure.MATCH_IMAGES),
        "10m",
        (DEFAULT_AZURE_CONFIG,),
        azure.ANNOTATION_KEYS,
        samples_with_port(azure.SAMPLE_IMAGES),
    ),
    "gcp": PluginInfo(
        "gcp",
        "auth-provider-gcp",
        both_port_forms(gcp.MATCH_IMAGES),
        "1m",
        ("get-credentials",),
        (gcp.WI_ANNOTATION,),
        samples_with_port(gcp.SAMPLE_IMAGES),
    ),
}
BY_NAME: Final = {info.name: info for info in PLUGINS.values()}


def plugin_for_name(provider_name: str) -> PluginInfo | None:
    """Our plugin behind a config's provider name (``.exe`` tolerated), if any."""
    name = provider_name[:-4] if provider_name.lower().endswith(".exe") else provider_name
    return BY_NAME.get(name)

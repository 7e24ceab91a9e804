"""The ECR plugin as the ``credprovider`` tool sees it (credprovider/tool/descriptor.py). Pure."""

from __future__ import annotations

from typing import Any

from credprovider.aws import PLUGIN_NAME
from credprovider.aws.registry import (
    MATCH_IMAGES,
    ROLE_ARN_ANNOTATIONS,
    SAMPLE_IMAGES,
    classify_host,
)
from credprovider.tool.descriptor import CloudPlugin, both_port_forms, samples_with_port


def explain(host: str, registry: str) -> dict[str, Any]:
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


DESCRIPTOR = CloudPlugin(
    key="aws",
    name=PLUGIN_NAME,
    match_images=both_port_forms(MATCH_IMAGES),
    default_cache_duration="12h",
    args=(),
    annotation_keys=ROLE_ARN_ANNOTATIONS,
    sample_images=samples_with_port(SAMPLE_IMAGES),
    explain=explain,
    in_tree_clouds=("aws",),
)

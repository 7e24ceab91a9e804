"""The ECR plugin as the ``credprovider`` tool sees it (credprovider/cloud.py). Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

from credprovider.aws import PLUGIN_NAME
from credprovider.aws.direct import (
    IMDS_FIX,
    IMDS_TOKEN_PATH,
    IMDS_TTL_HEADER,
    imds_endpoint,
)
from credprovider.aws.podidentity import AUDIENCE, CLUSTER_ENV
from credprovider.aws.registry import (
    BOTOCORE_CA_BUNDLE_ENV,
    IDENTITY_ENV,
    MATCH_IMAGES,
    ROLE_ARN_ANNOTATIONS,
    ROLE_ARN_ENV,
    SAMPLE_IMAGES,
    classify_host,
)
from credprovider.cloud import (
    CloudPlugin,
    Explanation,
    IdentityProbe,
    both_port_forms,
    samples_with_port,
)


def explain(host: str, registry: str, args: Sequence[str] = ()) -> Explanation:
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
    facts = {"region": ecr.region if recognized else None, "public": ecr.kind == "public"}
    return Explanation(recognized, action, facts)


def identity(
    environ: Mapping[str, str],
    args: Sequence[str],
    read: Callable[[str], str | None],
    exists: Callable[[str], bool],
) -> IdentityProbe | str:
    """The node's AWS identity as botocore's chain finds it first: keys in the environment, a web
    identity token file, else the instance role through IMDSv2."""
    if environ.get("AWS_ACCESS_KEY_ID") and environ.get("AWS_SECRET_ACCESS_KEY"):
        return "keys in the environment (AWS_ACCESS_KEY_ID): no endpoint to reach before ECR"
    if token_file := environ.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        return f"a web identity token ({token_file}) exchanged with STS: not probed"
    if environ.get("AWS_EC2_METADATA_DISABLED", "").strip().lower() == "true":
        return "AWS_EC2_METADATA_DISABLED is true: the identity comes from the AWS config files"
    imds = imds_endpoint(environ)
    return IdentityProbe(
        what=f"the instance role through IMDSv2 ({imds})",
        method="PUT",
        url=f"{imds}{IMDS_TOKEN_PATH}",
        headers={IMDS_TTL_HEADER: "60"},
        silence=IMDS_FIX,
    )


# The token files botocore reads whole, the env naming each (credentials.py).
TOKEN_FILE_ENV: Final = ("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")


def secret_files(
    args: Sequence[str], environ: Mapping[str, str], read: Callable[[str], str | None]
) -> list[tuple[str, str]]:
    """The token files the env names (a web identity token, the container credentials' token),
    and the AWS config files it names when they hold a secret key (botocore reads keys from
    both: credentials.py SharedCredentialProvider, ConfigProvider)."""
    found = []
    for name in TOKEN_FILE_ENV:
        path = environ.get(name, "")
        if path and (read(path) or "").strip():
            found.append((path, f"a token ({name})"))
    for name in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        path = environ.get(name, "")
        text = read(path) if path else None
        if text is not None and _holds_secret_key(text):
            found.append((path, "aws_secret_access_key"))
    return found


def _holds_secret_key(text: str) -> bool:
    """An INI file (botocore's config files) with an ``aws_secret_access_key`` given a value."""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "aws_secret_access_key" and value.strip():
            return True
    return False


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
    openshift_platform="aws",
    openshift_config="ecr-credential-provider.yaml",
    in_tree_removed_in=(1, 27),  # kubernetes PRs #116329, #122857, #124519
    controller_manager=(
        "the AWS cloud controller manager (aws-cloud-controller-manager, k8s.io/cloud-provider-aws)"
    ),
    identity=identity,
    file_env=TOKEN_FILE_ENV,
    secret_files=secret_files,
    token_audiences={
        CLUSTER_ENV: (AUDIENCE, "EKS Pod Identity (EKS Auth AssumeRoleForPodIdentity)")
    },
    # botocore's static credentials (credentials.py EnvProvider) and the Pod Identity token
    secret_env=(
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    ),
    # the plugin's own, and botocore's (botocore/configprovider.py, credentials.py, utils.py)
    env_read=(
        *IDENTITY_ENV,
        ROLE_ARN_ENV,
        *BOTOCORE_CA_BUNDLE_ENV,
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_ROLE_SESSION_NAME",
        "AWS_STS_REGIONAL_ENDPOINTS",
        "AWS_MAX_ATTEMPTS",
        "AWS_RETRY_MODE",
        "AWS_EC2_METADATA_DISABLED",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
        "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    ),
)

"""The Google plugin as the ``credprovider`` tool sees it (credprovider/cloud.py). Pure."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final

from credprovider.cloud import (
    CloudPlugin,
    Explanation,
    IdentityProbe,
    both_port_forms,
    samples_with_port,
)
from credprovider.errors import UsageError
from credprovider.gcp import PLUGIN_NAME
from credprovider.gcp.impersonation import chain_in_args
from credprovider.gcp.metadata import HEADERS, MTLS_MODE_ENV, metadata_root, wants_mtls
from credprovider.gcp.registry import (
    CACHE_DURATION_ENV,
    CACHE_TYPE_ENV,
    CREDENTIALS_FILE_ENV,
    MATCH_IMAGES,
    METADATA_HOST_ENV,
    METADATA_ROOT_ENV,
    SAMPLE_IMAGES,
    TOKEN_USERNAME,
    WI_ANNOTATION,
    covered_by_fixed_keys,
    is_google_registry_host,
    registry_keys,
)
from credprovider.runtime.redact import without_userinfo


def explain(host: str, registry: str, args: Sequence[str] = ()) -> Explanation:
    recognized = is_google_registry_host(host)
    keys = registry_keys(registry, host) if recognized else []
    action = (
        f"get an access token (GOOGLE_APPLICATION_CREDENTIALS or the metadata server) and return "
        f"it as {TOKEN_USERNAME} under {', '.join(keys)} (cacheKeyType Global)"
        if recognized
        else f"{host} is not a Google registry: no token is sent to it"
    )
    return Explanation(recognized, action)


def lints(match_images: Sequence[str], args: Sequence[str], env: Collection[str]) -> list[str]:
    warnings = []
    uncovered = [p for p in match_images if not covered_by_fixed_keys(p.split("/")[0])]
    # a host the plugin sends no token for (a typo, "gcr.oi", or another registry's) is told as
    # that: another cache type would not help it
    foreign = [p for p in uncovered if not is_google_registry_host(_host_of(p))]
    if foreign:
        warnings.append(
            f"matchImages {', '.join(foreign)} name no Google registry (gcr.io, *.gcr.io, "
            "*.pkg.dev, container.cloud.google.com): the plugin sends no token for them, so "
            "their pulls get no credentials from it"
        )
    other_port = [p for p in uncovered if p not in foreign]
    if other_port and CACHE_TYPE_ENV not in env:
        warnings.append(
            f"matchImages {', '.join(other_port)} name a Google registry form the plugin's Global "
            f"answer does not cover (another port): set env {CACHE_TYPE_ENV}=registry for this "
            "provider"
        )
    try:
        chain_in_args(args)
    except UsageError as exc:
        warnings.append(f"every pull through it fails: the plugin refuses these args: {exc}")
    if "get-credentials" not in args:
        warnings.append(
            "args lack get-credentials: this plugin runs without it, but upstream "
            "auth-provider-gcp prints help and the pull gets no credentials"
        )
    return warnings


def _host_of(pattern: str) -> str:
    """A matchImages pattern's host, without its port (``*.gcr.io:5000/x`` -> ``*.gcr.io``)."""
    authority = pattern.split("/")[0]
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


def _onward(args: Sequence[str]) -> str:
    """The accounts ``--impersonate-service-account`` leads on to (``""``: none, or a value the
    plugin refuses, which validate reports)."""
    try:
        chain = chain_in_args(args)
    except UsageError:
        return ""
    return chain.onward() if chain else ""


def identity(
    environ: Mapping[str, str],
    args: Sequence[str],
    read: Callable[[str], str | None],
    exists: Callable[[str], bool],
) -> IdentityProbe | str:
    """A credentials file when one is named, else the metadata server's default service account;
    then the impersonated accounts, if any (source → target)."""
    onward = _onward(args)
    then = f" → {onward}" if onward else ""
    if path := environ.get(CREDENTIALS_FILE_ENV):
        readable = "" if read(path) is not None else " (this user cannot read it)"
        return f"the credentials file {path} ({CREDENTIALS_FILE_ENV}){readable}{then}: not probed"
    if wants_mtls(environ, lambda path: read(path) is not None):
        return f"the metadata server over mTLS (GCE_METADATA_MTLS_MODE){then}: not probed"
    root = metadata_root(environ)
    return IdentityProbe(
        then=onward,
        what=f"the metadata server's default service account ({without_userinfo(root)})",
        method="GET",
        url=f"{root}instance/service-accounts/default/email",
        headers=HEADERS,
        expect_header=("Metadata-Flavor", "Google"),
        show_body=True,
        silence="off GCE (or with 169.254.169.254 blocked) there is no metadata server: give the "
        f"credentials with {CREDENTIALS_FILE_ENV} in the provider's env",
    )


# What a google-auth credentials file holds that gives its bearer the identity (google-auth's
# service_account, authorized_user, impersonated_service_account and external_account_authorized_user
# files: google/oauth2/service_account.py, credentials.py, google/auth/impersonated_credentials.py)
_SECRET_KEYS: Final = ("private_key", "refresh_token", "client_secret")


def secret_files(
    args: Sequence[str], environ: Mapping[str, str], read: Callable[[str], str | None]
) -> list[tuple[str, str]]:
    """The credentials file GOOGLE_APPLICATION_CREDENTIALS names, when it holds a key or a refresh
    token (its own, or its source credentials')."""
    path = environ.get(CREDENTIALS_FILE_ENV, "")
    text = read(path) if path else None
    if text is None:
        return []
    from credprovider.runtime.answer import decode_json

    try:
        info = decode_json(text)
    except ValueError:  # not JSON, or past a cap: the plugin's start check says so
        return []
    for held in (info, info.get("source_credentials") if isinstance(info, dict) else None):
        if isinstance(held, dict):
            key = next((key for key in _SECRET_KEYS if held.get(key)), "")
            if key:
                return [(path, key)]
    return []


DESCRIPTOR = CloudPlugin(
    key="gcp",
    name=PLUGIN_NAME,
    match_images=both_port_forms(MATCH_IMAGES),
    default_cache_duration="1m",
    args=("get-credentials",),
    annotation_keys=(WI_ANNOTATION,),
    sample_images=samples_with_port(SAMPLE_IMAGES),
    explain=explain,
    lints=lints,
    in_tree_clouds=("gce",),
    openshift_platform="gcp",
    openshift_config="gcr-credential-provider.yaml",
    in_tree_removed_in=(1, 31),  # kubernetes PRs #116329, #122857, #124519
    controller_manager=(
        "the GCP cloud controller manager (cloud-controller-manager, k8s.io/cloud-provider-gcp)"
    ),
    identity=identity,
    file_env=(CREDENTIALS_FILE_ENV,),
    secret_files=secret_files,
    # the plugin's own, and google-auth's (google/auth/environment_vars.py) that bear on a token
    env_read=(
        CREDENTIALS_FILE_ENV,
        CACHE_DURATION_ENV,
        CACHE_TYPE_ENV,
        METADATA_HOST_ENV,
        METADATA_ROOT_ENV,
        MTLS_MODE_ENV,
        "GCE_METADATA_IP",
        "GCE_METADATA_TIMEOUT",
        "GCE_METADATA_DETECT_RETRIES",
        "NO_GCE_CHECK",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_QUOTA_PROJECT",
        "GOOGLE_API_USE_CLIENT_CERTIFICATE",
        "GOOGLE_API_CERTIFICATE_CONFIG",
        "CLOUDSDK_CONFIG",
    ),
)

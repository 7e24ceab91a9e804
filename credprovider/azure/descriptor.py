"""The ACR plugin as the ``credprovider`` tool sees it (credprovider/cloud.py). Pure."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final

from credprovider.azure import PLUGIN_NAME
from credprovider.azure.cloudconfig import parse_cloud_config
from credprovider.azure.imds import (
    API_VERSION,
    ARC_API_VERSION,
    ARC_CHALLENGE,
    ARC_HIMDS,
    OTHER_SOURCE_ENV,
    TOKEN_PATH,
    arc_endpoint,
    base_url,
    serves,
)
from credprovider.azure.main import OPTIONS
from credprovider.azure.provider import IDENTITY_ENV
from credprovider.azure.registry import (
    ACR_SCOPE,
    ANNOTATION_KEYS,
    CLOUDS,
    ENVIRONMENT_FILE_ENV,
    MATCH_IMAGES,
    SAMPLE_IMAGES,
    AzureConfigError,
    login_server_suffix,
)
from credprovider.cloud import (
    CloudPlugin,
    Explanation,
    IdentityProbe,
    both_port_forms,
    samples_with_port,
)
from credprovider.errors import CredproviderError
from credprovider.runtime.args import parse_arguments, split_common_args
from credprovider.runtime.excerpt import quoted

DEFAULT_AZURE_CONFIG: Final = "/etc/kubernetes/azure.json"
_PUBLIC_AZURE = CLOUDS["azurepubliccloud"]


def explain(host: str, registry: str, args: Sequence[str] = ()) -> Explanation:
    recognized = login_server_suffix(host, _PUBLIC_AZURE) is not None
    action = (
        f"get an AAD token for https://containerregistry.azure.net/.default, exchange it at "
        f"https://{registry}/oauth2/exchange for an ACR refresh token and return it under "
        f"{registry} (cacheKeyType Registry)"
        if recognized
        else f"{host} is not an ACR login server: answer with no credentials and cacheDuration 0s "
        "(or use --registry-mirror to map it to one)"
    )
    return Explanation(
        recognized, action, {"loginServer": registry.lower() if recognized else None}
    )


def lints(match_images: Sequence[str], args: Sequence[str], env: Collection[str]) -> list[str]:
    try:
        _, rest = split_common_args(list(args))
        _, paths = parse_arguments(rest, OPTIONS)
    except CredproviderError:  # args the plugin refuses: validate runs it and says so
        return []
    if not paths:
        return [f"args lack the azure.json path (e.g. {DEFAULT_AZURE_CONFIG})"]
    if paths[0].startswith("/"):
        return []
    return [
        f"args name the azure.json {quoted(paths[0])}, a relative path: the plugin reads it from "
        f"the kubelet's working directory (/ under systemd); give it absolute (e.g. "
        f"{DEFAULT_AZURE_CONFIG})"
    ]


def secret_files(
    args: Sequence[str], environ: Mapping[str, str], read: Callable[[str], str | None]
) -> list[tuple[str, str]]:
    """azure.json when it gives a service principal's secret (the client secret, or the password
    of its certificate), and the certificate ``aadClientCertPath`` names (its private key)."""
    try:
        _, rest = split_common_args(list(args))
        _, files = parse_arguments(rest, OPTIONS)
    except CredproviderError:
        return []
    text = read(files[0]) if files else None
    if not files or text is None:
        return []
    try:
        config = parse_cloud_config(text, files[0])
    except AzureConfigError:  # the plugin's start check says so
        return []
    found = [
        (files[0], key)
        for key, value in (
            ("aadClientSecret", config.aadClientSecret),
            ("aadClientCertPassword", config.aadClientCertPassword),
        )
        if value
    ][:1]
    cert = config.aadClientCertPath
    if cert and read(cert):
        found.append((cert, "the service principal's certificate and private key"))
    return found


def identity(
    environ: Mapping[str, str],
    args: Sequence[str],
    read: Callable[[str], str | None],
    exists: Callable[[str], bool],
) -> IdentityProbe | str:
    """azure.json's identity, in the plugin's order; IMDS is probed for a managed identity."""
    try:
        _, rest = split_common_args(list(args))
        _, files = parse_arguments(rest, OPTIONS)
    except CredproviderError as exc:
        return f"args the plugin refuses ({exc}): not probed"
    if not files:
        return "no azure.json in the provider's args: the plugin refuses to start"
    path = files[0]
    text = read(path)
    if text is None:
        return f"{path} cannot be read by this user: not probed"
    try:
        config = parse_cloud_config(text, path)
    except AzureConfigError as exc:
        return f"{exc}: not probed"
    if config.useFederatedWorkloadIdentityExtension or config.aadFederatedTokenFile:
        return f"workload identity from {path}: not probed"
    if not config.useManagedIdentityExtension:
        who = config.aadClientId or "(no aadClientId)"
        return f"the service principal {who} from {path}, at the Entra ID authority: not probed"
    arc = arc_endpoint(environ, exists(ARC_HIMDS))
    if arc is not None:
        return _arc_probe(arc)
    if not serves(environ):
        source = next(name for name in OTHER_SOURCE_ENV if environ.get(name))
        return f"a managed identity through {source}, not IMDS: not probed"
    base = base_url(environ)
    # Without the Metadata header IMDS answers 400 and issues nothing: reachable, no token fetched.
    return IdentityProbe(
        what=f"the managed identity through IMDS ({base})",
        method="GET",
        url=f"{base}{TOKEN_PATH}?api-version={API_VERSION}",
        expect_status=400,
        silence="IMDS answers only on an Azure VM and only from the host: check that nothing "
        "blocks 169.254.169.254 (a proxy must exclude it: NO_PROXY=169.254.169.254)",
    )


def _arc_probe(endpoint: str) -> IdentityProbe:
    """The Azure Arc agent asked as the plugin first asks it: its 401 naming a key file is the
    agent answering (no key is read, no token fetched)."""
    from urllib.parse import urlencode

    query = urlencode(
        {"api-version": ARC_API_VERSION, "resource": ACR_SCOPE.removesuffix("/.default")}
    )
    return IdentityProbe(
        what=f"the managed identity through the Azure Arc agent ({endpoint.split('?')[0]})",
        method="GET",
        url=f"{endpoint}{'&' if '?' in endpoint else '?'}{query}",
        headers={"Metadata": "true"},
        expect_status=401,
        expect_header=("WWW-Authenticate", ARC_CHALLENGE),
        expect_header_start=True,
        silence="the Azure Arc agent (himds) answers only on an Arc-enabled server: check that "
        "it runs and is connected (azcmagent show), and that IDENTITY_ENDPOINT, where set, is "
        "its address",
    )


DESCRIPTOR = CloudPlugin(
    key="azure",
    name=PLUGIN_NAME,
    match_images=both_port_forms(MATCH_IMAGES),
    default_cache_duration="10m",
    args=(DEFAULT_AZURE_CONFIG,),
    annotation_keys=ANNOTATION_KEYS,
    sample_images=samples_with_port(SAMPLE_IMAGES),
    # ACR trades the AAD token for a refresh token at the registry named in the image
    dry_run_needs_own_registry=True,
    explain=explain,
    lints=lints,
    node_file_arg=DEFAULT_AZURE_CONFIG,
    in_tree_clouds=("azure",),
    openshift_platform="azure",
    openshift_config="acr-credential-provider.yaml",
    openshift_node_file="/etc/kubernetes/cloud.conf",
    in_tree_removed_in=(1, 30),  # kubernetes PRs #116329, #122857, #124519
    controller_manager=(
        "the Azure cloud controller manager and cloud node manager (sigs.k8s.io/cloud-provider-azure)"
    ),
    node_file_flags=("azure-container-registry-config", "cloud-config"),
    implied_by_flags=("azure-container-registry-config",),
    identity=identity,
    # what the plugin reads besides its azure.json (azure/provider.py, imds.py, registry.py)
    env_read=(*IDENTITY_ENV, "IDENTITY_HEADER", ENVIRONMENT_FILE_ENV),
    # the managed identity endpoint's secret header (App Service, Service Fabric)
    secret_env=("IDENTITY_HEADER",),
    secret_files=secret_files,
)

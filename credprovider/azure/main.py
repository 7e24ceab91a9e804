"""``acr-credential-provider``: drop-in for kubernetes-sigs/cloud-provider-azure's plugin."""

from __future__ import annotations

from credprovider.azure import PLUGIN_NAME
from credprovider.errors import UsageError
from credprovider.runtime._typing import TYPE_CHECKING, Final
from credprovider.runtime.args import parse_arguments
from credprovider.runtime.provider import Context, PluginSpec, Provider

if TYPE_CHECKING:
    from credprovider.azure.provider import AzureOptions

ARGUMENTS_HELP = """<path/to/azure.json> [--registry-mirror src:dst[,src:dst...]]

Arguments (as upstream):
  azure.json                 the cloud config: cloud, tenantId, aadClientId, aadClientSecret,
                             aadClientCertPath, aadClientCertPassword, useManagedIdentityExtension,
                             userAssignedIdentityID, aadFederatedTokenFile,
                             useFederatedWorkloadIdentityExtension, resourceManagerEndpoint
                             (keys case-insensitive; JSON or YAML)
  --registry-mirror, -r M    src:dst pairs: images whose registry host is src get credentials for
                             the ACR login server dst, returned under both names
  --ib-sni-name HOST         AKS identity bindings: the endpoint's name (TLS and Host), which
                             is reached at --ib-apiserver-ip (an IP or a name), trusting only
                             /etc/kubernetes/certs/ca.crt, never through a proxy
  --ib-apiserver-ip ADDRESS  (required with --ib-sni-name)
  --ib-default-client-id ID  the client ID when the service account has no
                             kubernetes.azure.com/acr-client-id annotation
  --ib-default-tenant-id ID  accepted as upstream (not sent anywhere)
Credentials, in upstream's order: an image of a --registry-mirror source, the node's managed
identity; else with --ib-sni-name, the pod's service account token through identity bindings;
else the pod's service account token when it is annotated with kubernetes.azure.com/acr-client-id
and kubernetes.azure.com/acr-tenant-id; otherwise, from azure.json: workload identity, managed
identity, client secret or certificate. The AAD token is always exchanged at the registry for an
ACR refresh token (never handed to the runtime).
"""


# The plugin's own options (each takes a value); the rest of its args name azure.json.
OPTIONS: Final = {
    "--registry-mirror": "registry_mirror",
    "-r": "registry_mirror",
    "--ib-sni-name": "ib_sni_name",
    "--ib-apiserver-ip": "ib_apiserver_ip",
    "--ib-default-client-id": "ib_default_client_id",
    "--ib-default-tenant-id": "ib_default_tenant_id",
}


def _options(args: list[str]) -> AzureOptions:
    values, config_files = parse_arguments(args, OPTIONS)
    bindings = None
    if any(name.startswith("ib_") for name in values):
        from credprovider.azure.bindings import bindings_from_flags

        bindings = bindings_from_flags(
            values.get("ib_sni_name", ""),
            values.get("ib_apiserver_ip", ""),
            values.get("ib_default_client_id", ""),
            values.get("ib_default_tenant_id", ""),
        )
    if not config_files:
        raise UsageError(
            "config file is not specified (usage: acr-credential-provider <azure.json>)"
        )
    if len(config_files) > 1:
        raise UsageError(
            "expected exactly one argument (config file); Got arguments: "
            f"[{' '.join(config_files)}]"
        )
    from credprovider.azure.registry import parse_registry_mirrors

    try:
        mirrors = parse_registry_mirrors(values.get("registry_mirror", ""))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from credprovider.azure.provider import AzureOptions

    return AzureOptions(config_path=config_files[0], mirrors=mirrors, bindings=bindings)


def build(args: list[str], ctx: Context) -> Provider:
    from credprovider.azure.provider import AcrProvider

    return AcrProvider(_options(args))


def check(args: list[str], ctx: Context) -> None:
    """The start check (``--version`` with the args): the args, then azure.json, when the node
    has it, read and parsed as a pull reads it, and the certificate it gives the node's identity,
    if any, read (a hand edit's typo there fails every pull). One not there yet is not refused:
    validate warns of it (provisioning may write it later). Nothing is fetched."""
    import os

    from credprovider.azure.identities import check_identity
    from credprovider.azure.provider import load_config

    path = _options(args).config_path
    if os.path.lexists(path):
        check_identity(load_config(path, ctx))


SPEC = PluginSpec(
    name=PLUGIN_NAME,
    summary="Kubelet image credential provider for Azure Container Registry.",
    build=build,
    check=check,
    arguments_help=ARGUMENTS_HELP,
)

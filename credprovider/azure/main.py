"""``acr-credential-provider``: drop-in for kubernetes-sigs/cloud-provider-azure's plugin."""

from __future__ import annotations

from credprovider.azure import PLUGIN_NAME
from credprovider.errors import UsageError
from credprovider.runtime._typing import Final
from credprovider.runtime.args import parse_arguments
from credprovider.runtime.provider import Context, PluginSpec, Provider

ARGUMENTS_HELP = """<path/to/azure.json> [--registry-mirror src:dst[,src:dst...]]

Arguments (as upstream):
  azure.json                 the cloud config: cloud, tenantId, aadClientId, aadClientSecret,
                             aadClientCertPath, aadClientCertPassword, useManagedIdentityExtension,
                             userAssignedIdentityID, aadFederatedTokenFile,
                             useFederatedWorkloadIdentityExtension, resourceManagerEndpoint
                             (keys case-insensitive; JSON or YAML)
  --registry-mirror, -r M    src:dst pairs: images whose registry host is src get credentials for
                             the ACR login server dst, returned under both names
  --ib-sni-name, --ib-apiserver-ip, --ib-default-client-id, --ib-default-tenant-id
                             AKS identity bindings: validated as upstream, not supported yet
Credentials: the pod's service account token when it is annotated with
kubernetes.azure.com/acr-client-id and kubernetes.azure.com/acr-tenant-id; otherwise, from
azure.json: workload identity, managed identity, client secret or certificate. The AAD token is
always exchanged at the registry for an ACR refresh token (never handed to the runtime).
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


def _check_identity_binding_flags(
    sni: str, apiserver_ip: str, client_id: str, tenant_id: str
) -> None:
    """Upstream's validation order and messages; then refuse, as the mode is not implemented."""
    if sni.startswith(("https://", "http://")):
        raise UsageError(
            f"--ib-sni-name must not contain protocol prefix (https:// or http://), got: {sni}"
        )
    if sni and not apiserver_ip:
        raise UsageError("--ib-apiserver-ip must be set when --ib-sni-name is provided")
    if client_id and not sni:
        raise UsageError("--ib-sni-name must be set when --ib-default-client-id is provided")
    if tenant_id and not sni:
        raise UsageError("--ib-sni-name must be set when --ib-default-tenant-id is provided")
    if apiserver_ip and not sni:
        raise UsageError("--ib-sni-name must be set when --ib-apiserver-ip is provided")
    if sni:
        raise UsageError(
            "AKS identity bindings (--ib-sni-name) are not supported by this plugin: use "
            "service-account tokens with kubernetes.azure.com/acr-client-id and acr-tenant-id "
            "annotations, or the node's managed identity"
        )


def build(args: list[str], ctx: Context) -> Provider:
    values, config_files = parse_arguments(args, OPTIONS)
    _check_identity_binding_flags(
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
    from credprovider.azure.provider import AcrProvider, AzureOptions

    return AcrProvider(AzureOptions(config_path=config_files[0], mirrors=mirrors))


SPEC = PluginSpec(
    name=PLUGIN_NAME,
    summary="Kubelet image credential provider for Azure Container Registry.",
    build=build,
    arguments_help=ARGUMENTS_HELP,
)

"""ACR credentials: the provider. Its plan (the login server, a mirror's target, what picks the
identity) and its fulfilment: the Entra identity (credprovider/azure/identities.py) gives an AAD
token, which the registry exchanges for a refresh token (credprovider/azure/exchange.py).

azure-identity and requests are imported lazily, only when a flow needs them.
"""

from __future__ import annotations

from credprovider.azure.registry import (
    ACR_REFRESH_USERNAME,
    ENVIRONMENT_FILE_ENV,
    AzureConfigError,
    Cloud,
    cloud_from_metadata,
    cloud_from_name,
    login_server_suffix,
)
from credprovider.errors import ProviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple
from credprovider.runtime.advice import NOT_THE_SERVICE
from credprovider.runtime.answer import BadAnswer, jwt_expiry
from credprovider.runtime.api import AuthConfig, CredentialProviderRequest
from credprovider.runtime.provider import Context, Credentials, Plan, fingerprint_file, one_line

if TYPE_CHECKING:
    from credprovider.azure.bindings import Bindings
    from credprovider.azure.cloudconfig import AzureConfig
    from credprovider.runtime.imageref import ImageRef


# Environment that changes which managed identity or endpoint answers (no secrets).
IDENTITY_ENV: Final = (
    "AZURE_POD_IDENTITY_AUTHORITY_HOST",
    "IDENTITY_ENDPOINT",
    "IMDS_ENDPOINT",
    "MSI_ENDPOINT",
    "AZURE_FEDERATED_TOKEN_FILE",
    "AZURE_AUTHORITY_HOST",
)


class AzureOptions(NamedTuple):
    config_path: str
    mirrors: dict[str, str]
    bindings: Bindings | None = None  # AKS identity bindings (azure/bindings.py)


def load_config(path: str, ctx: Context) -> AzureConfig:
    """The parsed cloud config (imported here: a cache hit only fingerprints the file); a probably
    misspelt key is a warning."""
    from credprovider.azure.cloudconfig import parse_cloud_config_with_notes
    from credprovider.runtime.nodefile import read_node_text

    try:
        text = read_node_text(path)
    except OSError as exc:
        raise ProviderError(f"cannot read the cloud config {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ProviderError(f"cannot read the cloud config {path}: it is not UTF-8 text") from None
    try:
        config, notes = parse_cloud_config_with_notes(text, path)
    except AzureConfigError as exc:
        raise ProviderError(f"invalid cloud config: {exc}") from None
    for note in notes:
        ctx.log.warning(note)
    return config


def resolve_cloud(config: AzureConfig, ctx: Context) -> Cloud:
    """The cloud from azure.json, an Azure Stack environment file, or ARM metadata discovery."""
    environment_text = None
    environment_file = ctx.environ.get(ENVIRONMENT_FILE_ENV, "")
    if config.cloud.strip().lower() == "azurestackcloud" and environment_file:
        from credprovider.runtime.nodefile import read_node_text

        try:
            environment_text = read_node_text(environment_file)
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise ProviderError(
                f"cannot read {ENVIRONMENT_FILE_ENV}={environment_file}: {reason or exc}"
            ) from None
    if config.resourceManagerEndpoint and environment_text is None:
        return _discover_cloud(config, ctx)
    try:
        return cloud_from_name(config.cloud, environment_text)
    except AzureConfigError as exc:
        raise ProviderError(f"invalid cloud config: {exc}") from None


def _discover_cloud(config: AzureConfig, ctx: Context) -> Cloud:
    """The cloud's endpoints from its Resource Manager's metadata (Azure Stack Hub), through the
    transport seam (retried, bounded, within the deadline; requests when a proxy is set)."""
    from credprovider.azure.exchange import transport_for
    from credprovider.runtime.http import HttpError, exchange

    url = config.resourceManagerEndpoint.rstrip("/") + "/metadata/endpoints?api-version=2019-05-01"
    ctx.deadline.phase = f"reading cloud endpoints from {url}"
    try:
        response = exchange(
            ctx,
            "GET",
            url,
            what="ARM metadata",
            headers={"Accept": "application/json"},
            send=transport_for(ctx),
        )
    except BadAnswer as exc:
        raise ProviderError(
            f"could not read cloud endpoints from {url}: the answer {exc.predicate}",
            NOT_THE_SERVICE,
        ) from None
    except HttpError as exc:
        raise ProviderError(f"could not read cloud endpoints from {url}: {one_line(exc)}") from None
    if response.status != 200:
        raise ProviderError(
            f"reading cloud endpoints from {url} failed with HTTP {response.status}"
        )
    try:
        return cloud_from_metadata(response.text(), config.cloud)
    except AzureConfigError as exc:
        raise ProviderError(f"cloud endpoints from {url}: {exc}") from None


class AcrProvider:
    """``acr-credential-provider``: an ACR refresh token for the image's login server."""

    def __init__(self, options: AzureOptions) -> None:
        self.options = options

    def plan(self, image: ImageRef, request: CredentialProviderRequest, ctx: Context) -> Plan:
        """The login server (the image's registry, or its mirror), its keys, and what picks the
        Entra identity (no SDK, no secrets). ``detail``: the login server."""
        source = image.registry.lower()
        identity = {name: ctx.environ.get(name, "") for name in IDENTITY_ENV}
        identity["config_path"] = self.options.config_path
        identity["config"] = fingerprint_file(self.options.config_path)
        identity["environment"] = fingerprint_file(ctx.environ.get(ENVIRONMENT_FILE_ENV, "") or "/")
        login_server = self.options.mirrors.get(source, source)
        identity["login_server"] = login_server
        keys = (image.registry,) if login_server == source else (login_server, image.registry)
        return Plan(image, keys, identity, detail=login_server)

    def fulfil(self, plan: Plan, request: CredentialProviderRequest, ctx: Context) -> Credentials:
        image, login_server = plan.image, str(plan.detail)
        config = load_config(self.options.config_path, ctx)
        cloud = resolve_cloud(config, ctx)
        mirrored = login_server != image.registry.lower()
        host = login_server.rsplit(":", 1)[0] if not login_server.endswith("]") else login_server
        if login_server_suffix(host, cloud) is None:
            ctx.log.v(
                1, f"{login_server} is not an ACR login server ({cloud.name}): no credentials"
            )
            return Credentials({}, cache_duration=0)
        if mirrored:
            ctx.log.v(1, f"{image.registry} is mirrored to {login_server}")
        from credprovider.azure.identities import aad_token, binding_identity, choose_identity

        if self.options.bindings is not None and not mirrored:
            identity = binding_identity(self.options.bindings, request, config, ctx)
        else:
            identity = choose_identity(request, config, cloud, ctx, mirrored)
        from credprovider.azure.exchange import exchange_for_refresh_token

        refresh = exchange_for_refresh_token(
            login_server, aad_token(identity, ctx), identity.tenant, ctx
        )
        try:
            expires_at = jwt_expiry(refresh)
        except BadAnswer as exc:
            raise ProviderError(
                f"ACR token exchange at {login_server}: the refresh token's payload {exc.predicate}",
                NOT_THE_SERVICE,
            ) from None
        entry = AuthConfig(ACR_REFRESH_USERNAME, refresh)
        return Credentials({key: entry for key in plan.keys}, expires_at=expires_at)

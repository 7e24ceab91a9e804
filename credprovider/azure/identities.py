"""Which Entra identity an ACR pull uses, and its AAD token for the registry's scope: IMDS on
the stdlib (credprovider/azure/imds.py), AKS identity bindings on the stdlib
(credprovider/azure/bindings.py), else azure-identity: the pod's service-account token (KEP-4412),
azure.json's workload identity, managed identity, client secret or certificate. azure-identity is
imported here only, lazily, and its pipeline retries no status: throttling and failures follow the
one policy every route does (runtime/retry.py).
"""

from __future__ import annotations

from credprovider.azure.registry import (
    ACR_SCOPE,
    WELL_KNOWN_AUTHORITY_HOSTS,
    Cloud,
    service_account_identity,
)
from credprovider.errors import ProviderError
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final, NamedTuple
from credprovider.runtime.advice import NOT_THE_SERVICE, transport_reason, unreachable_url
from credprovider.runtime.answer import BadAnswer
from credprovider.runtime.api import CredentialProviderRequest
from credprovider.runtime.provider import Context, one_line
from credprovider.runtime.redact import register_secret

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Literal

    from credprovider.azure.bindings import Bindings
    from credprovider.azure.cloudconfig import AzureConfig

    # azure-identity's settings, made on first use (see choose_identity).
    SdkOptions = Callable[[], dict[str, Any]]
    # The identity of azure.json's that a pull takes without a pod's ("": none).
    NodeRoute = Literal["workload", "managed", "secret", "certificate", ""]

SDK_RETRIES: Final = 2
# (status, Retry-After) of each answer azure-identity's transport got in this exec (one request a
# process): what a throttled token request said, when the SDK's error does not carry it.
SDK_ANSWERS: list[tuple[int, str | None]] = []


class Identity(NamedTuple):
    """The credential chosen for a request and the tenant sent with the exchange."""

    description: str
    credential: Any
    tenant: str
    # the host it asks for tokens, named when it cannot be reached (empty: the credential's own
    # errors say it)
    endpoint: str = ""


def _sdk_options(cloud: Cloud, ctx: Context) -> dict[str, Any]:
    """azure-identity's settings for every credential: requests' CA bundle is checked first, and
    its pipeline reads every answer under the caps (:mod:`credprovider.runtime.requests_session`)."""
    from azure.core.pipeline.transport import RequestsTransport

    from credprovider.runtime.requests_session import bounded_session
    from credprovider.runtime.tls import REQUESTS_CA_BUNDLE_ENV, require_usable_ca_bundle

    require_usable_ca_bundle(ctx.environ, REQUESTS_CA_BUNDLE_ENV)
    timeouts = {
        "connection_timeout": ctx.deadline.timeout(5.0),
        "read_timeout": ctx.deadline.timeout(15.0),
    }
    session = bounded_session(ctx.deadline.remaining)

    def note(response: Any, *args: Any, **kwargs: Any) -> Any:
        SDK_ANSWERS.append((response.status_code, response.headers.get("Retry-After")))
        return response

    session.hooks["response"].append(note)
    transport = RequestsTransport(session=session, session_owner=False, **timeouts)
    return {
        "authority": cloud.authority_host,
        # Instance discovery asks the public cloud about unknown authorities; Azure Stack/ADFS
        # authorities must skip it.
        "disable_instance_discovery": cloud.authority_host not in WELL_KNOWN_AUTHORITY_HOSTS,
        "transport": transport,
        **timeouts,
        "retry_total": SDK_RETRIES,
        "retry_backoff_factor": 0.4,
        # no retry on an answer's status: throttles and 5xx are retried by aad_token's policy
        "retry_status": 0,
    }


def choose_identity(
    request: CredentialProviderRequest,
    config: AzureConfig,
    cloud: Cloud,
    ctx: Context,
    mirrored: bool = False,
) -> Identity:
    """Pick the credential: the pod's service account (KEP-4412) if it names an identity, else
    azure.json's workload identity, managed identity, secret or certificate, in that order. A
    mirrored image never uses the pod's token (upstream: mirrors serve network-isolated clusters,
    through the node's identity)."""
    made: list[dict[str, Any]] = []

    def options() -> dict[str, Any]:
        """Built when an azure-identity credential is (IMDS on the stdlib needs none of it)."""
        if not made:
            made.append(_sdk_options(cloud, ctx))
        return made[0]

    if request.service_account_token and mirrored:
        ctx.log.v(1, "a mirrored image: the node's identity, not the pod's service account token")
    elif request.service_account_token:
        pod = _service_account_identity(request, options, ctx)
        if pod is not None:
            return pod
    route = _node_route(config)
    if route == "workload":
        return _workload_identity(config, options, ctx)
    if route == "managed":
        return _managed_identity(config, options, ctx)
    if route:
        return _service_principal(config, options)
    raise ProviderError(
        "the cloud config configures no credentials: set useManagedIdentityExtension: true, "
        "aadClientId with aadClientSecret or aadClientCertPath, or aadFederatedTokenFile"
    )


def _node_route(config: AzureConfig) -> NodeRoute:
    """Which of azure.json's identities a pull takes without a pod's: ``workload``, ``managed``,
    ``secret``, ``certificate`` ("": none), in upstream's order."""
    if config.useFederatedWorkloadIdentityExtension or config.aadFederatedTokenFile:
        return "workload"
    if config.useManagedIdentityExtension:
        return "managed"
    if config.aadClientSecret:
        return "secret"
    return "certificate" if config.aadClientCertPath else ""


def check_identity(config: AzureConfig) -> None:
    """What the plugin's start check proves of azure.json's identity offline: the certificate it
    gives the service principal, when that is the node's identity, read as a pull reads it (a
    missing or unreadable one fails every pull). Nothing is fetched, azure-identity not imported."""
    if _node_route(config) == "certificate":
        _certificate(config)


def _certificate(config: AzureConfig) -> bytes:
    """The client certificate ``aadClientCertPath`` names, read bounded (azure-identity would read
    a FIFO or /dev/zero unbounded)."""
    from credprovider.runtime.nodefile import read_node_file, reason

    try:
        return read_node_file(config.aadClientCertPath)
    except (OSError, ValueError) as exc:
        raise ProviderError(
            f"cannot load the client certificate {config.aadClientCertPath}: {reason(exc)}"
        ) from None


def binding_identity(
    bindings: Bindings, request: CredentialProviderRequest, config: AzureConfig, ctx: Context
) -> Identity:
    """AKS identity bindings (upstream's second choice, after a mirrored image's managed
    identity): the pod's token, at the identity-bindings endpoint; azure.json's tenant goes with
    the exchange, as upstream sends it."""
    from credprovider.azure.bindings import BindingCredential

    credential = BindingCredential(bindings, request, ctx)
    return Identity(
        f"the service account token through identity bindings at {bindings.sni_name} (client "
        f"id {credential.client_id})",
        credential,
        config.tenantId,
    )


def _service_account_identity(
    request: CredentialProviderRequest, options: SdkOptions, ctx: Context
) -> Identity | None:
    """The pod's service account token, when its annotations name a client and tenant."""
    try:
        sa_identity = service_account_identity(request.service_account_annotations)
    except ValueError as exc:
        raise ProviderError(
            f"failed to get service account token credential for image {request.image}: {exc}"
        ) from None
    if sa_identity is None:
        ctx.log.v(
            1,
            "service account token given without kubernetes.azure.com/acr-client-id and "
            "acr-tenant-id annotations: using the node identity from the cloud config",
        )
        return None
    from azure.identity import ClientAssertionCredential

    token = request.service_account_token
    return Identity(
        f"the service account token (client id {sa_identity.client_id}, tenant "
        f"{sa_identity.tenant_id})",
        ClientAssertionCredential(
            sa_identity.tenant_id, sa_identity.client_id, lambda: token, **options()
        ),
        sa_identity.tenant_id,
        options()["authority"],
    )


def _workload_identity(config: AzureConfig, options: SdkOptions, ctx: Context) -> Identity:
    """azure.json's federated workload identity (a token file and a client id)."""
    tenant = config.tenantId
    token_file = config.aadFederatedTokenFile or (
        ctx.environ.get("AZURE_FEDERATED_TOKEN_FILE", "")
        if config.useFederatedWorkloadIdentityExtension
        else ""
    )
    _require(config, tenant=tenant, client=config.aadClientId, token_file=token_file)
    from azure.identity import ClientAssertionCredential

    from credprovider.runtime.nodefile import setting_file_text

    # WorkloadIdentityCredential is this assertion read from the file, but read with open().read()
    # (a FIFO would hold it to the deadline, /dev/zero until memory runs out): read for it here.
    setting = (
        "aadFederatedTokenFile" if config.aadFederatedTokenFile else "AZURE_FEDERATED_TOKEN_FILE"
    )
    token = setting_file_text("the federated token file", token_file, setting)
    return Identity(
        f"workload identity (client id {config.aadClientId}, token file {token_file})",
        ClientAssertionCredential(tenant, config.aadClientId, lambda: token, **options()),
        tenant,
        options()["authority"],
    )


def _service_principal(config: AzureConfig, options: SdkOptions) -> Identity:
    """azure.json's service principal: a client secret, else a client certificate."""
    tenant = config.tenantId
    _require(config, tenant=tenant, client=config.aadClientId)
    if config.aadClientSecret:
        register_secret(config.aadClientSecret)
        from azure.identity import ClientSecretCredential

        return Identity(
            f"the service principal {config.aadClientId} (client secret)",
            ClientSecretCredential(tenant, config.aadClientId, config.aadClientSecret, **options()),
            tenant,
            options()["authority"],
        )
    register_secret(config.aadClientCertPassword)
    from azure.identity import CertificateCredential

    certificate = _certificate(config)
    try:
        credential = CertificateCredential(
            tenant,
            config.aadClientId,
            certificate_data=certificate,
            password=config.aadClientCertPassword or None,
            **options(),
        )
    except ValueError as exc:
        raise ProviderError(
            f"cannot load the client certificate {config.aadClientCertPath}: {one_line(exc)}"
        ) from None
    return Identity(
        f"the service principal {config.aadClientId} (certificate {config.aadClientCertPath})",
        credential,
        tenant,
        options()["authority"],
    )


def _managed_identity(config: AzureConfig, options: SdkOptions, ctx: Context) -> Identity:
    """The node's managed identity: IMDS and Azure Arc's agent on the stdlib, any other source
    through azure-identity."""
    user_assigned = config.userAssignedIdentityID
    if not user_assigned:
        description, selector = "the system-assigned managed identity", {}
    elif config.user_assigned_is_resource_id:
        description, selector = (
            f"the managed identity {user_assigned}",
            {"msi_res_id": user_assigned},
        )
    else:
        description = f"the managed identity with client id {user_assigned}"
        selector = {"client_id": user_assigned}
    from credprovider.azure import imds
    from credprovider.runtime._os import exists

    arc = imds.arc_endpoint(ctx.environ, exists(imds.ARC_HIMDS))
    if arc is not None:
        return Identity(description, imds.ArcCredential(ctx, selector, arc), config.tenantId)
    if imds.serves(ctx.environ):
        return Identity(description, imds.ImdsCredential(ctx, selector), config.tenantId)
    from azure.identity import ManagedIdentityCredential

    mi_options = {
        k: v for k, v in options().items() if k not in ("authority", "disable_instance_discovery")
    }
    if "msi_res_id" in selector:
        credential = ManagedIdentityCredential(
            identity_config={"resource_id": user_assigned}, **mi_options
        )
    else:
        credential = ManagedIdentityCredential(client_id=user_assigned or None, **mi_options)
    return Identity(description, credential, config.tenantId)


def _require(
    config: AzureConfig, *, tenant: str, client: str, token_file: str | None = None
) -> None:
    missing = [name for name, value in (("tenantId", tenant), ("aadClientId", client)) if not value]
    if token_file is not None and not token_file:
        missing.append("aadFederatedTokenFile")
    if missing:
        raise ProviderError(f"the cloud config is missing {', '.join(missing)} for this auth mode")


def aad_token(identity: Identity, ctx: Context) -> str:
    from credprovider.azure.imds import ImdsError

    ctx.deadline.phase = f"getting an AAD token with {identity.description}"
    ctx.log.v(1, f"getting an AAD token for {ACR_SCOPE} with {identity.description}")
    failed = f"could not get an AAD token with {identity.description}"
    try:
        token = _token_within_deadline(identity, ctx)
    except ImdsError as exc:
        raise ProviderError(f"{failed}: {exc}", exc.advice) from None
    except BadAnswer as exc:
        raise ProviderError(f"{failed}: {exc.detail}", NOT_THE_SERVICE) from None
    except Exception as exc:
        from azure.core.exceptions import AzureError  # only an azure-identity credential gets here

        if not isinstance(exc, AzureError):
            raise
        message = getattr(exc, "message", None) or str(exc)
        reached = not (identity.endpoint and _unreached(exc))
        advice = None if reached else unreachable_url(identity.endpoint)
        said = one_line(message) if reached else transport_reason(exc)
        raise ProviderError(f"{failed}: {said}", advice) from None
    register_secret(token.token)
    return str(token.token)


def _unreached(exc: BaseException) -> bool:
    """Whether azure-identity's failure was the endpoint not reached (refused, reset, timed out):
    it raises ClientAuthenticationError from azure-core's transport error."""
    from azure.core.exceptions import ServiceRequestError, ServiceResponseTimeoutError

    seen: BaseException | None = exc
    for _ in range(8):  # a chain is short; a cycle is not followed
        if seen is None:
            return False
        if isinstance(seen, ServiceRequestError | ServiceResponseTimeoutError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _token_within_deadline(identity: Identity, ctx: Context) -> Any:
    """The credential's token. An azure-identity credential's pipeline retries nothing on a status
    (``retry_status=0``): a throttled answer (429, or 503 with Retry-After) is retried over the
    deadline and a failing one (5xx) a bounded number of times, by the one policy every route
    follows (runtime/retry.py). The stdlib IMDS credential retries its own calls the same way."""
    from credprovider.azure.imds import ImdsCredential
    from credprovider.runtime.retry import (
        RETRYABLE_STATUSES,
        THROTTLED_TO_THE_END,
        Throttle,
        call_with_retries,
        throttle_of,
    )

    if isinstance(identity.credential, ImdsCredential):  # retries its own calls (Arc's too)
        return identity.credential.get_token(ACR_SCOPE)

    def status_of(exc: Exception) -> tuple[int | None, str | None]:
        response = getattr(exc, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int):
            headers = getattr(response, "headers", None) or {}
            return status, headers.get("Retry-After")
        # MSAL's errors often carry no response (and MSAL replays a throttled answer itself until
        # its Retry-After): the last refusal the transport saw in this attempt says what the
        # service said
        refusals = [answer for answer in SDK_ANSWERS if answer[0] >= 400]
        return refusals[-1] if refusals else (None, None)

    def attempt() -> Any:
        SDK_ANSWERS.clear()
        return identity.credential.get_token(ACR_SCOPE)

    def throttled(exc: Exception) -> Throttle | None:
        return throttle_of(*status_of(exc))

    def failing(exc: Exception) -> bool:
        return status_of(exc)[0] in RETRYABLE_STATUSES

    try:
        return call_with_retries(
            attempt,
            ctx=ctx,
            what="Entra ID token request",
            retry_error=failing,
            throttled_error=throttled,
        )
    except Exception as exc:
        if throttled(exc) is None:
            raise
        raise ProviderError(
            f"could not get an AAD token with {identity.description}: Entra ID answered HTTP "
            f"{status_of(exc)[0]} (throttled); {THROTTLED_TO_THE_END}"
        ) from None

"""ECR credentials: the route choice (the stdlib adapter in the common node case, else botocore's,
both behind :mod:`credprovider.aws.tokenapi`), the region fallback, and the token's decoding."""

from __future__ import annotations

from credprovider import __version__
from credprovider.aws.registry import (
    IDENTITY_ENV,
    TOKEN_KIND,
    EcrRegistry,
    RoleChoice,
    TokenError,
    classify_host,
    decode_authorization_token,
    role_for_service_account,
)
from credprovider.errors import CredproviderError, ProviderError
from credprovider.runtime import _os
from credprovider.runtime._typing import TYPE_CHECKING, NamedTuple
from credprovider.runtime.api import AuthConfig, CredentialProviderRequest
from credprovider.runtime.provider import Context, Credentials, Plan, fingerprint_file
from credprovider.runtime.redact import register_secret

if TYPE_CHECKING:
    from collections.abc import Callable

    from credprovider.aws import direct, podidentity
    from credprovider.aws.tokenapi import TokenApi
    from credprovider.runtime.imageref import ImageRef


class EcrToken(NamedTuple):
    username: str
    password: str
    expires_at: float | None


class EcrProvider:
    """``ecr-credential-provider``: one ``GetAuthorizationToken`` per request."""

    def plan(self, image: ImageRef, request: CredentialProviderRequest, ctx: Context) -> Plan:
        """The image's registry as the one key, and the settings that pick the AWS identity (no
        SDK, no secrets)."""
        identity = {name: ctx.environ.get(name, "") for name in IDENTITY_ENV}
        home = ctx.environ.get("HOME", "")
        identity["config"] = fingerprint_file(
            ctx.environ.get("AWS_CONFIG_FILE") or f"{home}/.aws/config"
        )
        identity["credentials"] = fingerprint_file(
            ctx.environ.get("AWS_SHARED_CREDENTIALS_FILE") or f"{home}/.aws/credentials"
        )
        return Plan(image, (image.registry,), identity)

    def fulfil(self, plan: Plan, request: CredentialProviderRequest, ctx: Context) -> Credentials:
        image = plan.image
        registry = classify_host(image.host)
        role = None
        if request.service_account_token:
            try:
                role = role_for_service_account(request.service_account_annotations, ctx.environ)
            except ValueError as exc:
                raise ProviderError(
                    f"cannot assume a role for the service account: {exc}"
                ) from None
            if role is None:
                from credprovider.aws import podidentity

                cluster = podidentity.cluster_of(ctx.environ)
                if cluster is not None:
                    token = fetch_with_pod_identity(
                        registry, cluster, request.service_account_token, ctx
                    )
                    entry = AuthConfig(token.username, token.password)
                    return Credentials(
                        auth={key: entry for key in plan.keys}, expires_at=token.expires_at
                    )
                ctx.log.v(
                    1,
                    "service account token given but no role ARN (annotations "
                    "eks.amazonaws.com/ecr-role-arn, eks.amazonaws.com/role-arn, env "
                    "AWS_ECR_ROLE_ARN) and no AWS_EKS_POD_IDENTITY_CLUSTER: using the node's "
                    "credentials",
                )
        token = fetch_token(registry, role, request.service_account_token, ctx)
        entry = AuthConfig(token.username, token.password)
        return Credentials(auth={key: entry for key in plan.keys}, expires_at=token.expires_at)


def _region_for(registry: EcrRegistry, ctx: Context, configured: Callable[[], str | None]) -> str:
    """The registry's region, else the default one (``configured`` reads botocore's setting)."""
    if registry.region is not None:
        return registry.region
    # AWS_REGION first, as the Go SDK (and so upstream configs) use it; botocore reads only
    # AWS_DEFAULT_REGION and the profile.
    region = ctx.environ.get("AWS_REGION") or configured()
    if not region:
        raise ProviderError(
            f"{registry.host} is not an ECR registry host, so the region cannot be read from it: "
            "set AWS_REGION in the provider's env (kubelet config env:) to the region of the ECR "
            "registry that serves it"
        )
    ctx.log.v(
        1,
        f"{registry.host} is not an ECR host (reached through matchImages, e.g. a "
        f"pull-through cache or mirror): using an ECR token for the default region {region}",
    )
    return str(region)


def _service(registry: EcrRegistry) -> str:
    return "ecr-public" if registry.kind == "public" else "ecr"


def _call(registry: EcrRegistry, region: str, api: TokenApi, route: str, ctx: Context) -> EcrToken:
    """One ``GetAuthorizationToken`` through ``api`` (either adapter), its failure said once."""
    from credprovider.aws import tokenapi

    service = _service(registry)
    ctx.deadline.phase = f"calling {service} GetAuthorizationToken in {region}"
    ctx.log.v(1, f"getting {TOKEN_KIND[registry.kind]} for {registry.host} in {region}{route}")
    try:
        answer = api.get_authorization_token()
    except CredproviderError as exc:
        raise tokenapi.failure(service, region, exc) from None
    register_secret(answer.token)
    try:
        username, password = decode_authorization_token(answer.token)
    except TokenError as exc:
        raise tokenapi.unusable(service, region, str(exc)) from None
    register_secret(password)
    return EcrToken(username, password, answer.expires_at)


def _fetch_direct(
    registry: EcrRegistry, route: direct.DirectRoute, ctx: Context
) -> EcrToken | None:
    """The stdlib path; ``None`` when the instance role could not be read (botocore then tries)."""
    from credprovider.aws import direct
    from credprovider.runtime.advice import NOT_THE_SERVICE
    from credprovider.runtime.answer import BadAnswer

    keys = route.keys
    if keys is None:
        ctx.deadline.phase = "reading the instance role from IMDS"
        try:
            keys = direct.instance_role_keys(route.imds, ctx)
        except BadAnswer as exc:
            raise ProviderError(
                f"could not read the instance role from IMDS: {exc.detail}", NOT_THE_SERVICE
            ) from None
        if keys is None:
            return None
    else:
        register_secret(keys.secret_key)
        register_secret(keys.session_token)
        ctx.log.v(
            1, "credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the environment"
        )
    region = _region_for(registry, ctx, lambda: ctx.environ.get("AWS_DEFAULT_REGION"))
    api = direct.StdlibTokenApi(route, keys, ctx, f"credprovider/{__version__}")
    return _call(registry, region, api, " (stdlib)", ctx)


def _direct_route(
    registry: EcrRegistry, role: RoleChoice | None, ctx: Context
) -> direct.DirectRoute | None:
    """The stdlib route when it applies (see :mod:`credprovider.aws.direct`), else ``None``."""
    from credprovider.aws import direct  # a fetch needs it; a cache hit does not

    if role is not None:
        reason = "assuming a role for the service account"
    else:
        region = (
            registry.region
            or ctx.environ.get("AWS_REGION")
            or ctx.environ.get("AWS_DEFAULT_REGION")
        )
        route = (
            direct.plan(ctx.environ, _service(registry), region, _os.exists)
            if region
            else "no region in the registry host or the environment"
        )
        if isinstance(route, direct.DirectRoute):
            return route
        reason = route
    ctx.log.v(1, f"using botocore: {reason}")
    return None


def fetch_token(
    registry: EcrRegistry, role: RoleChoice | None, web_identity_token: str, ctx: Context
) -> EcrToken:
    """Call (private or public) ``GetAuthorizationToken`` and decode the answer: with the standard
    library in the common node case, else through botocore."""
    route = _direct_route(registry, role, ctx)
    if route is not None:
        token = _fetch_direct(registry, route, ctx)
        if token is not None:
            return token
        ctx.log.v(1, "using botocore: the instance role could not be read directly")
    return _fetch_botocore(registry, role, web_identity_token, ctx)


def _fetch_botocore(
    registry: EcrRegistry, role: RoleChoice | None, web_identity_token: str, ctx: Context
) -> EcrToken:
    from credprovider.aws import botocore_api, botocore_chain

    sdk = botocore_chain.session(ctx.environ)
    region = _region_for(registry, ctx, lambda: botocore_api.configured_region(sdk))
    keys: dict[str, str] = {}
    if role is not None:
        keys = botocore_api.assume_role(sdk, role, web_identity_token, region, ctx)
    api = botocore_api.BotocoreTokenApi(sdk, _service(registry), region, ctx, keys)
    return _call(registry, region, api, "", ctx)


def fetch_with_pod_identity(
    registry: EcrRegistry, cluster: str, pod_token: str, ctx: Context
) -> EcrToken:
    """ECR with the role the pod's service account is associated with through EKS Pod Identity
    (:mod:`credprovider.aws.podidentity`), EKS Auth called in the node's region (AWS_REGION,
    else the registry's); the node's credentials where the service account has no association."""
    from credprovider.aws import direct, podidentity

    route = _direct_route(registry, None, ctx)
    if route is not None:
        if route.keys is not None:  # the environment's: secrets, as on the plain route
            register_secret(route.keys.secret_key)
            register_secret(route.keys.session_token)
        node = route.keys or direct.instance_role_keys(route.imds, ctx)
        if node is not None:
            region = ctx.environ.get("AWS_REGION") or route.region
            pod = podidentity.assume_direct(cluster, pod_token, node, region, route.ca_bundle, ctx)
            _say_pod_role(pod, cluster, ctx)
            keys = node if pod is None else pod.keys
            api = direct.StdlibTokenApi(route, keys, ctx, f"credprovider/{__version__}")
            return _call(registry, route.region, api, " (stdlib)", ctx)
        ctx.log.v(1, "using botocore: the instance role could not be read directly")
    return _fetch_pod_identity_botocore(registry, cluster, pod_token, ctx)


def _fetch_pod_identity_botocore(
    registry: EcrRegistry, cluster: str, pod_token: str, ctx: Context
) -> EcrToken:
    """:func:`fetch_with_pod_identity` through botocore: its credential chain signs EKS Auth, and
    ECR where the service account has no association."""
    from credprovider.aws import botocore_api, botocore_chain

    sdk = botocore_chain.session(ctx.environ)
    region = _region_for(registry, ctx, lambda: botocore_api.configured_region(sdk))
    found = botocore_api.assume_pod_role(
        sdk, cluster, pod_token, ctx.environ.get("AWS_REGION") or region, ctx
    )
    _say_pod_role(found, cluster, ctx)
    keys: dict[str, str] = {}  # none: botocore's own chain, the node's
    if found is not None:
        keys = {
            "aws_access_key_id": found.keys.access_key,
            "aws_secret_access_key": found.keys.secret_key,
            "aws_session_token": found.keys.session_token,
        }
    api = botocore_api.BotocoreTokenApi(sdk, _service(registry), region, ctx, keys)
    return _call(registry, region, api, "", ctx)


def _say_pod_role(pod: podidentity.PodRole | None, cluster: str, ctx: Context) -> None:
    """Whose keys ECR is called with, said at -v=1: the pod's role, else the node's own."""
    if pod is None:
        ctx.log.v(
            1,
            f"EKS Pod Identity: the service account has no association in cluster {cluster}: "
            "using the node's credentials",
        )
    else:
        ctx.log.v(
            1,
            f"EKS Pod Identity: the role {pod.role or '(unnamed)'} of association "
            f"{pod.association or '(unnamed)'} in cluster {cluster}",
        )

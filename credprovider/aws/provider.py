"""ECR credentials: the stdlib path of :mod:`credprovider.aws.direct` in the common node case, else
botocore (imported lazily: only when it is needed)."""

from __future__ import annotations

import os

from credprovider import __version__
from credprovider.aws.registry import (
    IDENTITY_ENV,
    ROLE_SESSION_NAME,
    TOKEN_KIND,
    EcrRegistry,
    RoleChoice,
    TokenError,
    classify_host,
    decode_authorization_token,
    role_for_service_account,
)
from credprovider.errors import ProviderError
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final, NamedTuple
from credprovider.runtime.advice import NOT_THE_SERVICE, RETRIES_NEXT_PULL
from credprovider.runtime.api import AuthConfig, CredentialProviderRequest
from credprovider.runtime.provider import Context, Credentials, Plan, fingerprint_file
from credprovider.runtime.redact import register_secret

if TYPE_CHECKING:
    from collections.abc import Callable

    from botocore.session import Session

    from credprovider.aws import direct
    from credprovider.runtime.imageref import ImageRef

MAX_ATTEMPTS: Final = 3
# botocore loggers that print raw request/response bodies at DEBUG: the token and the assumed role's
# keys would be printed before the plugin can register them for redaction, so they stay at INFO.
BODY_LOGGERS: Final = ("botocore.parsers", "botocore.endpoint", "botocore.auth")
NO_CREDENTIALS_HINT: Final = (
    "no AWS credentials found (checked env, shared profile, web identity, container credentials, "
    "IMDS): attach an instance profile or set AWS_* in the provider's env (-v=1 says what IMDS "
    "answered)"
)


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
                ctx.log.v(
                    1,
                    "service account token given but no role ARN (annotations "
                    "eks.amazonaws.com/ecr-role-arn, eks.amazonaws.com/role-arn, env "
                    "AWS_ECR_ROLE_ARN): using the node's credentials",
                )
        token = fetch_token(registry, role, request.service_account_token, ctx)
        entry = AuthConfig(token.username, token.password)
        return Credentials(auth={key: entry for key in plan.keys}, expires_at=token.expires_at)


def _client_config(ctx: Context, region: str) -> Any:
    from botocore.config import Config

    return Config(
        region_name=region,
        connect_timeout=ctx.deadline.timeout(3.0),
        read_timeout=ctx.deadline.timeout(10.0),
        retries={"total_max_attempts": MAX_ATTEMPTS, "mode": "standard"},
        user_agent_extra=f"credprovider/{__version__}",
    )


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


def _assume_role(
    session: Session, role: RoleChoice, web_identity_token: str, region: str, ctx: Context
) -> dict[str, str]:
    from botocore.exceptions import BotoCoreError, ClientError

    ctx.deadline.phase = f"assuming {role.arn} with STS AssumeRoleWithWebIdentity"
    ctx.log.v(1, f"assuming role {role.arn} (from {role.source}) with the service account token")
    sts = session.create_client("sts", config=_client_config(ctx, region))
    try:
        answer = sts.assume_role_with_web_identity(
            RoleArn=role.arn, RoleSessionName=ROLE_SESSION_NAME, WebIdentityToken=web_identity_token
        )
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise ProviderError(
            f"STS AssumeRoleWithWebIdentity for {role.arn} (from {role.source}) failed: "
            f"{error.get('Code', 'error')}: {error.get('Message', '')}; check the role's trust "
            "policy allows this cluster's OIDC issuer, service account and token audience"
        ) from None
    except BotoCoreError as exc:
        raise ProviderError(f"STS AssumeRoleWithWebIdentity for {role.arn} failed: {exc}") from None
    creds = answer.get("Credentials") or {}
    keys = ("AccessKeyId", "SecretAccessKey", "SessionToken")
    if not all(creds.get(k) for k in keys):
        raise ProviderError(f"STS AssumeRoleWithWebIdentity for {role.arn} returned no credentials")
    register_secret(creds["SecretAccessKey"])
    register_secret(creds["SessionToken"])
    return {
        "aws_access_key_id": creds["AccessKeyId"],
        "aws_secret_access_key": creds["SecretAccessKey"],
        "aws_session_token": creds["SessionToken"],
    }


def _api_name(registry: EcrRegistry) -> str:
    return "ECR Public" if registry.kind == "public" else "ECR"


def _service(registry: EcrRegistry) -> str:
    return "ecr-public" if registry.kind == "public" else "ecr"


def _rejected(registry: EcrRegistry, region: str, code: str, message: str) -> ProviderError:
    """The API's own error answer (botocore's ClientError, or the stdlib path's)."""
    hint = ""
    if "AccessDenied" in code or "UnrecognizedClient" in code or "ExpiredToken" in code:
        hint = (
            "; the identity needs ecr-public:GetAuthorizationToken and sts:GetServiceBearerToken"
            if registry.kind == "public"
            else "; the identity needs ecr:GetAuthorizationToken"
        )
    elif "Throttl" in code or code == "TooManyRequestsException":
        hint = (
            f"; still throttled after {MAX_ATTEMPTS} attempts, the kubelet retries on the next pull"
        )
    elif code == "ServerException" or (code.isdigit() and code.startswith("5")):
        hint = f"; {RETRIES_NEXT_PULL}"
    return ProviderError(
        f"{_api_name(registry)} GetAuthorizationToken in {region} failed: {code}: {message}{hint}"
    )


def _unreachable(registry: EcrRegistry, region: str, detail: object) -> ProviderError:
    return ProviderError(
        f"could not reach the {_api_name(registry)} API in {region}: {detail}; check network "
        "access, proxy (HTTPS_PROXY) and VPC endpoints from this node"
    )


def _unusable(registry: EcrRegistry, region: str, detail: str) -> ProviderError:
    return ProviderError(
        f"{_service(registry)} GetAuthorizationToken in {region} returned an unusable answer: "
        f"{detail}",
        NOT_THE_SERVICE,
    )


def _api_failure(registry: EcrRegistry, region: str, exc: Exception) -> ProviderError:
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    if isinstance(exc, NoCredentialsError):
        return ProviderError(NO_CREDENTIALS_HINT)
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return _rejected(registry, region, error.get("Code", "error"), error.get("Message", ""))
    if isinstance(exc, EndpointConnectionError | ConnectTimeoutError | ReadTimeoutError):
        return _unreachable(registry, region, exc)
    return ProviderError(
        f"{_api_name(registry)} GetAuthorizationToken in {region} failed: {exc}", RETRIES_NEXT_PULL
    )


def _token(
    registry: EcrRegistry, region: str, raw_token: str | None, expires_at: float | None
) -> EcrToken:
    register_secret(raw_token)
    try:
        username, password = decode_authorization_token(raw_token)
    except TokenError as exc:
        raise _unusable(registry, region, str(exc)) from None
    register_secret(password)
    return EcrToken(username, password, expires_at)


def _fetch_direct(registry: EcrRegistry, route: direct.Plan, ctx: Context) -> EcrToken | None:
    """The stdlib path; ``None`` when the instance role could not be read (botocore then tries)."""
    from credprovider.aws import direct

    keys = route.keys
    if keys is None:
        ctx.deadline.phase = "reading the instance role from IMDS"
        keys = direct.instance_role_keys(route.imds, ctx)
        if keys is None:
            return None
    else:
        register_secret(keys.secret_key)
        register_secret(keys.session_token)
        ctx.log.v(
            1, "credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the environment"
        )
    region = _region_for(registry, ctx, lambda: ctx.environ.get("AWS_DEFAULT_REGION"))
    ctx.deadline.phase = f"calling {route.service} GetAuthorizationToken in {region}"
    ctx.log.v(
        1,
        f"getting {TOKEN_KIND[registry.kind]} for {registry.host} in {region} (stdlib)",
    )
    try:
        raw_token, expires_at = direct.get_authorization_token(
            route, keys, ctx, f"credprovider/{__version__}"
        )
    except direct.ApiError as exc:
        raise _rejected(registry, region, exc.code, exc.message) from None
    except direct.TransportError as exc:
        raise _unreachable(registry, region, exc) from None
    except direct.AnswerError as exc:
        raise _unusable(registry, region, str(exc)) from None
    return _token(registry, region, raw_token, expires_at)


def _direct_route(
    registry: EcrRegistry, role: RoleChoice | None, ctx: Context
) -> direct.Plan | None:
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
            direct.plan(ctx.environ, _service(registry), region, os.path.exists)
            if region
            else "no region in the registry host or the environment"
        )
        if isinstance(route, direct.Plan):
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
    import logging

    import botocore.session
    from botocore.exceptions import BotoCoreError, ClientError

    for name in BODY_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    session = botocore.session.get_session()
    region = _region_for(registry, ctx, lambda: session.get_config_variable("region"))
    client_kwargs: dict[str, Any] = {}
    if role is not None:
        client_kwargs = _assume_role(session, role, web_identity_token, region, ctx)
    service = _service(registry)
    ctx.deadline.phase = f"calling {service} GetAuthorizationToken in {region}"
    ctx.log.v(
        1,
        f"getting {TOKEN_KIND[registry.kind]} for {registry.host} in {region}",
    )
    client = session.create_client(service, config=_client_config(ctx, region), **client_kwargs)
    try:
        answer = client.get_authorization_token()
    except (BotoCoreError, ClientError) as exc:
        raise _api_failure(registry, region, exc) from None
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        # botocore's parser fails this way on a body whose fields have the wrong JSON types.
        raise _unusable(
            registry, region, f"the response does not match the API ({type(exc).__name__})"
        ) from None
    data = answer.get("authorizationData")
    if registry.kind != "public":
        data = data[0] if isinstance(data, list) and data else None
    if not isinstance(data, dict) or not data:
        raise _unusable(registry, region, "authorization data was empty")
    raw_token = data.get("authorizationToken")
    if raw_token is not None and not isinstance(raw_token, str):
        raise _unusable(registry, region, "the authorization token is not a string")
    expires = data.get("expiresAt")
    timestamp = getattr(expires, "timestamp", None)  # botocore parses expiresAt into a datetime
    expires_at = float(timestamp()) if callable(timestamp) else None
    return _token(registry, region, raw_token, expires_at)

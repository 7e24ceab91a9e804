"""The botocore adapter of :mod:`credprovider.aws.tokenapi`: every case the stdlib route does not
take (profiles, web identity, container credentials, an assumed role, FIPS, proxies). Imported
only when botocore is needed; botocore itself is imported here and in aws/botocore_chain.py (the
session and the credential chain made for it), nowhere else."""

from __future__ import annotations

from botocore import UNSIGNED
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConfigParseError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    InvalidChecksumConfigError,
    InvalidConfigError,
    InvalidDefaultsMode,
    InvalidEndpointConfigurationError,
    InvalidEndpointDiscoveryConfigurationError,
    InvalidIMDSEndpointError,
    InvalidIMDSEndpointModeError,
    InvalidProxiesConfigError,
    InvalidRegionError,
    InvalidRetryConfigurationError,
    InvalidSTSRegionalEndpointsConfigError,
    MissingDependencyException,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
    SSOTokenLoadError,
    TokenRetrievalError,
    UnknownServiceError,
)

from credprovider import __version__
from credprovider.aws.botocore_chain import read_for_it, refused_setting
from credprovider.aws.registry import BOTOCORE_CA_BUNDLE_ENV, ROLE_SESSION_NAME, RoleChoice
from credprovider.aws.tokenapi import (
    MAX_ATTEMPTS,
    SETTINGS_FIX,
    AnswerError,
    ApiError,
    CallFailed,
    NoCredentials,
    SettingsError,
    TokenAnswer,
    TransportError,
    read_answer,
    throttle_of,
    transient,
)
from credprovider.errors import ProviderError
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final
from credprovider.runtime.advice import NOT_THE_SERVICE, unreachable_url, url_host
from credprovider.runtime.answer import READ_BLOCK_BYTES, BadAnswer, sdk_body
from credprovider.runtime.provider import Context
from credprovider.runtime.redact import register_secret
from credprovider.runtime.tls import require_usable_ca_bundle

if TYPE_CHECKING:
    from collections.abc import Callable

    from credprovider.aws import podidentity

# The endpoint not reached (refused, reset, timed out): each carries its ``endpoint_url``.
UNREACHED: Final = (
    EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError
)  # fmt: skip
# What botocore raises for settings it cannot use (a profile, half a key pair, a file it cannot
# parse, a role chain's STS client without a region, a profile that signs in through IAM Identity
# Center, whose token is not there or whose client the bundle does not carry): the node's to fix,
# never worth a retry, never the service's failing.
SETTINGS_ERRORS: Final = (
    ProfileNotFound, PartialCredentialsError, InvalidConfigError, ConfigParseError, NoRegionError,
    SSOTokenLoadError, TokenRetrievalError, UnknownServiceError, MissingDependencyException,
    # a setting's value botocore refuses (AWS_STS_REGIONAL_ENDPOINTS, AWS_RETRY_MODE, ...)
    InvalidSTSRegionalEndpointsConfigError, InvalidRetryConfigurationError, InvalidDefaultsMode,
    InvalidEndpointConfigurationError, InvalidEndpointDiscoveryConfigurationError,
    InvalidIMDSEndpointError, InvalidIMDSEndpointModeError, InvalidRegionError,
    InvalidProxiesConfigError, InvalidChecksumConfigError,
)  # fmt: skip


def settings_said(exc: Exception) -> str:
    """One of :data:`SETTINGS_ERRORS` in words: botocore's own, except for a client the bundle
    does not carry (it keeps only ECR's, ECR Public's, EKS Auth's and STS's models) and the AWS
    CRT (botocore asks for it to sign in a ``login_session`` profile, and said to pip install it)."""
    if isinstance(exc, MissingDependencyException):
        return (
            "the profile needs the AWS CRT, which the plugin does not carry (a console sign-in "
            "profile, login_session: it needs an interactive login, not one a node can do; give "
            "the node credentials another way)"
        )
    if isinstance(exc, UnknownServiceError):
        service = exc.kwargs.get("service_name", "")
        return (
            f"the profile needs botocore's {service!r} client, which the plugin does not carry "
            "(an IAM Identity Center or console sign-in profile: it needs an interactive login, "
            "not one a node can do; give the node credentials another way)"
        )
    return str(exc)


def configured_region(sdk: Any) -> str | None:
    """The region the profile names, read through botocore."""
    try:
        region = sdk.get_config_variable("region")
    except SETTINGS_ERRORS as exc:
        raise ProviderError(
            f"botocore cannot read the AWS settings: {settings_said(exc)}", SETTINGS_FIX
        ) from None
    return str(region) if region else None


# The deadline the bounded reads stop at: the fetch under way (see bounded_answers), else none.
_REMAINING: list[Callable[[], float]] = [lambda: float("inf")]


def _bounded_content(response: Any) -> bytes:
    """``AWSResponse.content`` read under the caps of :mod:`credprovider.runtime.answer`."""
    if response._content is None:
        raw = response.raw
        try:
            response._content = sdk_body(
                raw.stream(READ_BLOCK_BYTES),
                declared=response.headers.get("content-length"),
                encoding=response.headers.get("content-encoding", ""),
                remaining=_REMAINING[0],
                where=response.url,
            )
        except BadAnswer:
            raw.close()
            raise
    content: bytes = response._content
    return content


class bounded_answers:
    """Every answer botocore reads while this lasts is held to the caps (size, depth, numbers)
    and to ``ctx``'s deadline. botocore reads each body, for a client's call and for each
    credential source (IMDS, container credentials) alike, through ``AWSResponse.content``
    inside its http session, which offers no hook: the property is replaced by a bounded read
    (the size and depth caps stay for the process; the deadline is this fetch's only)."""

    def __init__(self, ctx: Context) -> None:
        self.remaining = ctx.deadline.remaining
        self.previous: Callable[[], float] = _REMAINING[0]  # the deadline restored on exit

    def __enter__(self) -> None:
        AWSResponse.content = property(_bounded_content)
        _REMAINING[0] = self.remaining

    def __exit__(self, *exc: object) -> None:
        _REMAINING[0] = self.previous


def bad_answer(exc: BaseException) -> BadAnswer | None:
    """The :class:`BadAnswer` behind a botocore error (its http session wraps what a read raises
    in ``HTTPClientError``), if that is what it is."""
    inner = getattr(exc, "kwargs", {}).get("error")
    return inner if isinstance(inner, BadAnswer) else None


def client_config(ctx: Context, region: str, attempts: int = MAX_ATTEMPTS) -> Config:
    """Every client's settings; the CA bundle botocore will load is checked first. ``attempts``
    1: the caller retries (GetAuthorizationToken, through credprovider/runtime/retry.py)."""
    require_usable_ca_bundle(ctx.environ, BOTOCORE_CA_BUNDLE_ENV)
    return Config(
        region_name=region,
        connect_timeout=ctx.deadline.timeout(3.0),
        read_timeout=ctx.deadline.timeout(10.0),
        retries={"total_max_attempts": attempts, "mode": "standard"},
        user_agent_extra=f"credprovider/{__version__}",
    )


class BotocoreTokenApi:
    """``GetAuthorizationToken`` through a botocore client for ``service`` in ``region``, with the
    assumed role's keys when there is one."""

    def __init__(
        self, sdk: Any, service: str, region: str, ctx: Context, keys: dict[str, str]
    ) -> None:
        self.sdk, self.service, self.region, self.ctx, self.keys = sdk, service, region, ctx, keys

    def get_authorization_token(self) -> TokenAnswer:
        """The call, retried as the stdlib route retries it: a failure up to MAX_ATTEMPTS times,
        throttling over the deadline (botocore itself makes one attempt a call)."""
        from credprovider.runtime.retry import call_with_retries

        client: list[Any] = []
        return call_with_retries(
            lambda: self._once(client),
            ctx=self.ctx,
            what=f"{self.service} GetAuthorizationToken",
            retry_error=transient,
            throttled_error=throttle_of,
            attempts=MAX_ATTEMPTS,
        )

    def _once(self, client: list[Any]) -> TokenAnswer:
        try:
            # Made at the first attempt: creating a client without keys resolves the credentials
            # (IMDS, container credentials), whose failures are this call's.
            with bounded_answers(self.ctx):
                if not client:
                    read_for_it(
                        self.sdk, self.ctx.environ, self.region, self.ctx.deadline.remaining
                    )
                    config = client_config(self.ctx, self.region, attempts=1)
                    client.append(made_client(self.sdk, self.service, config, self.keys))
                answer = client[0].get_authorization_token()
        except NoCredentialsError:
            raise NoCredentials("no credentials") from None
        except SETTINGS_ERRORS as exc:
            raise SettingsError(settings_said(exc)) from None
        except ClientError as exc:
            error = exc.response.get("Error", {})
            headers = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
            raise ApiError(
                error.get("Code", "error"), error.get("Message", ""), headers.get("retry-after")
            ) from None
        except UNREACHED as exc:
            url = str(exc.kwargs.get("endpoint_url") or "")
            own = str(client[0].meta.endpoint_url) if client else ""
            # not the API's own endpoint (or no client yet): the credentials' resolution's call
            elsewhere = bool(url) and (not own or url_host(url).lower() != url_host(own).lower())
            raise TransportError(str(exc), url if elsewhere else "") from None
        except BotoCoreError as exc:
            raise bad_answer(exc) or CallFailed(str(exc)) from None
        except (AttributeError, TypeError, KeyError, ValueError) as exc:
            # botocore's parser fails this way on a body whose fields have the wrong JSON types.
            raise AnswerError(
                f"the response does not match the API ({type(exc).__name__})"
            ) from None
        return read_answer(self.service, answer)


def made_client(sdk: Any, service: str, config: Config, keys: dict[str, str] | None = None) -> Any:
    """``sdk.create_client``. A ``ValueError`` there is botocore refusing a setting, not an
    answer (an endpoint in ``AWS_ENDPOINT_URL*``, a container credentials URL it will not ask):
    said as the settings'."""
    try:
        return sdk.create_client(service, config=config, **(keys or {}))
    except ValueError as exc:
        raise refused_setting(exc) from None


def assume_role(
    sdk: Any, role: RoleChoice, web_identity_token: str, region: str, ctx: Context
) -> dict[str, str]:
    """The client keys of ``role``, assumed with the service account's token."""
    ctx.deadline.phase = f"assuming {role.arn} with STS AssumeRoleWithWebIdentity"
    ctx.log.v(1, f"assuming role {role.arn} (from {role.source}) with the service account token")
    # unsigned, as botocore's own web identity provider calls it: the node's credential chain
    # (its IMDS waits, its token files) is not resolved for a call that takes none
    unsigned = client_config(ctx, region).merge(Config(signature_version=UNSIGNED))
    try:
        sts = made_client(sdk, "sts", unsigned)
        with bounded_answers(ctx):
            answer = sts.assume_role_with_web_identity(
                RoleArn=role.arn,
                RoleSessionName=ROLE_SESSION_NAME,
                WebIdentityToken=web_identity_token,
            )
    except SettingsError as exc:
        raise ProviderError(
            f"STS AssumeRoleWithWebIdentity for {role.arn} failed: {exc}", SETTINGS_FIX
        ) from None
    except SETTINGS_ERRORS as exc:
        raise ProviderError(
            f"STS AssumeRoleWithWebIdentity for {role.arn} failed: {settings_said(exc)}",
            SETTINGS_FIX,
        ) from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise ProviderError(
            f"STS AssumeRoleWithWebIdentity for {role.arn} (from {role.source}) failed: "
            f"{error.get('Code', 'error')}: {error.get('Message', '')}; check the role's trust "
            "policy allows this cluster's OIDC issuer, service account and token audience"
        ) from None
    except UNREACHED as exc:
        url = str(exc.kwargs.get("endpoint_url") or "the STS endpoint")
        raise ProviderError(
            f"STS AssumeRoleWithWebIdentity for {role.arn} failed: {exc}", unreachable_url(url)
        ) from None
    except BotoCoreError as exc:
        bad = bad_answer(exc)
        raise ProviderError(
            f"STS AssumeRoleWithWebIdentity for {role.arn} failed: {bad.detail if bad else exc}",
            NOT_THE_SERVICE if bad else None,
        ) from None
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        # botocore's XML parser fails this way on an answer without the API's elements.
        raise ProviderError(
            f"STS AssumeRoleWithWebIdentity for {role.arn} returned an answer that does not "
            f"match the API ({type(exc).__name__})",
            NOT_THE_SERVICE,
        ) from None
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


def assume_pod_role(
    sdk: Any, cluster: str, token: str, region: str, ctx: Context
) -> podidentity.PodRole | None:
    """The pod's role through EKS Auth's botocore client (the node's credentials from its
    chain); None where the service account has no association (credprovider/aws/podidentity.py)."""

    from credprovider.aws import podidentity

    ctx.deadline.phase = f"calling EKS Auth AssumeRoleForPodIdentity for cluster {cluster}"
    try:
        read_for_it(sdk, ctx.environ, region, ctx.deadline.remaining)
        client = made_client(sdk, podidentity.SERVICE, client_config(ctx, region))
        with bounded_answers(ctx):
            answer = client.assume_role_for_pod_identity(clusterName=cluster, token=token)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "error"))
        if code == podidentity.NO_ASSOCIATION:
            return None
        raise podidentity.failure(cluster, code, str(error.get("Message", ""))) from None
    except NoCredentialsError:
        raise ProviderError(
            f"EKS Auth AssumeRoleForPodIdentity for cluster {cluster}: the node has no AWS "
            "credentials to sign it with"
        ) from None
    except SETTINGS_ERRORS as exc:
        raise ProviderError(
            f"EKS Auth AssumeRoleForPodIdentity for cluster {cluster} failed: {settings_said(exc)}",
            SETTINGS_FIX,
        ) from None
    except SettingsError as exc:
        raise ProviderError(
            f"EKS Auth AssumeRoleForPodIdentity for cluster {cluster} failed: {exc}", SETTINGS_FIX
        ) from None
    except UNREACHED as exc:
        base = podidentity.endpoint(region, ctx.environ)
        raise podidentity.unreached(cluster, base, str(exc)) from None
    except BotoCoreError as exc:
        bad = bad_answer(exc)
        raise ProviderError(
            f"EKS Auth AssumeRoleForPodIdentity for cluster {cluster} failed: "
            f"{bad.detail if bad else exc}"
        ) from None
    return podidentity.read_answer(cluster, answer)

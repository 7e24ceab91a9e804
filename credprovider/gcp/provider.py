"""Google credentials: the node's token from the metadata server on the stdlib, every other flow
through google-auth (imported lazily, only when such a token is fetched)."""

from __future__ import annotations

from credprovider.errors import ProviderError
from credprovider.gcp.registry import (
    CLOUD_PLATFORM_SCOPE,
    CREDENTIALS_FILE,
    STS_ENDPOINT,
    STS_GRANT_TYPE,
    STS_REQUESTED_TOKEN_TYPE,
    STS_SUBJECT_TOKEN_TYPE,
    TOKEN_USERNAME,
    WORKLOAD_IDENTITY,
    CacheOverrides,
    TokenSourceError,
    choose_token_source,
    is_google_registry_host,
    metadata_host,
    registry_keys,
    workload_identity_audience,
)
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final, NamedTuple
from credprovider.runtime.advice import NOT_THE_SERVICE
from credprovider.runtime.answer import BadAnswer
from credprovider.runtime.api import CACHE_KEY_GLOBAL, AuthConfig, CredentialProviderRequest
from credprovider.runtime.provider import Context, Credentials, Plan, fingerprint_file, one_line
from credprovider.runtime.redact import register_secret

if TYPE_CHECKING:
    import datetime

    from credprovider.gcp.impersonation import Chain
    from credprovider.runtime.imageref import ImageRef

CREDENTIALS_FILE_ENV: Final = "GOOGLE_APPLICATION_CREDENTIALS"


class GcpOptions(NamedTuple):
    auth_flow: str = "gcr"
    identity_provider: str = ""
    project_id: str = ""
    sts_endpoint: str = STS_ENDPOINT
    impersonate: Chain | None = None


# Who a metadata-server token is of, until its email is asked for (only to word a failure).
NODE_ACCOUNT: Final = "the VM's default service account"


class Token(NamedTuple):
    value: str
    expires_at: float | None
    who: str = NODE_ACCOUNT  # the identity the token is of, for a line naming it


def google_auth_request(ctx: Context) -> Any:
    """A google-auth requests transport whose per-call timeout never passes the deadline, whose
    answers are read under the caps (:mod:`credprovider.runtime.requests_session`) and whose CA
    bundle, if one is named, is checked first."""
    from google.auth.transport.requests import Request

    from credprovider.runtime.http import REQUESTS_CA_BUNDLE_ENV, require_usable_ca_bundle
    from credprovider.runtime.requests_session import bounded_session

    require_usable_ca_bundle(ctx.environ, REQUESTS_CA_BUNDLE_ENV)

    class DeadlineRequest(Request):
        def __call__(
            self,
            url: str,
            method: str = "GET",
            body: Any = None,
            headers: Any = None,
            timeout: float | None = None,
            **kwargs: Any,
        ) -> Any:
            cap = ctx.deadline.timeout(10.0 if timeout is None else float(timeout))
            ctx.log.v(4, f"{method} {url.split('?')[0]}")
            return super().__call__(
                url, method=method, body=body, headers=headers, timeout=cap, **kwargs
            )

    return DeadlineRequest(session=bounded_session(ctx.deadline.remaining))


def _expiry_timestamp(expiry: datetime.datetime | None) -> float | None:
    import datetime

    if expiry is None:
        return None
    if expiry.tzinfo is None:  # google-auth keeps naive UTC datetimes
        expiry = expiry.replace(tzinfo=datetime.UTC)
    return expiry.timestamp()


def _metadata_get(ctx: Context, path: str, what: str) -> Any:
    from credprovider.gcp import metadata  # not on a cache hit

    if not metadata.wants_mtls(ctx.environ):
        return metadata.get(ctx, path, what)
    from google.auth import exceptions
    from google.auth.compute_engine import _metadata

    ctx.deadline.phase = f"reading {what} from the GCE metadata server over mTLS"
    try:
        return _metadata.get(
            google_auth_request(ctx),
            path,
            retry_count=metadata.METADATA_ATTEMPTS,
            timeout=ctx.deadline.timeout(metadata.PER_CALL_TIMEOUT_SECONDS),
        )
    except BadAnswer as exc:
        raise ProviderError(
            f"could not read {what} from the GCE metadata server over mTLS: {exc.detail}",
            NOT_THE_SERVICE,
        ) from None
    except (exceptions.GoogleAuthError, ValueError) as exc:
        raise ProviderError(
            f"could not read {what} from the GCE metadata server over mTLS: {one_line(exc)}"
        ) from None


def metadata_token(ctx: Context) -> Token:
    """The default service account's access token from the metadata server."""
    ctx.log.v(
        1,
        "credentials: the VM's default service account, from the metadata server at "
        f"{metadata_host(ctx.environ)}",
    )
    answer = _metadata_get(
        ctx, "instance/service-accounts/default/token", "the default service account's access token"
    )
    if (
        not isinstance(answer, dict)
        or not isinstance(answer.get("access_token"), str)
        or not (answer["access_token"])
    ):
        raise ProviderError(
            "the GCE metadata server answered without an access_token for the default service "
            "account: check that the VM has a service account attached"
        )
    return _token(answer["access_token"], answer, ctx)


def _token(token: str, answer: dict[str, Any], ctx: Context) -> Token:
    """An OAuth answer's token (now a secret), expiring ``expires_in`` seconds from now when the
    answer says (the metadata server and STS both do)."""
    register_secret(token)
    expires_in = answer.get("expires_in")
    expires_at = ctx.now() + float(expires_in) if isinstance(expires_in, int | float) else None
    return Token(token, expires_at)


def _load_credentials_file(path: str) -> Any:
    """Credentials from a google-auth JSON file, without any call beyond the token itself.

    ``google.auth.load_credentials_from_file`` also resolves the project of an external-account
    config with a Cloud Resource Manager call, which an image pull does not need, so that type is
    built directly; every other type goes through google-auth's loader.
    """
    import google.auth

    from credprovider.runtime.answer import BadAnswer, decode_json
    from credprovider.runtime.nodefile import read_node_text

    try:
        info = decode_json(read_node_text(path))
    except BadAnswer as exc:
        raise ValueError(f"the file {exc.predicate}") from None
    if isinstance(info, dict) and info.get("type") == "external_account":
        source = info.get("credential_source") or {}
        if str(source.get("environment_id", "")).startswith("aws"):
            from google.auth import aws

            return aws.Credentials.from_info(info, scopes=[CLOUD_PLATFORM_SCOPE])
        if "executable" in source:
            from google.auth import pluggable

            return pluggable.Credentials.from_info(info, scopes=[CLOUD_PLATFORM_SCOPE])
        from google.auth import identity_pool

        return identity_pool.Credentials.from_info(info, scopes=[CLOUD_PLATFORM_SCOPE])
    credentials, _ = google.auth.load_credentials_from_file(path, scopes=[CLOUD_PLATFORM_SCOPE])
    return credentials


def credentials_file_token(path: str, ctx: Context) -> Token:
    """A token from GOOGLE_APPLICATION_CREDENTIALS (service-account key or external account)."""
    from google.auth import exceptions

    ctx.deadline.phase = f"getting a token with the credentials in {path}"
    try:
        credentials = _load_credentials_file(path)
    except OSError as exc:
        raise ProviderError(f"{CREDENTIALS_FILE_ENV}={path}: {exc.strerror or exc}") from None
    except (exceptions.GoogleAuthError, ValueError) as exc:
        raise ProviderError(f"{CREDENTIALS_FILE_ENV}={path}: {one_line(exc)}") from None
    ctx.log.v(1, f"using {type(credentials).__module__} credentials from {path}")
    try:
        credentials.refresh(google_auth_request(ctx))
    except BadAnswer as exc:
        raise ProviderError(
            f"could not get a token with the credentials in {path}: {exc.detail}", NOT_THE_SERVICE
        ) from None
    except (exceptions.GoogleAuthError, ValueError) as exc:
        raise ProviderError(
            f"could not get a token with the credentials in {path}: {one_line(exc)}"
        ) from None
    if not credentials.token:
        raise ProviderError(f"the credentials in {path} produced no access token")
    register_secret(credentials.token)
    email = getattr(credentials, "service_account_email", None)
    who = f"{email} (the credentials in {path})" if email else f"the credentials in {path}"
    return Token(credentials.token, _expiry_timestamp(credentials.expiry), who)


def workload_identity_token(subject_token: str, options: GcpOptions, ctx: Context) -> Token:
    """Exchange the pod's service-account token for a federated access token at Google STS."""
    from google.auth import exceptions
    from google.oauth2 import sts

    audience = workload_identity_audience(options.project_id, options.identity_provider)
    ctx.deadline.phase = f"exchanging the service account token at {options.sts_endpoint}"
    ctx.log.v(1, f"Workload Identity: exchanging the service account token for audience {audience}")
    try:
        answer = sts.Client(options.sts_endpoint).exchange_token(
            google_auth_request(ctx),
            grant_type=STS_GRANT_TYPE,
            subject_token=subject_token,
            subject_token_type=STS_SUBJECT_TOKEN_TYPE,
            audience=audience,
            scopes=[CLOUD_PLATFORM_SCOPE],
            requested_token_type=STS_REQUESTED_TOKEN_TYPE,
        )
    except BadAnswer as exc:
        raise ProviderError(
            f"Workload Identity token exchange failed: {exc.detail}",
            NOT_THE_SERVICE,
        ) from None
    except (exceptions.GoogleAuthError, ValueError) as exc:
        raise ProviderError(
            f"Workload Identity token exchange at {options.sts_endpoint} failed for a service "
            f"account that opted in (no fallback to the node identity): {one_line(exc)}"
        ) from None
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise ProviderError(f"{options.sts_endpoint} answered without an access_token")
    return _token(token, answer, ctx)._replace(
        who="the pod's service account through Workload Identity"
    )


def impersonated_token(source: Token, chain: Chain, ctx: Context) -> Token:
    """``source``'s token exchanged for one of ``chain.target`` at the IAM Credentials API."""
    from credprovider.gcp import impersonation

    ctx.log.v(1, f"pulling as {chain.target}: {chain.path(source.who)} (impersonated)")
    ctx.deadline.phase = f"impersonating {chain.target} at {impersonation.IAM_CREDENTIALS_API}"
    try:
        token, expiry = impersonation.impersonate(
            source.value, source.who, chain, CLOUD_PLATFORM_SCOPE, google_auth_request(ctx)
        )
    except impersonation.Refused as refused:
        who = source.who
        if who == NODE_ACCOUNT:
            who = _node_account(ctx)
        raise impersonation.failure(refused.status, refused.body, who, chain) from None
    register_secret(token)
    return Token(token, _expiry_timestamp(expiry), chain.target)


def _node_account(ctx: Context) -> str:
    """The VM's default service account with its email when the metadata server still answers
    (only to name it in a failure line)."""
    try:
        email = _metadata_get(
            ctx, "instance/service-accounts/default/email", "the default service account's email"
        )
    except ProviderError:
        return NODE_ACCOUNT
    if not isinstance(email, str) or not email.strip() or len(email) > 256:
        return NODE_ACCOUNT
    return f"{NODE_ACCOUNT} {one_line(email)}"


class GcpProvider:
    """``auth-provider-gcp``: one token per request, answered for every Google registry at once."""

    def __init__(self, options: GcpOptions, overrides: CacheOverrides) -> None:
        self.options = options
        self.overrides = overrides

    def plan(self, image: ImageRef, request: CredentialProviderRequest, ctx: Context) -> Plan:
        """Every key of the image's Google registry, and what picks the Google identity (no SDK,
        no secrets). Only token answers (the gcr flow) are cached: a dockercfg answer has no
        expiry, and its keys are whatever the dockercfg holds."""
        if self.options.auth_flow != "gcr":
            return Plan(image, ())
        credentials_file = ctx.environ.get(CREDENTIALS_FILE_ENV, "")
        identity = {
            "flow": self.options.auth_flow,
            "identity_provider": self.options.identity_provider,
            "project": self.options.project_id,
            "sts": self.options.sts_endpoint,
            "credentials_file": credentials_file,
            "credentials": fingerprint_file(credentials_file) if credentials_file else "",
            "metadata_host": metadata_host(ctx.environ),
            "impersonate": str(self.options.impersonate or ""),
        }
        return Plan(image, tuple(registry_keys(image.registry, image.host)), identity)

    def fulfil(self, plan: Plan, request: CredentialProviderRequest, ctx: Context) -> Credentials:
        if self.options.auth_flow == "gcr":
            creds = self._gcr(plan, request, ctx)
        else:
            from credprovider.gcp.dockercfg import dockercfg_credentials

            creds = dockercfg_credentials(self.options.auth_flow, ctx)
        if self.overrides.key_type is not None:
            creds = creds._replace(cache_key_type=self.overrides.key_type)
        if self.overrides.duration is not None:
            creds = creds._replace(cache_duration=self.overrides.duration)
        return creds

    def _gcr(self, plan: Plan, request: CredentialProviderRequest, ctx: Context) -> Credentials:
        if not is_google_registry_host(plan.image.host):
            ctx.log.v(1, f"{plan.image.host} is not a Google registry host: no token is sent to it")
            return Credentials({}, cache_key_type=CACHE_KEY_GLOBAL, cache_duration=0)
        token = self._token_for(request, ctx)
        entry = AuthConfig(TOKEN_USERNAME, token.value)
        return Credentials(
            {key: entry for key in plan.keys},
            cache_key_type=CACHE_KEY_GLOBAL,
            expires_at=token.expires_at,
        )

    def _token_for(self, request: CredentialProviderRequest, ctx: Context) -> Token:
        credentials_file = ctx.environ.get(CREDENTIALS_FILE_ENV, "")
        try:
            source = choose_token_source(
                request.service_account_annotations,
                bool(request.service_account_token),
                self.options.identity_provider,
                credentials_file,
            )
        except TokenSourceError as exc:
            raise ProviderError(str(exc)) from None
        if source.warning:
            ctx.log.warning(source.warning)
        if source.kind == WORKLOAD_IDENTITY:
            token = workload_identity_token(request.service_account_token, self.options, ctx)
        elif source.kind == CREDENTIALS_FILE:
            token = credentials_file_token(credentials_file, ctx)
        else:
            token = metadata_token(ctx)
        if self.options.impersonate is None:
            return token
        return impersonated_token(token, self.options.impersonate, ctx)

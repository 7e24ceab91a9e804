"""Google credentials: which token a request gets (the metadata server's, a credentials file's, a
pod's Workload Identity; then, if asked, an impersonated account's) and the answer it makes. Every
call into google-auth is in :mod:`credprovider.gcp.googleauth`."""

from __future__ import annotations

from credprovider.errors import ProviderError
from credprovider.gcp.googleauth import (
    NODE_ACCOUNT,
    Token,
    credentials_file_token,
    impersonate,
    metadata_get,
    token_from_answer,
    workload_identity_token,
)
from credprovider.gcp.registry import (
    CREDENTIALS_FILE,
    CREDENTIALS_FILE_ENV,
    STS_ENDPOINT,
    TOKEN_USERNAME,
    WORKLOAD_IDENTITY,
    CacheOverrides,
    TokenSourceError,
    choose_token_source,
    is_google_registry_host,
    metadata_host,
    registry_keys,
    shown_metadata_host,
    workload_identity_audience,
)
from credprovider.runtime._typing import TYPE_CHECKING, NamedTuple
from credprovider.runtime.api import CACHE_KEY_GLOBAL, AuthConfig, CredentialProviderRequest
from credprovider.runtime.provider import Context, Credentials, Plan, fingerprint_file, one_line

if TYPE_CHECKING:
    from credprovider.gcp.impersonation import Chain
    from credprovider.runtime.imageref import ImageRef


class GcpOptions(NamedTuple):
    auth_flow: str = "gcr"
    identity_provider: str = ""
    project_id: str = ""
    sts_audience: str = ""  # Workload Identity Federation's pool provider, instead of the two above
    sts_endpoint: str = STS_ENDPOINT
    impersonate: Chain | None = None


def metadata_token(ctx: Context) -> Token:
    """The default service account's access token from the metadata server."""
    ctx.log.v(
        1,
        "credentials: the VM's default service account, from the metadata server at "
        f"{shown_metadata_host(ctx.environ)}",
    )
    answer = metadata_get(
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
    return token_from_answer(answer["access_token"], answer, ctx)


def impersonated_token(source: Token, chain: Chain, ctx: Context) -> Token:
    """``source``'s token exchanged for one of ``chain.target`` at the IAM Credentials API."""
    from credprovider.gcp import impersonation

    ctx.log.v(1, f"pulling as {chain.target}: {chain.path(source.who)} (impersonated)")
    ctx.deadline.phase = f"impersonating {chain.target} at {impersonation.IAM_CREDENTIALS_API}"
    try:
        return impersonate(source.value, source.who, chain, ctx)
    except impersonation.Refused as refused:
        who = source.who
        if who == NODE_ACCOUNT:
            who = _node_account(ctx)
        raise impersonation.failure(refused.status, refused.body, who, chain) from None


def _node_account(ctx: Context) -> str:
    """The VM's default service account with its email when the metadata server still answers
    (only to name it in a failure line)."""
    try:
        email = metadata_get(
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
            "sts_audience": self.options.sts_audience,
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
                self.options.identity_provider or self.options.sts_audience,
                credentials_file,
            )
        except TokenSourceError as exc:
            raise ProviderError(str(exc)) from None
        if source.warning:
            ctx.log.warning(source.warning)
        if source.kind == WORKLOAD_IDENTITY:
            audience = self.options.sts_audience or workload_identity_audience(
                self.options.project_id, self.options.identity_provider
            )
            token = workload_identity_token(
                request.service_account_token, audience, self.options.sts_endpoint, ctx
            )
        elif source.kind == CREDENTIALS_FILE:
            token = credentials_file_token(credentials_file, ctx)
        else:
            token = metadata_token(ctx)
        if self.options.impersonate is None:
            return token
        return impersonated_token(token, self.options.impersonate, ctx)

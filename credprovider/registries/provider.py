"""``registry-credential-provider``'s provider: the pod's token presented to the provider's backend
(:mod:`credprovider.registries.wire` builds the calls and reads the answers), through the runtime's
transport seam: the plugin's own client (TLS verified against ``--ca-file``, else certifi's
bundle), or requests when a proxy is set; bounded reads, throttling-aware retries within the
deadline, one line for every failure naming the backend and what to fix.

The credential is only ever sent for the backend's own registries (``backends.serves``), and
``cacheDuration`` comes from the shorter of the credential's own expiry and the pod token's.
"""

from __future__ import annotations

from credprovider.errors import ProviderError
from credprovider.registries.backends import Backend, Settings, serves
from credprovider.registries.wire import (
    Issued,
    error_text,
    read_issued,
    read_pull_secret,
    read_vault_secret,
    token_call,
    token_namespace,
    vault_client_token,
    vault_read_call,
)
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final
from credprovider.runtime.advice import NOT_THE_SERVICE, RETRIES_NEXT_PULL, unreachable
from credprovider.runtime.answer import BadAnswer, decode_json, jwt_expiry
from credprovider.runtime.api import CACHE_KEY_IMAGE, CACHE_KEY_REGISTRY, AuthConfig
from credprovider.runtime.excerpt import quoted
from credprovider.runtime.http import HttpError, exchange, proxy_setting
from credprovider.runtime.provider import Context, Credentials, Plan, one_line
from credprovider.runtime.redact import register_secret
from credprovider.runtime.retry import RETRYABLE_STATUSES

if TYPE_CHECKING:
    from credprovider.registries.wire import Call
    from credprovider.runtime.api import CredentialProviderRequest
    from credprovider.runtime.http import HttpResponse, Send
    from credprovider.runtime.imageref import ImageRef
    from credprovider.runtime.retry import Throttle

PER_CALL_TIMEOUT_SECONDS: Final = 10.0
NO_TOKEN: Final = (
    "the kubelet sent no service account token: registry-credential-provider answers only with "
    "the pod's own identity; give the provider tokenAttributes (serviceAccountTokenAudience: the "
    "audience the backend trusts, cacheType: Token, requireServiceAccount: true) on kubelet 1.34+"
)


def refused(settings: Settings, status: int, namespace: str = "") -> str:
    """What to do when the backend refuses with ``status``."""
    backend = settings.backend
    if status in RETRYABLE_STATUSES:
        return RETRIES_NEXT_PULL
    account = f"system:serviceaccount:{namespace or 'NAMESPACE'}:NAME"
    if 300 <= status < 400:  # never followed: the pod's token would go where --url does not say
        return f"check --url: give the address {settings.url} redirects to, if it is the service's"
    if status == 404:
        return {
            Backend.VAULT: f"check --kv-mount and --secret-path: Vault has no secret at "
            f"{settings.kv_mount}/data/{settings.secret_path}, or no auth mount "
            f"{settings.auth_mount}",
            Backend.SECRET: "the service account's annotation names a Secret that does not exist "
            "in its namespace",
        }.get(backend, f"check --url: {settings.url} has no such endpoint")
    return {
        Backend.QUAY: f"the robot {settings.robot} must have a federation entry trusting this "
        f"cluster's service-account issuer with subject {account} (Quay 3.13+)",
        Backend.QUAY_STS: f"the robot {settings.robot} must have a federation entry trusting this "
        f"cluster's service-account issuer with subject {account}, and the token's audience",
        Backend.ARTIFACTORY: f"the OIDC integration {settings.provider_name} must trust this "
        "cluster's service-account issuer and the token's audience, with an identity mapping "
        "that matches the service account's claims",
        Backend.CLOUDSMITH: f"the organization {settings.org}'s OpenID Connect provider must trust "
        f"this cluster's issuer, for the service {settings.service_slug}",
        Backend.VAULT: f"the Vault role {settings.role} must bind this service account (and its "
        f"audience), and its policy read {settings.kv_mount}/data/{settings.secret_path}",
        Backend.SECRET: "the service account needs get on secrets in its namespace (a Role and "
        "RoleBinding), and its token an audience the API server accepts",
    }[backend]


class RegistryProvider:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def plan(self, image: ImageRef, request: CredentialProviderRequest, ctx: Context) -> Plan:
        """The image's registry as the one key, once it is one of the backend's registries."""
        settings = self.settings
        if not serves(settings, image.registry):
            raise ProviderError(
                f"{image.registry} is not a registry the {settings.backend.title} credential is "
                f"for ({', '.join(settings.registries)}): it is not sent there",
                "add the host to --registry, or leave it out of the provider's matchImages",
            )
        identity = {"backend": settings.backend.value, "url": settings.url}
        return Plan(image, (image.registry,), identity)

    def fulfil(self, plan: Plan, request: CredentialProviderRequest, ctx: Context) -> Credentials:
        settings = self.settings
        token = request.service_account_token
        if not token:
            raise ProviderError(NO_TOKEN)
        title = settings.backend.title
        try:
            call = token_call(settings, token, request.service_account_annotations)
        except ValueError as exc:
            raise ProviderError(f"{title}: {one_line(exc)}") from None
        # Quay's Basic credential carries the token encoded: a backend echoing it is scrubbed too
        register_secret(call.headers.get("Authorization", "").partition(" ")[2])
        send = _transport(settings, ctx)
        answer = _ask(call, settings, ctx, send, token)
        try:
            issued = self._issued(answer, plan, ctx, send, token)
        except BadAnswer as exc:
            raise ProviderError(f"{title}: {exc.detail}", NOT_THE_SERVICE) from None
        except ValueError as exc:
            raise ProviderError(f"{title} at {settings.url}: {one_line(exc)}") from None
        register_secret(issued.password)
        ends = [when for when in (issued.expires_at, jwt_expiry(token)) if when is not None]
        key_type = CACHE_KEY_IMAGE if settings.backend is Backend.SECRET else CACHE_KEY_REGISTRY
        entry = AuthConfig(issued.username, issued.password)
        ctx.log.v(1, f"{title}: a credential for {plan.image.registry} as {issued.username}")
        return Credentials({key: entry for key in plan.keys}, key_type, min(ends) if ends else None)

    def _issued(self, answer: Any, plan: Plan, ctx: Context, send: Send, token: str) -> Issued:
        settings = self.settings
        if settings.backend is Backend.SECRET:
            return read_pull_secret(answer, plan.image.registry)
        if settings.backend is not Backend.VAULT:
            return read_issued(settings, answer, ctx.now())
        client_token = vault_client_token(answer)
        register_secret(client_token)
        return read_vault_secret(
            settings, _ask(vault_read_call(settings, client_token), settings, ctx, send, token)
        )


def _transport(settings: Settings, ctx: Context) -> Send:
    """The plugin's own client, trusting ``--ca-file`` (else certifi's bundle); requests when a
    proxy is set (the one proxy rule: runtime.http.proxy_setting)."""
    proxy = proxy_setting(ctx.environ)
    if proxy:
        from credprovider.runtime.requests_session import requests_send

        ctx.log.v(1, f"{settings.backend.title} through requests: {proxy} is set")
        return requests_send(ctx)
    from credprovider.runtime.http import stdlib_send
    from credprovider.runtime.tls import verified_context

    return stdlib_send(verified_context(settings.ca_file, "--ca-file"))


def throttled(answer: HttpResponse, now: float) -> Throttle | None:
    """A backend asking to slow down: the runtime's rule (429, or 503 with ``Retry-After``), with
    Cloudsmith's ``X-RateLimit-Reset`` (the Unix second its window resets) standing in for a
    ``Retry-After`` it did not send; a reset in the past, or absurd, is no wait at all."""
    from credprovider.runtime.http import throttled as runtime_throttled
    from credprovider.runtime.retry import Throttle, retry_after_seconds

    found = runtime_throttled(answer)
    if found is None or found.retry_after is not None:
        return found
    reset = retry_after_seconds(answer.header("x-ratelimit-reset"))
    if reset is None or not now <= reset <= now + 24 * 3600:
        return found
    return Throttle(reset - now)


def _ask(call: Call, settings: Settings, ctx: Context, send: Send, token: str) -> Any:
    """One call, retried as the transport seam does; its decoded JSON answer, or one line."""
    title = settings.backend.title
    url = call.url
    ctx.deadline.phase = f"asking {title} at {url}"
    ctx.log.v(2, f"{call.method} {url} ({title})")
    try:
        answer = exchange(ctx, call.method, url, what=f"{title} at {url}", headers=call.headers,
                          body=call.body, send=send, timeout_cap=PER_CALL_TIMEOUT_SECONDS,
                          throttled_answer=lambda got: throttled(got, ctx.now()))  # fmt: skip
    except BadAnswer as exc:
        raise ProviderError(f"{title}: {exc.at(url).detail}", NOT_THE_SERVICE) from None
    except HttpError as exc:
        host = url.partition("://")[2].split("/", 1)[0]
        raise ProviderError(
            f"could not reach {title} at {url}: {one_line(exc)}", unreachable(host)
        ) from None
    try:
        decoded = decode_json(answer.body)
    except BadAnswer as exc:
        raise ProviderError(f"{title}: {exc.at(url).detail}", NOT_THE_SERVICE) from None
    except ValueError:
        decoded = None
    if answer.status not in call.ok:
        said = error_text(decoded) or answer.text()
        try:
            namespace = token_namespace(token)
        except (ValueError, BadAnswer):
            namespace = ""
        if 300 <= answer.status < 400:
            said = f"a redirect to {quoted(answer.header('location'))}, not followed"
        raise ProviderError(
            f"{title} at {url} refused with HTTP {answer.status}"
            f"{f': {one_line(said)}' if said.strip() else ''}",
            refused(settings, answer.status, namespace),
        )
    if decoded is None:
        raise ProviderError(f"{title} at {url} answered with no JSON", NOT_THE_SERVICE)
    return decoded

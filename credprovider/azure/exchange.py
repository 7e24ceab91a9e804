"""The ACR token exchange: ``GET /v2/`` for the challenge, then ``POST /oauth2/exchange``; and the
transport every plugin-made Azure call uses (the exchange, and Azure Stack's Resource Manager
metadata).

Two HTTPS calls to the registry, on the stdlib client (``credprovider/runtime/http.py``) in the common
case: requests, urllib3 and charset_normalizer cost an exec about as much again as everything else
of an ACR cache miss. When a proxy variable is set the calls go through requests, which honours it
(with ``NO_PROXY``), as they always did. Both transports give the same answer type and raise
:class:`~credprovider.runtime.http.HttpError`, so the exchange itself is written once. TLS trust is what
requests uses: ``REQUESTS_CA_BUNDLE``, else ``CURL_CA_BUNDLE``, else certifi's bundle.
"""

from __future__ import annotations

from credprovider import __version__
from credprovider.azure.registry import ChallengeError, exchange_url, parse_challenge
from credprovider.errors import ProviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final
from credprovider.runtime.advice import NOT_THE_SERVICE, RETRIES_NEXT_PULL, unreachable
from credprovider.runtime.answer import BadAnswer, decode_json
from credprovider.runtime.http import HttpError, HttpResponse, exchange, proxy_setting
from credprovider.runtime.provider import Context, one_line
from credprovider.runtime.redact import register_secret
from credprovider.runtime.retry import RETRYABLE_STATUSES

USER_AGENT: Final = f"credprovider/{__version__} (acr-credential-provider)"
PER_CALL_TIMEOUT_SECONDS: Final = 10.0
if TYPE_CHECKING:
    from collections.abc import Mapping

    from credprovider.runtime.http import Send

# The host answered, but not as an Azure Container Registry does.
NOT_AN_ACR: Final = (
    "check that the image's host is an Azure Container Registry (the provider's matchImages send "
    "only ACR hosts to this plugin)"
)


def stdlib_transport(environ: Mapping[str, str]) -> Send:
    """The plugin's own client, trusting what requests would (``REQUESTS_CA_BUNDLE`` ...)."""
    from credprovider.runtime.http import stdlib_send
    from credprovider.runtime.tls import REQUESTS_CA_BUNDLE_ENV, ca_bundle_setting, verified_context

    variable, ca_bundle = ca_bundle_setting(environ, REQUESTS_CA_BUNDLE_ENV)
    return stdlib_send(verified_context(ca_bundle, variable))


def transport_for(ctx: Context) -> Send:
    """The stdlib client, or requests when a proxy is set (the one proxy rule)."""
    proxy = proxy_setting(ctx.environ)
    if proxy:
        ctx.log.v(1, f"Azure calls through requests: {proxy} is set")
        from credprovider.runtime.requests_session import requests_send

        return requests_send(ctx)
    return stdlib_transport(ctx.environ)


def _call(
    send: Send, ctx: Context, method: str, url: str, form: Mapping[str, str] | None
) -> HttpResponse:
    """One exchange step through the transport seam: ``form`` is sent url-encoded."""
    from urllib.parse import urlencode

    headers = {"User-Agent": USER_AGENT, "Accept": "*/*"}
    body = None
    if form is not None:
        body = urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    return exchange(
        ctx,
        method,
        url,
        what=url,
        headers=headers,
        body=body,
        send=send,
        timeout_cap=PER_CALL_TIMEOUT_SECONDS,
    )


def exchange_for_refresh_token(
    login_server: str, aad: str, tenant: str, ctx: Context, send: Send | None = None
) -> str:
    """The registry's refresh token for the AAD token ``aad``."""
    send = send or transport_for(ctx)
    challenge_url = f"https://{login_server}/v2/"
    ctx.deadline.phase = f"reading the registry challenge at {challenge_url}"
    ctx.log.v(4, f"GET {challenge_url} (the registry's challenge)")
    try:
        response = _call(send, ctx, "GET", challenge_url, None)
    except BadAnswer as exc:
        raise ProviderError(f"the registry's challenge: {exc.detail}", NOT_AN_ACR) from None
    except HttpError as exc:
        raise ProviderError(
            f"could not reach the registry at {challenge_url}: {one_line(exc)}",
            unreachable(login_server),
        ) from None
    try:
        challenge = parse_challenge(response.status, response.header_values("Www-Authenticate"))
        url = exchange_url(challenge.realm, login_server)
    except ChallengeError as exc:
        raise ProviderError(f"{challenge_url}: {exc}", NOT_AN_ACR) from None
    form = {"grant_type": "access_token", "service": challenge.service, "access_token": aad}
    if tenant:
        form["tenant"] = tenant
    ctx.deadline.phase = f"exchanging the AAD token at {url}"
    ctx.log.v(1, f"exchanging the AAD token at {url} (service {challenge.service})")
    try:
        answer = _call(send, ctx, "POST", url, form)
    except BadAnswer as exc:
        raise ProviderError(f"ACR token exchange: {exc.detail}", NOT_THE_SERVICE) from None
    except HttpError as exc:
        raise ProviderError(
            f"could not reach {url}: {one_line(exc)}", unreachable(login_server)
        ) from None
    correlation = answer.header("X-Ms-Correlation-Request-Id")
    if correlation:
        ctx.log.v(4, f"exchange correlation id {correlation}")
    if answer.status != 200:
        hint = (
            "; the identity needs the AcrPull role on the registry"
            if answer.status in (401, 403)
            else f"; {RETRIES_NEXT_PULL}"
            if answer.status in RETRYABLE_STATUSES
            else ""
        )
        raise ProviderError(
            f"ACR token exchange at {url} failed with HTTP {answer.status}: "
            f"{one_line(answer.text())}{hint}"
        )
    return _refresh_token(answer.body, url)


def _refresh_token(body: bytes, url: str) -> str:
    try:
        answer = decode_json(body)
    except BadAnswer as exc:
        raise ProviderError(f"ACR token exchange: {exc.at(url).detail}", NOT_THE_SERVICE) from None
    except ValueError:
        answer = None
    refresh_token = answer.get("refresh_token") if isinstance(answer, dict) else None
    if not isinstance(refresh_token, str) or not refresh_token:
        raise ProviderError(
            f"ACR token exchange at {url} returned no refresh_token", NOT_THE_SERVICE
        )
    register_secret(refresh_token)
    return refresh_token

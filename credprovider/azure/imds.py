"""The node's managed identity token from Azure IMDS, on the stdlib (no azure-identity on a miss).

azure-identity imports azure-core, MSAL and cryptography (about 100 ms per exec) before it sends
this one plain-HTTP GET. The request is the one azure-identity sends to IMDS (same query, same
``AZURE_POD_IDENTITY_AUTHORITY_HOST`` override, same retried statuses); environments where
azure-identity would pick another managed identity source (App Service, Arc, Cloud Shell, Service
Fabric, token exchange) keep going through azure-identity: see :func:`serves`.
"""

from __future__ import annotations

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple
from credprovider.runtime.advice import NOT_THE_SERVICE, RETRIES_NEXT_PULL, unreachable
from credprovider.runtime.answer import BadAnswer, decode_json, number_in_string
from credprovider.runtime.http import HttpError, exchange
from credprovider.runtime.provider import one_line
from credprovider.runtime.retry import RETRYABLE_STATUSES

if TYPE_CHECKING:
    from collections.abc import Mapping

    from credprovider.runtime.provider import Context

AUTHORITY_HOST_ENV: Final = "AZURE_POD_IDENTITY_AUTHORITY_HOST"
DEFAULT_IMDS: Final = "http://169.254.169.254"
TOKEN_PATH: Final = "/metadata/identity/oauth2/token"
API_VERSION: Final = "2018-02-01"
# Set, these make azure-identity use a managed identity source other than IMDS.
OTHER_SOURCE_ENV: Final = ("IDENTITY_ENDPOINT", "MSI_ENDPOINT", "AZURE_FEDERATED_TOKEN_FILE")
# IMDS answers 404 and 410 while it is being updated; azure-identity retries those too.
RETRIED_STATUSES: Final = RETRYABLE_STATUSES | {404, 410}
ATTEMPTS: Final = 3
PER_CALL_TIMEOUT_SECONDS: Final = 5.0


class ImdsError(CredproviderError):
    """No token from IMDS; the message says why in one line, ``advice`` what to do."""

    def __init__(self, message: str, advice: str | None = None) -> None:
        super().__init__(message)
        self.advice = advice


class AccessToken(NamedTuple):
    token: str
    expires_on: int


def serves(environ: Mapping[str, str]) -> bool:
    """Would azure-identity's ManagedIdentityCredential ask IMDS in this environment?"""
    return not any(environ.get(name) for name in OTHER_SOURCE_ENV)


def base_url(environ: Mapping[str, str]) -> str:
    """IMDS's address as azure-identity finds it (``AZURE_POD_IDENTITY_AUTHORITY_HOST`` first)."""
    return (environ.get(AUTHORITY_HOST_ENV) or DEFAULT_IMDS).rstrip("/")


def token_url(environ: Mapping[str, str], resource: str, selector: Mapping[str, str]) -> str:
    """The IMDS token URL for ``resource`` and the identity ``selector`` (client_id/msi_res_id)."""
    from urllib.parse import urlencode

    query = urlencode({"api-version": API_VERSION, "resource": resource, **selector})
    return f"{base_url(environ)}{TOKEN_PATH}?{query}"


def parse_token_answer(body: bytes, now: float) -> AccessToken:
    """``access_token`` and ``expires_on`` (Unix seconds) from an IMDS answer (``BadAnswer`` for
    one past the caps: the caller names the endpoint)."""
    try:
        answer = decode_json(body)
    except BadAnswer:
        raise
    except ValueError:
        raise ImdsError("IMDS answered with invalid JSON", NOT_THE_SERVICE) from None
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise ImdsError("IMDS answered without an access_token", NOT_THE_SERVICE)
    expires_on = answer.get("expires_on")
    expires_in = answer.get("expires_in")
    try:  # IMDS sends both as strings
        expiry = (
            number_in_string(expires_on)
            if expires_on is not None
            else int(now) + number_in_string(expires_in)
        )
    except BadAnswer:
        raise
    except ValueError:
        raise ImdsError(
            "IMDS answered without a usable expires_on or expires_in", NOT_THE_SERVICE
        ) from None
    return AccessToken(token, expiry)


def error_detail(body: bytes) -> str:
    """IMDS's ``error_description`` (or the body) for a failed answer, on one line."""
    text = body.decode("utf-8", "replace")
    try:
        answer = decode_json(text)
    except ValueError:
        return one_line(text)
    if isinstance(answer, dict):
        detail = answer.get("error_description") or answer.get("error")
        if isinstance(detail, str) and detail:
            return one_line(detail)
    return one_line(text)


class ImdsCredential:
    """The ``get_token`` of azure-identity's credentials, for the IMDS managed identity."""

    def __init__(self, ctx: Context, selector: Mapping[str, str]) -> None:
        self._ctx = ctx
        self._selector = dict(selector)

    def get_token(self, scope: str) -> AccessToken:
        ctx = self._ctx
        url = token_url(ctx.environ, scope.removesuffix("/.default"), self._selector)
        shown = url.split("?")[0]
        ctx.log.v(4, f"GET {shown}")
        try:
            response = exchange(
                ctx,
                "GET",
                url,
                headers={"Metadata": "true"},
                what=shown,
                timeout_cap=PER_CALL_TIMEOUT_SECONDS,
                retry_statuses=RETRIED_STATUSES,
                attempts=ATTEMPTS,
            )
            if response.status == 200:
                return parse_token_answer(response.body, ctx.now())
        except BadAnswer as exc:
            raise ImdsError(f"IMDS: {exc.at(shown).detail}", NOT_THE_SERVICE) from None
        except HttpError as exc:
            raise ImdsError(
                f"IMDS ({shown}) did not answer: {one_line(exc)}",
                unreachable("IMDS (169.254.169.254; a pod needs the host network)"),
            ) from None
        raise ImdsError(
            f"IMDS ({shown}) answered HTTP {response.status}: {error_detail(response.body)}",
            RETRIES_NEXT_PULL
            if response.status in RETRIED_STATUSES
            else "check that this managed identity is assigned to the node (az vm identity show)",
        )

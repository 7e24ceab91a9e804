"""The node's managed identity token from Azure IMDS, or from the Azure Arc agent, on the stdlib
(no azure-identity on a miss).

azure-identity imports azure-core, MSAL and cryptography (about 100 ms per exec) before it sends
this one plain-HTTP GET. The request is the one azure-identity sends to IMDS (same query, same
``AZURE_POD_IDENTITY_AUTHORITY_HOST`` override, same retried statuses). An Arc-enabled server's
agent (:class:`ArcCredential`) asks the caller to read a key file first, which MSAL read whole and
blocking. Environments where azure-identity would pick another managed identity source (App
Service, Cloud Shell, Service Fabric, token exchange) keep going through azure-identity: see
:func:`serves` and :func:`arc_endpoint`.
"""

from __future__ import annotations

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple
from credprovider.runtime.advice import NOT_THE_SERVICE, RETRIES_NEXT_PULL, unreachable
from credprovider.runtime.answer import BadAnswer, decode_json, number_in_string
from credprovider.runtime.excerpt import clip
from credprovider.runtime.http import HttpError, HttpResponse, UnusableUrl, exchange
from credprovider.runtime.provider import EMPTY_ANSWER, one_line
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
# An Arc-enabled server: azure-identity asks the Connected Machine agent at IDENTITY_ENDPOINT when
# IMDS_ENDPOINT is set too and IDENTITY_HEADER is not (azure/identity/_credentials/
# managed_identity.py); the agent's key files are in ARC_KEY_DIR, at most 4096 bytes (MSAL's
# managed_identity.py: _supported_arc_platforms_and_their_prefixes, _obtain_token_on_arc).
ARC_KEY_DIR: Final = "/var/opt/azcmagent/tokens"
# The agent's own binary: where it is installed, the server is Arc-enabled whether or not the
# kubelet passes the variables on, and the agent is asked at its fixed address (MSAL Go, which
# upstream's plugin uses through azidentity: apps/managedidentity/managedidentity.go,
# linuxHimdsPath, isAzureArcEnvironment, azureArcEndpoint; MSAL Python's _get_arc_endpoint the
# same, naming localhost).
ARC_HIMDS: Final = "/opt/azcmagent/bin/himds"
ARC_DEFAULT_ENDPOINT: Final = "http://127.0.0.1:40342/metadata/identity/oauth2/token"
ARC_KEY_CAP: Final = 4096
ARC_API_VERSION: Final = "2020-06-01"
# How the agent's 401 names the key file: WWW-Authenticate: Basic realm=<path> (MSAL splits it
# at "=", its first part "Basic realm" in any case).
ARC_CHALLENGE: Final = "Basic realm="
# Who may read those files (Microsoft's "Managed identity authentication" for Arc-enabled servers).
ARC_READERS: Final = "run as root or as a member of the himds group"
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


def arc_endpoint(environ: Mapping[str, str], himds_installed: bool) -> str | None:
    """Where the Azure Arc agent is asked for the managed identity in this environment, or None
    where it is not: ``IDENTITY_ENDPOINT`` with ``IMDS_ENDPOINT`` (as the agent sets them), or,
    with the agent installed (:data:`ARC_HIMDS`), ``IDENTITY_ENDPOINT`` or else the agent's fixed
    address, as MSAL decides it, unless a variable names another source."""
    given = environ.get("IDENTITY_ENDPOINT", "")
    if environ.get("IDENTITY_HEADER"):  # App Service, Service Fabric
        return None
    if given:
        return given if environ.get("IMDS_ENDPOINT") or himds_installed else None
    if himds_installed and not any(environ.get(name) for name in OTHER_SOURCE_ENV):
        return ARC_DEFAULT_ENDPOINT
    return None


def arc_key_file(challenge: str) -> str | None:
    """The key file an Arc agent's ``WWW-Authenticate: Basic realm=<path>`` names, confined as
    MSAL confines it (the name only, in :data:`ARC_KEY_DIR`, ending ``.key``); None for a
    challenge of another form."""
    import os

    parts = challenge.split("=")
    if len(parts) != 2 or f"{parts[0].lower()}=" != ARC_CHALLENGE.lower():
        return None
    name = os.path.splitext(os.path.basename(parts[1]))[0]
    return f"{ARC_KEY_DIR}/{name}.key" if name.strip() else None


def base_url(environ: Mapping[str, str]) -> str:
    """IMDS's address as azure-identity finds it (``AZURE_POD_IDENTITY_AUTHORITY_HOST`` first)."""
    return (environ.get(AUTHORITY_HOST_ENV) or DEFAULT_IMDS).rstrip("/")


def token_url(environ: Mapping[str, str], resource: str, selector: Mapping[str, str]) -> str:
    """The IMDS token URL for ``resource`` and the identity ``selector`` (client_id/msi_res_id)."""
    from urllib.parse import urlencode

    query = urlencode({"api-version": API_VERSION, "resource": resource, **selector})
    return f"{base_url(environ)}{TOKEN_PATH}?{query}"


def parse_token_answer(body: bytes, now: float, source: str = "IMDS") -> AccessToken:
    """``access_token`` and ``expires_on`` (Unix seconds) from an IMDS answer (``BadAnswer`` for
    one past the caps: the caller names the endpoint)."""
    try:
        answer = decode_json(body)
    except BadAnswer:
        raise
    except ValueError:
        raise ImdsError(f"{source} answered with invalid JSON", NOT_THE_SERVICE) from None
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise ImdsError(f"{source} answered without an access_token", NOT_THE_SERVICE)
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
            f"{source} answered without a usable expires_on or expires_in", NOT_THE_SERVICE
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
        shown = clip(url.split("?")[0])
        response = self._get(url, {}, "IMDS", shown)
        if response.status == 200:
            return self._parsed(response.body, "IMDS", shown)
        raise ImdsError(
            f"IMDS ({shown}) answered HTTP {response.status}: "
            f"{error_detail(response.body) or EMPTY_ANSWER}",
            RETRIES_NEXT_PULL
            if response.status in RETRIED_STATUSES
            else "check that this managed identity is assigned to the node (az vm identity show)",
        )

    def _get(self, url: str, headers: Mapping[str, str], source: str, shown: str) -> HttpResponse:
        self._ctx.log.v(4, f"GET {shown}")
        try:
            return exchange(
                self._ctx,
                "GET",
                url,
                headers={"Metadata": "true", **headers},
                what=shown,
                timeout_cap=PER_CALL_TIMEOUT_SECONDS,
                retry_statuses=RETRIED_STATUSES,
                attempts=ATTEMPTS,
            )
        except BadAnswer as exc:
            raise ImdsError(f"{source}: {exc.at(shown).detail}", NOT_THE_SERVICE) from None
        except UnusableUrl as exc:
            setting = AUTHORITY_HOST_ENV if source == "IMDS" else "IDENTITY_ENDPOINT"
            raise ImdsError(
                f"{source} ({shown}) cannot be asked: {one_line(exc)}",
                f"fix {setting} in the provider's env",
            ) from None
        except HttpError as exc:
            raise ImdsError(
                f"{source} ({shown}) did not answer: {one_line(exc)}",
                unreachable(
                    "IMDS (169.254.169.254; a pod needs the host network)"
                    if source == "IMDS"
                    else "the Azure Connected Machine agent (azcmagent show)"
                ),
            ) from None

    def _parsed(self, body: bytes, source: str, shown: str) -> AccessToken:
        try:
            return parse_token_answer(body, self._ctx.now(), source)
        except BadAnswer as exc:
            raise ImdsError(f"{source}: {exc.at(shown).detail}", NOT_THE_SERVICE) from None


class ArcCredential(ImdsCredential):
    """The managed identity of an Azure Arc-enabled server, from its Connected Machine agent:
    asked once without a key, it answers 401 naming a key file (``WWW-Authenticate: Basic
    realm=...``) that only root and the agent's group can read; asked again with that file's
    content, it answers the token (Microsoft's "Managed identity authentication" for Arc-enabled
    servers). The file is read as every node file on the exec path is, at most 4096 bytes (a
    FIFO or a link to ``/dev/zero`` there held MSAL, or filled its memory), its content
    registered as a secret. A user-assigned identity's token must name that identity (MSAL's
    rule: an older agent answers the machine's own identity instead)."""

    def __init__(self, ctx: Context, selector: Mapping[str, str], endpoint: str) -> None:
        super().__init__(ctx, selector)
        self._endpoint = endpoint

    def get_token(self, scope: str) -> AccessToken:
        from urllib.parse import urlencode

        from credprovider.runtime.excerpt import quoted
        from credprovider.runtime.nodefile import read_node_text, reason
        from credprovider.runtime.redact import register_secret

        endpoint = self._endpoint
        query = {"api-version": ARC_API_VERSION, "resource": scope.removesuffix("/.default")}
        url = f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode({**query, **self._selector})}"
        shown = clip(endpoint.split("?")[0])
        source = "the Azure Arc agent"
        asked = self._get(url, {}, source, shown)
        key_file = arc_key_file(asked.header("WWW-Authenticate")) if asked.status == 401 else None
        if key_file is None:
            challenge = quoted(asked.header("WWW-Authenticate"))
            detail = error_detail(asked.body) or f"WWW-Authenticate {challenge}"
            raise ImdsError(
                f"{source} ({shown}) answered HTTP {asked.status} without naming its key file "
                f"(Basic realm=...): {detail}",
                NOT_THE_SERVICE,
            )
        try:
            key = read_node_text(key_file, ARC_KEY_CAP).strip()
        except (OSError, ValueError) as exc:
            why = reason(exc) if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise ImdsError(
                f"the key file {key_file} that {source} ({shown}) named cannot be read: {why}",
                ARC_READERS
                if isinstance(exc, PermissionError)
                else "check the agent (azcmagent show)",
            ) from None
        register_secret(key)
        answer = self._get(url, {"Authorization": f"Basic {key}"}, source, shown)
        if answer.status != 200:
            raise ImdsError(
                f"{source} ({shown}) answered HTTP {answer.status} to the key in {key_file}: "
                f"{error_detail(answer.body) or EMPTY_ANSWER}",
                RETRIES_NEXT_PULL
                if answer.status in RETRIED_STATUSES
                else "check that this managed identity is assigned to the machine (azcmagent show)",
            )
        token = self._parsed(answer.body, source, shown)
        self._confirm(answer.body, source)
        return token

    def _confirm(self, body: bytes, source: str) -> None:
        """A user-assigned identity's token names it (``client_id`` or ``msi_res_id``)."""
        if not self._selector:
            return
        (field, wanted), answer = next(iter(self._selector.items())), decode_json(body)
        echoed = answer.get(field) or (answer.get("mi_res_id") if field == "msi_res_id" else None)
        if not isinstance(echoed, str) or echoed.lower() != wanted.lower():
            raise ImdsError(
                f"{source} answered a token that does not name the identity asked for "
                f"({field} {wanted}): the agent may not support user-assigned identities",
                "update the Connected Machine agent, or use the machine's own identity",
            )

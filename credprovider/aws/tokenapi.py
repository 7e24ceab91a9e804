"""ECR's ``GetAuthorizationToken`` behind one narrow seam.

A :class:`TokenApi` makes the call and nothing else; two adapters implement it: the stdlib one
(:class:`credprovider.aws.direct.StdlibTokenApi`, the common node case) and the botocore one
(:class:`credprovider.aws.botocore_api.BotocoreTokenApi`, everything else). Both read the answer
with :func:`read_answer` and raise the errors below, which :func:`failure` turns into the one
sentence an operator reads, whichever route was taken. Stdlib only: no SDK here.
"""

from __future__ import annotations

from credprovider.errors import CredproviderError, ProviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple, Protocol
from credprovider.runtime.advice import NOT_THE_SERVICE, RETRIES_NEXT_PULL, unreachable_url
from credprovider.runtime.answer import BadAnswer

if TYPE_CHECKING:
    from credprovider.runtime.retry import Throttle

MAX_ATTEMPTS: Final = 3  # a failed call, as botocore's "standard" retry mode, on both routes
# The API asking to slow down (botocore's throttling codes): retried over the deadline on both
# routes (credprovider/runtime/retry.py), never counted as failures.
THROTTLE_CODES: Final = frozenset(
    {
        "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
        "TooManyRequestsException", "ProvisionedThroughputExceededException",
        "TransactionInProgressException", "RequestLimitExceeded", "BandwidthLimitExceeded",
        "LimitExceededException", "RequestThrottled", "SlowDown", "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)  # fmt: skip
# A failed call worth another of the MAX_ATTEMPTS (botocore's transient codes and 5xx).
TRANSIENT_CODES: Final = frozenset(
    {"RequestTimeout", "RequestTimeoutException", "ServerException", "InternalFailure",
     "InternalServerError", "ServiceUnavailable", "500", "502", "503", "504"}
)  # fmt: skip
# What to do about settings botocore cannot use (SettingsError).
SETTINGS_FIX: Final = (
    "fix the AWS settings the plugin runs with (AWS_PROFILE, AWS_CONFIG_FILE, "
    "AWS_SHARED_CREDENTIALS_FILE and AWS_* keys in the provider's env, or the node's ~/.aws files)"
)
NO_CREDENTIALS_HINT: Final = (
    "no AWS credentials found (checked env, shared profile, web identity, container credentials, "
    "IMDS): attach an instance profile or set AWS_* in the provider's env (-v=1 says what IMDS "
    "answered)"
)
# Seconds since the epoch beyond which an expiresAt is no time (year 5138).
_LATEST_EXPIRY: Final = 1e11


class TokenAnswer(NamedTuple):
    """What a successful call returned: the base64 ``user:password`` token and its expiry."""

    token: str | None
    expires_at: float | None


class TokenApi(Protocol):
    """One ``GetAuthorizationToken`` call for one registry kind, in one region."""

    def get_authorization_token(self) -> TokenAnswer: ...


class ApiError(CredproviderError):
    """The API answered with an error: ``code`` and ``message`` as botocore's ClientError has them."""

    def __init__(self, code: str, message: str, retry_after: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retry_after = retry_after  # the answer's Retry-After header, when it had one


def throttle_of(exc: Exception) -> Throttle | None:
    """The API's "slow down", as the retry loop takes it: never retried before the answer's
    Retry-After, whatever its body says (ECR itself sends none; a proxy or a stand-in may)."""
    if not (isinstance(exc, ApiError) and exc.code in THROTTLE_CODES):
        return None
    from credprovider.runtime.retry import Throttle, retry_after_seconds

    return Throttle(retry_after_seconds(exc.retry_after) if exc.retry_after else None)


def transient(exc: Exception) -> bool:
    """A failed call worth another attempt: no answer came, or a transient error answer."""
    return isinstance(exc, TransportError) or (
        isinstance(exc, ApiError) and exc.code in TRANSIENT_CODES
    )


class TransportError(CredproviderError):
    """No answer came (refused, timeout, reset); the text says what happened. ``via``: the URL
    not reached when it was not the API's own but one the credentials' resolution called on the
    way (a role chain's STS), else empty."""

    def __init__(self, message: str, via: str = "") -> None:
        super().__init__(message)
        self.via = via


class AnswerError(CredproviderError):
    """The answer is not a usable ``GetAuthorizationToken`` result."""


class NoCredentials(CredproviderError):
    """No AWS identity was found to sign the call with."""


class SettingsError(CredproviderError):
    """The AWS settings the plugin was given cannot be used (a profile that does not exist, half a
    key pair, a config file botocore cannot read): the node's to fix, never worth a retry."""


class CallFailed(CredproviderError):
    """The call failed in a way none of the above names (an SDK error of another kind)."""


def read_answer(service: str, answer: object) -> TokenAnswer:
    """The token and expiry in a decoded answer (``ecr``: a list of authorizationData, ``ecr-public``:
    one). ``expiresAt`` is Unix seconds in the JSON, a datetime once botocore has parsed it.
    Raises :class:`AnswerError`."""
    data = answer.get("authorizationData") if isinstance(answer, dict) else None
    if service == "ecr":
        data = data[0] if isinstance(data, list) and data else None
    if not isinstance(data, dict) or not data:
        raise AnswerError("authorization data was empty")
    token = data.get("authorizationToken")
    if token is not None and not isinstance(token, str):
        raise AnswerError("the authorization token is not a string")
    expires = data.get("expiresAt")
    timestamp = getattr(expires, "timestamp", None)
    if callable(timestamp):
        expires = timestamp()
    if expires is None:
        return TokenAnswer(token, None)
    if isinstance(expires, bool) or not isinstance(expires, int | float):
        raise AnswerError("expiresAt is not a time")
    if not 0 < expires < _LATEST_EXPIRY:
        raise AnswerError("expiresAt is not a time")
    return TokenAnswer(token, float(expires))


def api_name(service: str) -> str:
    return "ECR Public" if service == "ecr-public" else "ECR"


def failure(service: str, region: str, exc: CredproviderError) -> ProviderError:
    """The one sentence for a failed call, whichever adapter made it."""
    name = api_name(service)
    if isinstance(exc, NoCredentials):
        return ProviderError(NO_CREDENTIALS_HINT)
    if isinstance(exc, ProviderError):  # a node file the call needs (a CA bundle, a token file)
        return ProviderError(f"{name} GetAuthorizationToken in {region} failed: {exc}")
    if isinstance(exc, SettingsError):
        return ProviderError(
            f"{name} GetAuthorizationToken in {region} failed: {exc}", SETTINGS_FIX
        )
    if isinstance(exc, ApiError):
        return _rejected(service, region, exc.code, exc.message)
    if isinstance(exc, TransportError) and exc.via:
        return ProviderError(
            f"{name} GetAuthorizationToken in {region} failed: the credentials the AWS settings "
            f"lead to could not be fetched from {exc.via}: {exc}",
            unreachable_url(exc.via),
        )
    if isinstance(exc, TransportError):
        return ProviderError(
            f"could not reach the {name} API in {region}: {exc}; check network access, proxy "
            "(HTTPS_PROXY) and VPC endpoints from this node"
        )
    if isinstance(exc, AnswerError):
        return unusable(service, region, str(exc))
    if isinstance(exc, BadAnswer):  # ECR's answer, or a credential source's on the way to it
        return ProviderError(
            f"{name} GetAuthorizationToken in {region} failed: {exc.detail}", NOT_THE_SERVICE
        )
    return ProviderError(
        f"{name} GetAuthorizationToken in {region} failed: {exc}", RETRIES_NEXT_PULL
    )


def unusable(service: str, region: str, detail: str) -> ProviderError:
    return ProviderError(
        f"{service} GetAuthorizationToken in {region} returned an unusable answer: {detail}",
        NOT_THE_SERVICE,
    )


def _rejected(service: str, region: str, code: str, message: str) -> ProviderError:
    """The API's own error answer, with what to do about it."""
    hint = ""
    if "AccessDenied" in code or "UnrecognizedClient" in code or "ExpiredToken" in code:
        hint = (
            "; the identity needs ecr-public:GetAuthorizationToken and sts:GetServiceBearerToken"
            if service == "ecr-public"
            else "; the identity needs ecr:GetAuthorizationToken"
        )
    elif code in THROTTLE_CODES or "Throttl" in code:
        from credprovider.runtime.retry import THROTTLED_TO_THE_END

        hint = f"; {THROTTLED_TO_THE_END}"
    elif code == "ServerException" or (code.isdigit() and code.startswith("5")):
        hint = f"; {RETRIES_NEXT_PULL}"
    return ProviderError(
        f"{api_name(service)} GetAuthorizationToken in {region} failed: {code}: {message}{hint}"
    )

"""ECR ``GetAuthorizationToken`` with the standard library, for the common node case.

botocore's import and client creation are most of an ECR cache miss. A node usually has its
credentials in env keys or from the instance role (IMDSv2), no profile files and no proxy; then the
call is one SigV4-signed JSON POST, done here as the GCE metadata and Azure IMDS paths already are.
:func:`plan` decides, from the environment only, whether this path applies; anything else (profile
files, web identity, container credentials, assumed roles, FIPS/dual-stack settings, proxies, an
unknown partition) returns the reason and goes through botocore, and so does a failed IMDS exchange.
TLS is verified against ``AWS_CA_BUNDLE`` when set, else certifi's bundle, as botocore does.

:class:`StdlibTokenApi` is this route's adapter of :mod:`credprovider.aws.tokenapi`: errors,
retries and the answer's reading are that seam's, shared with botocore (``standard`` mode).
"""

from __future__ import annotations

import re

from credprovider.aws.sigv4 import AccessKeys, sign_post
from credprovider.aws.tokenapi import (
    MAX_ATTEMPTS,
    AnswerError,
    ApiError,
    TokenAnswer,
    TransportError,
    read_answer,
    throttle_of,
    transient,
)
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple
from credprovider.runtime.answer import BadAnswer, decode_json
from credprovider.runtime.http import proxy_setting

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Mapping

    from credprovider.runtime.http import HttpResponse, Send
    from credprovider.runtime.provider import Context
    from credprovider.runtime.retry import Throttle

# botocore's partitions.json: (id, regionRegex, dnsSuffix). A region matching none goes to botocore.
PARTITIONS: Final = (
    ("aws", r"(us|eu|ap|sa|ca|me|af|il|mx)\-\w+\-\d+", "amazonaws.com"),
    ("aws-cn", r"cn\-\w+\-\d+", "amazonaws.com.cn"),
    ("aws-eusc", r"eusc\-(de)\-\w+\-\d+", "amazonaws.eu"),
    ("aws-iso", r"us\-iso\-\w+\-\d+", "c2s.ic.gov"),
    ("aws-iso-b", r"us\-isob\-\w+\-\d+", "sc2s.sgov.gov"),
    ("aws-iso-e", r"eu\-isoe\-\w+\-\d+", "cloud.adc-e.uk"),
    ("aws-iso-f", r"us\-isof\-\w+\-\d+", "csp.hci.ic.gov"),
    ("aws-us-gov", r"us\-gov\-\w+\-\d+", "amazonaws.com"),
)
# The operation, per service (the services' JSON 1.1 target prefixes).
TARGETS: Final = {
    "ecr": "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken",
    "ecr-public": "SpencerFrontendService.GetAuthorizationToken",
}
ENDPOINT_ENV: Final = {"ecr": "AWS_ENDPOINT_URL_ECR", "ecr-public": "AWS_ENDPOINT_URL_ECR_PUBLIC"}
# The profile files botocore parses: the variable naming each, its default under the home
# directory, and what it is (botocore/configprovider.py: config_file, credentials_file).
PROFILE_FILES: Final = (
    ("AWS_CONFIG_FILE", ".aws/config", "the AWS config file"),
    ("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials", "the AWS credentials file"),
)
# Any of these set: botocore, which implements them.
BOTOCORE_SETTINGS: Final = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CREDENTIAL_EXPIRATION",
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
)
IMDS_DEFAULT: Final = "http://169.254.169.254/"
IMDS_TOKEN_TTL: Final = "21600"
IMDS_TOKEN_PATH: Final = "latest/api/token"
IMDS_TTL_HEADER: Final = "X-aws-ec2-metadata-token-ttl-seconds"
IMDS_TIMEOUT_SECONDS: Final = 1.0  # botocore's default metadata timeout
# Why IMDS gives a node no token, and the fix (said at -v=1: botocore only says it at debug level).
IMDS_FIX: Final = (
    "check that the instance metadata service is enabled with an instance profile attached; behind "
    "a container, its IMDSv2 hop limit must be 2 or more (aws ec2 modify-instance-metadata-options "
    "--http-put-response-hop-limit 2 --http-endpoint enabled)"
)
RETRY_STATUSES: Final = frozenset({500, 502, 503, 504})
_HOST_LABEL: Final = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"


class DirectRoute(NamedTuple):
    """How to call ``service`` in ``region`` without botocore."""

    service: str
    region: str
    endpoint: str  # https://host/ (or an http:// override, as tests use)
    keys: AccessKeys | None  # None: the instance role, through IMDSv2
    imds: str  # the metadata endpoint, for keys=None
    ca_bundle: str = ""  # AWS_CA_BUNDLE, as botocore reads it; else certifi's


def endpoint_for(service: str, region: str) -> str | None:
    """``https://api.<service>.<region>.<dnsSuffix>/``, or ``None`` for a region of no known partition."""
    if not re.fullmatch(_HOST_LABEL, region):
        return None
    for _, pattern, suffix in PARTITIONS:
        if re.fullmatch(pattern, region):
            return f"https://api.{service}.{region}.{suffix}/"
    return None


def _is_set(environ: Mapping[str, str], name: str) -> bool:
    return bool(environ.get(name, "").strip())


def plan(
    environ: Mapping[str, str], service: str, region: str, exists: Callable[[str], bool]
) -> DirectRoute | str:
    """The stdlib route for this environment, or why botocore must do it (``exists`` checks a path)."""
    for name in BOTOCORE_SETTINGS:
        if _is_set(environ, name):
            return f"{name} is set"
    proxy = proxy_setting(environ)  # botocore honours it (and NO_PROXY); this client never proxies
    if proxy:
        return f"{proxy} is set"
    home = environ.get("HOME", "")
    for variable, default, _ in PROFILE_FILES:
        path = environ.get(variable) or f"{home}/{default}"
        if exists(path):
            return f"the profile file {path} exists"
    endpoint = (
        environ.get(ENDPOINT_ENV[service], "").strip()
        or environ.get("AWS_ENDPOINT_URL", "").strip()
        or endpoint_for(service, region)
    )
    if not endpoint:
        return f"no known partition for the region {region!r}"
    if not endpoint.endswith("/"):
        endpoint += "/"
    ca_bundle = environ.get("AWS_CA_BUNDLE", "").strip()
    access_key = environ.get("AWS_ACCESS_KEY_ID", "")
    secret_key = environ.get("AWS_SECRET_ACCESS_KEY", "")
    if access_key or secret_key:
        if not (access_key and secret_key):
            return "only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is set"
        token = environ.get("AWS_SESSION_TOKEN") or environ.get("AWS_SECURITY_TOKEN") or ""
        keys = AccessKeys(access_key, secret_key, token)
        return DirectRoute(service, region, endpoint, keys, "", ca_bundle)
    if environ.get("AWS_EC2_METADATA_DISABLED", "").strip().lower() == "true":
        return "AWS_EC2_METADATA_DISABLED is true"
    return DirectRoute(service, region, endpoint, None, imds_endpoint(environ), ca_bundle)


def imds_endpoint(environ: Mapping[str, str]) -> str:
    """IMDS's base URL (ending in ``/``), as botocore finds it."""
    imds = environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT", "").strip() or IMDS_DEFAULT
    return imds if imds.endswith("/") else imds + "/"


# --- the instance role, through IMDSv2 -------------------------------------------------------------


def parse_role_credentials(body: bytes) -> AccessKeys | None:
    """The keys in IMDS's ``security-credentials/<role>`` answer, or ``None`` if there are none
    (:class:`BadAnswer` for an answer past a cap: botocore would only read it again)."""
    try:
        answer = decode_json(body)
    except BadAnswer:
        raise
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("Code", "Success") != "Success":
        return None
    access_key, secret_key, token = (
        answer.get(name) for name in ("AccessKeyId", "SecretAccessKey", "Token")
    )
    if not (isinstance(access_key, str) and isinstance(secret_key, str)):
        return None
    if not (access_key and secret_key and isinstance(token, str) and token):
        return None
    return AccessKeys(access_key, secret_key, token)


def instance_role_keys(imds: str, ctx: Context) -> AccessKeys | None:
    """The instance role's keys through IMDSv2, or ``None`` (botocore then tries, with its fallbacks)."""
    from credprovider.runtime.http import HttpError, request
    from credprovider.runtime.redact import register_secret

    timeout = ctx.deadline.timeout(IMDS_TIMEOUT_SECONDS)
    ctx.log.v(4, f"PUT {imds}{IMDS_TOKEN_PATH}, then GET the instance role's keys (IMDSv2)")
    try:
        answer = request(
            "PUT",
            f"{imds}{IMDS_TOKEN_PATH}",
            headers={IMDS_TTL_HEADER: IMDS_TOKEN_TTL},
            timeout=timeout,
        )
        if answer.status != 200 or not answer.body:
            ctx.log.v(
                1,
                f"IMDS refused the IMDSv2 token (HTTP {answer.status}): {IMDS_FIX}; handing over "
                "to botocore",
            )
            return None
        token = answer.text()
        register_secret(token)
        listing = request(
            "GET",
            f"{imds}latest/meta-data/iam/security-credentials/",
            headers={"X-aws-ec2-metadata-token": token},
            timeout=timeout,
        )
        role = listing.text().strip().split("\n")[0].strip()
        if listing.status != 200 or not role or "/" in role:
            ctx.log.v(
                1,
                f"IMDS lists no instance role (HTTP {listing.status}): attach an instance profile "
                "to the node; handing over to botocore",
            )
            return None
        ctx.deadline.phase = f"reading the instance role {role} from IMDS"
        answer = request(
            "GET",
            f"{imds}latest/meta-data/iam/security-credentials/{role}",
            headers={"X-aws-ec2-metadata-token": token},
            timeout=timeout,
        )
    except HttpError as exc:
        ctx.log.v(1, f"IMDS did not answer ({exc}): {IMDS_FIX}; handing over to botocore")
        return None
    try:
        keys = parse_role_credentials(answer.body) if answer.status == 200 else None
    except BadAnswer as exc:
        raise exc.at(f"{imds}latest/meta-data/iam/security-credentials/{role}") from None
    if keys is not None:
        register_secret(keys.secret_key)
        register_secret(keys.session_token)
        ctx.log.v(1, f"credentials: the instance role {role}, from IMDSv2")
    return keys


# --- the call --------------------------------------------------------------------------------------


def parse_error(status: int, body: bytes, retry_after: str | None = None) -> ApiError:
    """An error answer as botocore reads it: ``__type`` after its ``#``, else the HTTP status;
    ``retry_after``: the answer's Retry-After header, kept with it."""
    try:
        answer = decode_json(body)
    except ValueError:  # not JSON, or past a cap: the status says what there is to say
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("__type"), str):
        code = answer["__type"].rsplit("#", 1)[-1]
        message = answer.get("message", answer.get("Message", ""))
        return ApiError(code, message if isinstance(message, str) else "", retry_after)
    from http import HTTPStatus  # the phrases http.client.responses has, without http.client

    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return ApiError(str(status), phrase, retry_after)


def parse_token_answer(service: str, body: bytes) -> TokenAnswer:
    """A 200 answer's body, read by the seam's one parser; raises AnswerError (BadAnswer for an
    answer past a cap)."""
    try:
        answer = decode_json(body)
    except BadAnswer:
        raise
    except ValueError:
        raise AnswerError("the response is not JSON") from None
    return read_answer(service, answer)


class StdlibTokenApi:
    """The stdlib adapter: one signed POST with ``keys`` along ``route``."""

    def __init__(self, route: DirectRoute, keys: AccessKeys, ctx: Context, user_agent: str) -> None:
        self.route, self.keys, self.ctx, self.user_agent = route, keys, ctx, user_agent

    def get_authorization_token(self) -> TokenAnswer:
        return get_authorization_token(self.route, self.keys, self.ctx, self.user_agent)


def get_authorization_token(
    route: DirectRoute, keys: AccessKeys, ctx: Context, user_agent: str
) -> TokenAnswer:
    """One signed ``GetAuthorizationToken`` (retried as botocore's standard mode does)."""
    from credprovider.runtime.http import HttpError, exchange
    from credprovider.runtime.tls import verified_context

    ctx.log.v(4, f"POST {route.endpoint} ({TARGETS[route.service]}, region {route.region})")
    try:
        tls = (
            verified_context(route.ca_bundle, "AWS_CA_BUNDLE")
            if route.endpoint.startswith("https://")
            else None
        )
    except OSError as exc:
        raise TransportError(f"cannot read the CA bundle {route.ca_bundle}: {exc}") from None
    try:
        answer = exchange(
            ctx,
            "POST",
            route.endpoint,
            what=f"{route.service} GetAuthorizationToken",
            headers={
                "X-Amz-Target": TARGETS[route.service],
                "Content-Type": "application/x-amz-json-1.1",
                "User-Agent": user_agent,
            },
            body=b"{}",
            send=_signing(route, keys, ctx, tls),
            retry_answer=_worth_another_attempt,
            attempts=MAX_ATTEMPTS,
            throttled_answer=_throttled,
        )
    except HttpError as exc:
        raise TransportError(f"{route.endpoint}: {exc}") from None
    if answer.status != 200:
        raise parse_error(answer.status, answer.body)
    return parse_token_answer(route.service, answer.body)


def _signing(
    route: DirectRoute, keys: AccessKeys, ctx: Context, tls: ssl.SSLContext | None
) -> Send:
    """The stdlib client, each attempt signed afresh (SigV4 dates the signature)."""
    from credprovider.runtime.advice import url_host
    from credprovider.runtime.http import request

    def send(
        method: str, url: str, headers: Mapping[str, str], body: bytes | None, timeout: float
    ) -> HttpResponse:
        signed = sign_post(
            host=url_host(url),
            headers=dict(headers),
            body=body or b"",
            keys=keys,
            region=route.region,
            service=route.service,
            now=ctx.now(),
        )
        return request(method, url, headers=signed, body=body, timeout=timeout, tls=tls)

    return send


def _worth_another_attempt(answer: HttpResponse) -> bool:
    """Server errors are retried, as botocore's standard mode does."""
    return answer.status in RETRY_STATUSES or (
        answer.status != 200 and transient(parse_error(answer.status, answer.body))
    )


def _throttled(answer: HttpResponse) -> Throttle | None:
    """The API asking to slow down (HTTP 400 with a throttling code, or a 429)."""
    from credprovider.runtime.http import throttled

    if answer.status in (200, *RETRY_STATUSES):
        return throttled(answer)
    error = parse_error(answer.status, answer.body, answer.header("retry-after"))
    return throttle_of(error) or throttled(answer)

"""The adapter to google-auth: every call into it (imported lazily, only when a token other than
the metadata server's plain one is fetched) and the errors it raises, worded as one line each. The
metadata server's common path stays on the stdlib client (:mod:`credprovider.gcp.metadata`)."""

from __future__ import annotations

from credprovider.errors import CredproviderError, ProviderError
from credprovider.gcp.impersonation import (
    DELEGATE_PREFIX,
    IAM_CREDENTIALS_API,
    LIFETIME_SECONDS,
    Chain,
    Refused,
)
from credprovider.gcp.registry import (
    CLOUD_PLATFORM_SCOPE,
    CREDENTIALS_FILE_ENV,
    STS_GRANT_TYPE,
    STS_REQUESTED_TOKEN_TYPE,
    STS_SUBJECT_TOKEN_TYPE,
)
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final, NamedTuple
from credprovider.runtime.advice import (
    NOT_THE_SERVICE,
    transport_reason,
    unreachable,
    unreachable_url,
)
from credprovider.runtime.answer import BadAnswer
from credprovider.runtime.provider import Context, one_line
from credprovider.runtime.redact import register_secret

if TYPE_CHECKING:
    import datetime
    from collections.abc import Callable, Mapping

    from credprovider.runtime._typing import TypeVar

    T = TypeVar("T")

# The metadata server's root certificate and client key are a few KiB each.
MAX_MTLS_FILE_BYTES: Final = 1 << 20
# Who a metadata-server token is of, until its email is asked for (only to word a failure).
NODE_ACCOUNT: Final = "the VM's default service account"


class Token(NamedTuple):
    value: str
    expires_at: float | None
    who: str = NODE_ACCOUNT  # the identity the token is of, for a line naming it


class Throttled(CredproviderError):  # a signal between the transport and the retry loop
    """A Google endpoint said "slow down" (HTTP 429, or 503 with Retry-After): raised by the
    transport before google-auth sees the answer, so that google-auth's own retries never
    multiply a throttled call; :func:`within_throttling` retries it over the deadline."""

    def __init__(self, status: int, retry_after: float | None) -> None:
        super().__init__(status)
        self.status = status
        self.retry_after = retry_after


def within_throttling(call: Callable[[], T], what: str, head: str, ctx: Context) -> T:
    """``call()`` (one google-auth call through :func:`google_auth_request`), retried when
    throttled as every route is (runtime/retry.py); throttled to the deadline: one line,
    ``head`` first. Any other failure is ``call``'s own, raised once."""
    from credprovider.runtime.retry import THROTTLED_TO_THE_END, Throttle, call_with_retries

    def throttled(exc: Exception) -> Throttle | None:
        return Throttle(exc.retry_after) if isinstance(exc, Throttled) else None

    try:
        return call_with_retries(call, ctx=ctx, what=what, attempts=1, throttled_error=throttled)
    except Throttled as exc:
        raise ProviderError(
            f"{head}: HTTP {exc.status} (throttled); {THROTTLED_TO_THE_END}"
        ) from None


def google_auth_request(ctx: Context) -> Any:
    """A google-auth requests transport whose per-call timeout never passes the deadline, whose
    answers are read under the caps (:mod:`credprovider.runtime.requests_session`) and whose CA
    bundle, if one is named, is checked first. A throttled answer raises :class:`Throttled`: every
    call through it runs inside :func:`within_throttling`."""
    from google.auth.transport.requests import Request

    from credprovider.runtime.requests_session import bounded_session
    from credprovider.runtime.tls import REQUESTS_CA_BUNDLE_ENV, require_usable_ca_bundle

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
            from credprovider.runtime.retry import throttle_of

            cap = ctx.deadline.timeout(10.0 if timeout is None else float(timeout))
            ctx.log.v(4, f"{method} {url.split('?')[0]}")
            response = super().__call__(
                url, method=method, body=body, headers=headers, timeout=cap, **kwargs
            )
            throttle = throttle_of(response.status, response.headers.get("Retry-After"))
            if throttle is not None:
                raise Throttled(response.status, throttle.retry_after)
            return response

    return DeadlineRequest(session=bounded_session(ctx.deadline.remaining))


def metadata_get(ctx: Context, path: str, what: str) -> Any:
    """``what`` from the metadata server's ``path``: through the stdlib client, or through
    google-auth's when the node asks for mTLS (GCE_METADATA_MTLS_MODE)."""
    from credprovider.gcp import metadata  # not on a cache hit

    if not metadata.wants_mtls(ctx.environ):
        return metadata.get(ctx, path, what)
    metadata.require_mtls_mode(ctx.environ)
    _require_mtls_files(ctx.environ)
    from google.auth import exceptions
    from google.auth.compute_engine import _metadata

    ctx.deadline.phase = f"reading {what} from the GCE metadata server over mTLS"
    failed = f"could not read {what} from the GCE metadata server over mTLS"
    try:
        return within_throttling(
            lambda: _metadata.get(
                google_auth_request(ctx),
                path,
                retry_count=metadata.METADATA_ATTEMPTS,
                timeout=ctx.deadline.timeout(metadata.PER_CALL_TIMEOUT_SECONDS),
            ),
            f"metadata {path}",
            failed,
            ctx,
        )
    except BadAnswer as exc:
        raise ProviderError(f"{failed}: {exc.detail}", NOT_THE_SERVICE) from None
    except exceptions.TransportError as exc:
        advice = metadata.not_reached(exc, "the GCE metadata server")
        raise ProviderError(f"{failed}: {transport_reason(exc)}", advice) from None
    except (exceptions.GoogleAuthError, ValueError) as exc:
        raise ProviderError(f"{failed}: {one_line(exc)}") from None


def _require_mtls_files(environ: Mapping[str, str]) -> None:
    """The metadata server's mTLS files that are there, checked before OpenSSL loads them as
    every file on the exec path is (a FIFO would hold it to the deadline); one that is not there
    is google-auth's to say, as its mode wants."""
    import os

    from credprovider.gcp.metadata import MTLS_CERTIFICATES, MTLS_MODE_ENV
    from credprovider.runtime.nodefile import reason, require_node_file

    for file in MTLS_CERTIFICATES:
        if not os.path.lexists(file):
            continue
        try:
            require_node_file(file, MAX_MTLS_FILE_BYTES)
        except (OSError, ValueError) as exc:
            from credprovider.runtime.excerpt import QUOTE_LIMIT, clip

            mode = clip(environ.get(MTLS_MODE_ENV, ""), QUOTE_LIMIT)
            raise ProviderError(
                f"the metadata server's mTLS file {file} ({MTLS_MODE_ENV}={mode}) cannot be used: "
                f"{reason(exc)}",
                f"fix it (the guest agent writes it) or set {MTLS_MODE_ENV}=none",
            ) from None


def expiry_timestamp(expiry: datetime.datetime | None) -> float | None:
    import datetime

    if expiry is None:
        return None
    if expiry.tzinfo is None:  # google-auth keeps naive UTC datetimes
        expiry = expiry.replace(tzinfo=datetime.UTC)
    return expiry.timestamp()


def token_from_answer(token: str, answer: dict[str, Any], ctx: Context) -> Token:
    """An OAuth answer's token (now a secret), expiring ``expires_in`` seconds from now when the
    answer says (the metadata server and STS both do)."""
    register_secret(token)
    expires_in = answer.get("expires_in")
    expires_at = ctx.now() + float(expires_in) if isinstance(expires_in, int | float) else None
    return Token(token, expires_at)


def credentials_from_file(path: str, ctx: Context) -> Any:
    """google-auth's credentials from GOOGLE_APPLICATION_CREDENTIALS, nothing fetched (what the
    plugin's start check proves too), or :class:`ProviderError` saying what is wrong with it."""
    from credprovider.gcp.credfile import load_credentials_file

    try:
        return load_credentials_file(path, ctx.deadline.remaining)
    except OSError as exc:
        raise ProviderError(f"{CREDENTIALS_FILE_ENV}={path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ProviderError(f"{CREDENTIALS_FILE_ENV}={path}: {one_line(exc)}") from None


def credentials_file_token(path: str, ctx: Context) -> Token:
    """A token from GOOGLE_APPLICATION_CREDENTIALS (service-account key or external account)."""
    from google.auth import exceptions

    ctx.deadline.phase = f"getting a token with the credentials in {path}"
    credentials = credentials_from_file(path, ctx)
    ctx.log.v(1, f"using {type(credentials).__module__} credentials from {path}")
    failed = f"could not get a token with the credentials in {path}"
    try:
        within_throttling(
            lambda: credentials.refresh(google_auth_request(ctx)), "token request", failed, ctx
        )
    except BadAnswer as exc:
        raise ProviderError(f"{failed}: {exc.detail}", NOT_THE_SERVICE) from None
    except exceptions.TransportError as exc:
        raise ProviderError(
            f"{failed}: {transport_reason(exc)}",
            unreachable(f"the token endpoint {path} names"),
        ) from None
    except (exceptions.GoogleAuthError, ValueError) as exc:
        raise ProviderError(f"{failed}: {one_line(exc)}") from None
    if not credentials.token:
        raise ProviderError(f"the credentials in {path} produced no access token")
    register_secret(credentials.token)
    email = getattr(credentials, "service_account_email", None)
    who = f"{email} (the credentials in {path})" if email else f"the credentials in {path}"
    return Token(credentials.token, expiry_timestamp(credentials.expiry), who)


def workload_identity_token(
    subject_token: str, audience: str, endpoint: str, ctx: Context
) -> Token:
    """Exchange the pod's service-account token for a federated access token at Google STS."""
    from google.auth import exceptions
    from google.oauth2 import sts

    ctx.deadline.phase = f"exchanging the service account token at {endpoint}"
    ctx.log.v(1, f"Workload Identity: exchanging the service account token for audience {audience}")
    try:
        answer = within_throttling(
            lambda: sts.Client(endpoint).exchange_token(
                google_auth_request(ctx),
                grant_type=STS_GRANT_TYPE,
                subject_token=subject_token,
                subject_token_type=STS_SUBJECT_TOKEN_TYPE,
                audience=audience,
                scopes=[CLOUD_PLATFORM_SCOPE],
                requested_token_type=STS_REQUESTED_TOKEN_TYPE,
            ),
            "STS token exchange",
            f"Workload Identity token exchange at {endpoint} failed",
            ctx,
        )
    except BadAnswer as exc:
        raise ProviderError(
            f"Workload Identity token exchange failed: {exc.detail}",
            NOT_THE_SERVICE,
        ) from None
    except (exceptions.GoogleAuthError, ValueError) as exc:
        reached = not isinstance(exc, exceptions.TransportError)
        raise ProviderError(
            f"Workload Identity token exchange at {endpoint} failed for a service "
            f"account that opted in (no fallback to the node identity): "
            f"{one_line(exc) if reached else transport_reason(exc)}",
            None if reached else unreachable_url(endpoint),
        ) from None
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str) or not token:
        raise ProviderError(f"{endpoint} answered without an access_token")
    return token_from_answer(token, answer, ctx)._replace(
        who="the pod's service account through Workload Identity"
    )


def impersonate(
    source_token: str,
    source: str,
    chain: Chain,
    ctx: Context,
) -> Token:
    """``generateAccessToken`` for ``chain.target`` with ``source_token``, through google-auth's
    impersonated credentials. ``request`` is a google-auth transport. Raises :class:`Refused` for the API's own
    refusal, :class:`ProviderError` (the line) for anything else."""
    from google.auth import exceptions, impersonated_credentials
    from google.oauth2.credentials import Credentials

    transport = google_auth_request(ctx)
    statuses: list[int] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        response = transport(*args, **kwargs)
        statuses.append(int(response.status))
        return response

    credentials = impersonated_credentials.Credentials(
        source_credentials=Credentials(token=source_token),
        target_principal=chain.target,
        target_scopes=[CLOUD_PLATFORM_SCOPE],
        delegates=[f"{DELEGATE_PREFIX}{delegate}" for delegate in chain.delegates],
        lifetime=LIFETIME_SECONDS,
    )
    head = f"cannot impersonate {chain.target} as {source}"
    try:
        within_throttling(
            lambda: credentials.refresh(recording), "generateAccessToken", f"{head}", ctx
        )
    except BadAnswer as exc:
        raise ProviderError(
            f"{head} at the IAM Credentials API: {exc.detail}", NOT_THE_SERVICE
        ) from None
    except TypeError:  # an expireTime that is not a string: google-auth's strptime raises this
        raise ProviderError(
            f"{head}: the IAM Credentials API answered without a usable accessToken and expireTime",
            NOT_THE_SERVICE,
        ) from None
    except exceptions.RefreshError as exc:
        body = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], str) else ""
        if statuses and statuses[-1] == 200:
            raise ProviderError(
                f"{head}: the IAM Credentials API answered without a usable accessToken and "
                "expireTime",
                NOT_THE_SERVICE,
            ) from None
        raise Refused(statuses[-1] if statuses else 0, body) from None
    except exceptions.TransportError as exc:
        raise ProviderError(
            f"{head}: could not reach {IAM_CREDENTIALS_API}: {transport_reason(exc)}",
            unreachable(IAM_CREDENTIALS_API),
        ) from None
    except (exceptions.GoogleAuthError, ValueError) as exc:
        raise ProviderError(f"{head}: {one_line(exc)}") from None
    if not isinstance(credentials.token, str) or not credentials.token:
        raise ProviderError(
            f"{head}: the IAM Credentials API answered without a usable accessToken (a "
            "non-empty string)",
            NOT_THE_SERVICE,
        )
    register_secret(credentials.token)
    return Token(credentials.token, expiry_timestamp(credentials.expiry), chain.target)


def download(url: str, what: str, ctx: Context) -> str:
    """The text at ``url`` (an http(s) URL), through the bounded transport; ``what`` names it in
    the failure line."""
    from google.auth import exceptions

    ctx.deadline.phase = f"downloading {what} from {url}"
    failed = f"could not download {what} from {url}"
    try:
        response = within_throttling(
            lambda: google_auth_request(ctx)(url, method="GET"), f"download of {what}", failed, ctx
        )
    except BadAnswer as exc:
        raise ProviderError(f"{failed}: {exc.detail}", NOT_THE_SERVICE) from None
    except exceptions.TransportError as exc:
        raise ProviderError(f"{failed}: {transport_reason(exc)}", unreachable_url(url)) from None
    except exceptions.GoogleAuthError as exc:
        raise ProviderError(f"{failed}: {one_line(exc)}") from None
    if response.status != 200:
        raise ProviderError(f"downloading {what} from {url} failed with HTTP {response.status}")
    text: str = response.data.decode("utf-8", "replace")
    return text

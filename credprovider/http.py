"""A small stdlib HTTP client for the calls a plugin makes itself (metadata servers, the ECR API).

``http.client`` costs a few milliseconds to import where an SDK's transport stack (requests, urllib3
and the cryptography it pulls in) costs 100 ms or more per exec. ``http://`` is for the link-local
metadata servers; ``https://`` only when the caller passes the TLS context (certificate checks on),
and never through a proxy: callers leave proxied setups to the SDKs. No redirect is followed, every
call has a timeout and the body read is capped.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from credprovider._typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    import ssl

    from credprovider.plugin import Context

MAX_BODY_BYTES: Final = 1 << 20
# Any of these set means a proxy may be wanted: this client never uses one, so callers hand such
# setups to the SDK (requests, botocore), which honours them with NO_PROXY.
PROXY_ENV: Final = (
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
)


class HttpError(OSError):
    """The exchange itself failed: bad URL, connection, timeout, protocol or oversized body."""


class BodyTooLargeError(HttpError):
    """The answer is larger than the cap: not worth retrying."""


class HttpResponse(NamedTuple):
    """A complete answer: status, headers (lower-cased names; the last of a repeated one) and
    body, and every header field in order (``fields``) for a header that may repeat."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    fields: tuple[tuple[str, str], ...] = ()

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")

    def header_values(self, name: str) -> list[str]:
        wanted = name.lower()
        return [value for field, value in self.fields if field.lower() == wanted]

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def split_http_url(url: str, *, allow_https: bool = False) -> tuple[str, str, str]:
    """``http://host[:port]/path?query`` -> (``http``, ``host[:port]``, ``/path?query``)."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in (("http", "https") if allow_https else ("http",)):
        kinds = "http:// and https://" if allow_https else "http://"
        raise HttpError(f"only {kinds} URLs are supported here, not {url!r}")
    authority, slash, path = rest.partition("/")
    if not authority or "@" in authority:
        raise HttpError(f"{url!r} has no usable host")
    return scheme, authority, slash + path


def request(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    body: bytes | None = None,
    tls: ssl.SSLContext | None = None,
    max_body: int = MAX_BODY_BYTES,
) -> HttpResponse:
    """One request on a fresh connection; raises :class:`HttpError` when no full answer arrives.

    ``https://`` URLs need ``tls`` (the caller's verified context); ``http://`` ones never use it.
    """
    import http.client

    scheme, authority, target = split_http_url(url, allow_https=tls is not None)
    connection = (
        http.client.HTTPSConnection(authority, timeout=timeout, context=tls)
        if scheme == "https"
        else http.client.HTTPConnection(authority, timeout=timeout)
    )
    try:
        connection.request(method, target, body=body, headers=dict(headers))
        response = connection.getresponse()
        data = response.read(max_body + 1)
        if len(data) > max_body:
            raise BodyTooLargeError(f"the answer from {url} is larger than {max_body} bytes")
        fields = tuple(response.getheaders())
        return HttpResponse(
            response.status, {name.lower(): value for name, value in fields}, data, fields
        )
    except HttpError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as exc:
        # ValueError: http.client's own checks (invalid port, control characters in the URL).
        raise HttpError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc
    finally:
        connection.close()


def proxy_setting(environ: Mapping[str, str]) -> str | None:
    """The name of the first proxy variable that is set, if any (see :data:`PROXY_ENV`)."""
    return next((name for name in PROXY_ENV if environ.get(name)), None)


def verified_context(ca_bundle: str = "") -> ssl.SSLContext:
    """Certificate and host name checks against ``ca_bundle``, else certifi's bundle (as botocore
    and requests do)."""
    import ssl

    if not ca_bundle:
        import certifi

        ca_bundle = certifi.where()
    return ssl.create_default_context(cafile=ca_bundle)


def get(
    url: str,
    *,
    headers: Mapping[str, str],
    timeout: float,
    max_body: int = MAX_BODY_BYTES,
) -> HttpResponse:
    """One plain-HTTP ``GET`` (see :func:`request`)."""
    return request("GET", url, headers=headers, timeout=timeout, max_body=max_body)


def get_with_retries(
    ctx: Context,
    url: str,
    *,
    headers: Mapping[str, str],
    what: str,
    timeout_cap: float,
    retry_statuses: Collection[int],
    attempts: int,
) -> HttpResponse:
    """:func:`get`, retried (bounded, never past the deadline) on an answer with a status in
    ``retry_statuses`` or a failed exchange; an oversized body is not retried.

    Returns the last answer, whatever its status; raises :class:`HttpError` if no answer came.
    """
    from credprovider.retry import call_with_retries

    return call_with_retries(
        lambda: get(url, headers=headers, timeout=ctx.deadline.timeout(timeout_cap)),
        ctx=ctx,
        what=what,
        retry_result=lambda answer: answer.status in retry_statuses,
        retry_error=lambda error: (
            isinstance(error, HttpError) and not isinstance(error, BodyTooLargeError)
        ),
        attempts=attempts,
    )

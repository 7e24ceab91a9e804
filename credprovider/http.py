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


class HttpError(OSError):
    """The exchange itself failed: bad URL, connection, timeout, protocol or oversized body."""


class BodyTooLargeError(HttpError):
    """The answer is larger than the cap: not worth retrying."""


class HttpResponse(NamedTuple):
    """A complete answer: status, headers (lower-cased names) and body."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")

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
        return HttpResponse(
            response.status, {name.lower(): value for name, value in response.getheaders()}, data
        )
    except HttpError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as exc:
        # ValueError: http.client's own checks (invalid port, control characters in the URL).
        raise HttpError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc
    finally:
        connection.close()


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

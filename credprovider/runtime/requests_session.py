"""The requests session every SDK call over requests goes through (google-auth, azure-identity's
pipeline, the ACR exchange behind a proxy), its answers held to the caps of
:mod:`credprovider.runtime.answer`.

requests reads a body only after its ``response`` hooks have run: the hook here reads it first,
in blocks, under the size cap and the deadline, undoes a gzip or deflate encoding under the same
cap, checks JSON for depth and numbers, and hands requests the bytes it read. A redirect is refused
(no token endpoint sends one: following it would hand the request, or take a token, elsewhere). A
body past a cap, or a redirect, is :class:`~credprovider.runtime.answer.BadAnswer`, naming the URL;
the SDK's parser never sees it.

requests also reads ``~/.netrc`` (or ``$NETRC``) before every request that carries no auth of its
own, whole and blocking (a FIFO there held the plugin to its deadline), and puts the password it
finds for the host in an ``Authorization`` header, over the one the SDK set (the IAM Credentials
API's bearer token). The session's own auth, which leaves a request as it is, keeps netrc out; the
proxy and CA bundle settings requests takes from the environment are kept (``trust_env``). The Go
plugins read no netrc either.
Imported only when such an SDK is.
"""

from __future__ import annotations

import io

from credprovider.runtime._typing import TYPE_CHECKING, Any
from credprovider.runtime.answer import READ_BLOCK_BYTES, BadAnswer, sdk_body

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import requests

    from credprovider.runtime.http import HttpResponse, Send
    from credprovider.runtime.provider import Context


def _as_it_is(request: Any) -> Any:
    """The session's auth: none added (so requests never looks for a netrc)."""
    return request


class _Read(io.BytesIO):
    """The body as read, where requests (and azure-core) look for the raw stream: ``read`` for
    requests, ``headers`` for a header that repeats, and room for attributes azure-core sets."""

    def __init__(self, data: bytes, headers: Any) -> None:
        super().__init__(data)
        self.headers = headers


def bounded_session(remaining: Callable[[], float]) -> requests.Session:
    """A session asking for ``identity`` encoding whose every answer is read under the caps, the
    read stopping when ``remaining`` (seconds to the deadline) reaches 0."""
    import requests

    def read_under_caps(response: requests.Response, *args: Any, **kwargs: Any) -> Any:
        raw = response.raw
        if response.is_redirect:  # a token endpoint never redirects: the token would go elsewhere
            raw.close()
            target = str(response.headers.get("Location", ""))[:200]
            raise BadAnswer(
                f"is a redirect (HTTP {response.status_code} to {target.split('?')[0]!r}), "
                "which a token endpoint never sends: it is not followed",
                response.url,
            )
        try:
            data = sdk_body(
                iter(lambda: raw.read(READ_BLOCK_BYTES, decode_content=False), b""),
                declared=response.headers.get("Content-Length"),
                encoding=response.headers.get("Content-Encoding", ""),
                remaining=remaining,
                where=response.url,
            )
        except BadAnswer:
            raw.close()
            raise
        response.raw = _Read(data, getattr(raw, "headers", {}))
        return response

    session = requests.Session()
    session.auth = _as_it_is
    session.headers["Accept-Encoding"] = "identity"
    session.hooks["response"].append(read_under_caps)
    return session


def requests_send(ctx: Context) -> Send:
    """requests as the transport seam's :data:`~credprovider.runtime.http.Send`: it honours the
    proxy settings (and NO_PROXY), which the stdlib client never uses; answers read under the caps
    through :func:`bounded_session`, a failed exchange raised as
    :class:`~credprovider.runtime.http.HttpError`."""
    import requests

    from credprovider.runtime.http import HttpError, HttpResponse
    from credprovider.runtime.provider import one_line

    session = bounded_session(ctx.deadline.remaining)

    def send(
        method: str, url: str, headers: Mapping[str, str], body: bytes | None, timeout: float
    ) -> HttpResponse:
        try:
            answer = session.request(
                method, url, data=body, headers=headers, timeout=timeout, allow_redirects=False
            )
            content = answer.content
        except requests.RequestException as exc:
            raise HttpError(one_line(exc)) from None
        raw = answer.raw.headers
        fields = tuple((name, value) for name in raw for value in raw.getlist(name))
        return HttpResponse(
            answer.status_code, {name.lower(): value for name, value in fields}, content, fields
        )

    return send

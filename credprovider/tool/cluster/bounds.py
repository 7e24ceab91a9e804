"""The API server is an answer like any other (``docs/security.md``): what the agent and
``credprovider fleet`` read from it is held to bounds before the client library parses it.

lightkube's client is given an ``httpx`` transport of ours (its public ``transport`` argument,
:func:`bounded_transport`) that reads each body itself, through the plugins' one bounded reader: at
most :data:`MAX_BODY_BYTES`, the whole body within :data:`BODY_SECONDS` (a drip-fed answer ends
then), asked for unencoded (gzip or deflate undone under the same cap), JSON no deeper than the
plugins' cap (``tool.structured``). A list is followed through at most :data:`MAX_PAGES`
``continue`` tokens (a server that never stops paginating ends there). Redirects are not followed
(``httpx``'s default, which lightkube keeps). What is refused is an :class:`AnswerRefused`, one
line, before lightkube sees the body; every call as a whole (connect, headers and body) ends within
:data:`CALL_SECONDS` (:func:`within`); whatever the library still raises on an answer it cannot use
is one line too (:func:`~credprovider.tool.cluster.connect.api_call`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from credprovider.errors import CredproviderError
from credprovider.runtime.answer import BadAnswer, decoded, too_large
from credprovider.runtime.answer import read_bounded as read
from credprovider.runtime.excerpt import byte_size, clip
from credprovider.tool.cluster.route import DIRECT, SOCKS_SCHEMES, Route
from credprovider.tool.node.structured import JsonTooDeep, bounded_json

if TYPE_CHECKING:
    from credprovider.tool.cluster.execcred import ExecToken

# A list of 5,000 nodes (Kubernetes' largest tested cluster) in one page is about 100 MiB; the
# agent reads one node at a time and fleet lists in pages.
MAX_BODY_BYTES: Final = 64 * 1024 * 1024
BODY_SECONDS: Final = 30.0
MAX_PAGES: Final = 1000
# A whole call (connect, headers, body; a list's pages), from the start: headers drip-fed a byte
# at a time hold the client before any body bound can start (#62).
CALL_SECONDS: Final = BODY_SECONDS + 5


def within(seconds: float, call: Any, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``, or :class:`AnswerRefused` once ``seconds`` have passed without
    its end. The call runs in a daemon thread, left behind when it overruns (holding only its
    connection); its result or error is this function's."""
    import threading

    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 (handed to the caller, raised there)
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="credprovider-api-call", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise AnswerRefused(
            f"no complete answer within {seconds:g}s (the API server answers too slowly)"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


class AnswerRefused(CredproviderError):
    """An answer past a bound; :func:`~credprovider.tool.cluster.connect.api_call` says it as a
    ClusterError naming what was being done."""


def read_bounded(
    blocks: Any, where: str, max_bytes: int = MAX_BODY_BYTES, seconds: float = BODY_SECONDS
) -> bytes:
    """A body from ``blocks`` (as they arrive), through the plugins' one bounded reader
    (``runtime.answer.read_bounded``): at most ``max_bytes``, the whole of it within ``seconds``."""
    deadline = time.monotonic() + seconds
    try:
        return read(
            iter(blocks),
            declared=None,
            remaining=lambda: deadline - time.monotonic(),
            cap=max_bytes,
        )
    except BadAnswer as exc:  # past the size cap (its one sentence, too_large), else the deadline
        larger = exc.predicate == too_large(max_bytes)
        refused = "is larger than" if larger else "took longer than"
        limit = byte_size(max_bytes) if larger else f"{seconds:g}s"
        raise AnswerRefused(f"the answer from {where} {refused} {limit}") from None


def bounded_transport(
    verify: Any,
    token: ExecToken | None = None,
    way: Route = DIRECT,
    remake: Callable[[tuple[str, str]], Any] | None = None,
) -> Any:
    """An ``httpx`` transport (its public ``BaseTransport``) that holds every answer to the
    bounds above before the client library sees it: asks for it unencoded (a gzip or deflate one
    is undone under the same cap), reads it through :func:`read_bounded`, checks a JSON body's
    depth, and counts a list's pages. ``verify``: the TLS context the client would have used;
    ``token``: the kubeconfig's exec plugin's, sent with each request (fetched again once on a
    401, as client-go does); ``way``: the proxy and TLS server name (``cluster.route``);
    ``remake``: the TLS context for a client certificate the plugin issues afresh (one nearing
    its expirationTimestamp, or refused): the next connection speaks with it."""
    import httpx2

    class Bounded(httpx2.BaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.HTTPTransport(verify=verify, trust_env=False, proxy=way.proxy)
            self.pair = token.client_pair() if token is not None else None
            self.socks_faults: tuple[type[Exception], ...] = ()
            if way.proxy is not None and way.proxy.startswith(SOCKS_SCHEMES):
                from socksio import SOCKSError

                self.socks_faults = (AssertionError, SOCKSError)
            self.pages = 0

        def handle_request(self, request: httpx2.Request) -> httpx2.Response:
            if "continue=" in str(request.url.query or b""):
                self.pages += 1
                if self.pages > MAX_PAGES:
                    raise AnswerRefused(
                        f"the API server's list went on past {MAX_PAGES} pages: not read further"
                    )
            request.headers["Accept-Encoding"] = "identity"
            if way.tls_server_name:
                request.extensions["sni_hostname"] = way.tls_server_name
            if token is None:
                return self.exchange(request)
            self.authorize(request, token.header())
            self.follow(token)
            response = self.exchange(request)
            if response.status_code == 401:
                self.authorize(request, token.header(renew=True))
                self.follow(token)
                response = self.exchange(request)
            return response

        def follow(self, token: ExecToken) -> None:
            """Speak with the client certificate the plugin issued last, if it issued another."""
            pair = token.client_pair()
            if remake is None or pair is None or pair == self.pair:
                return
            from credprovider.tool.cluster.execcred import ExecCredentialError

            try:
                context = remake(pair)
            except ValueError as exc:  # as the first one's, at connect
                raise ExecCredentialError(f"{token.plugin.said}: {exc}") from None
            self.inner.close()
            self.inner = httpx2.HTTPTransport(verify=context, trust_env=False, proxy=way.proxy)
            self.pair = pair

        @staticmethod
        def authorize(request: httpx2.Request, header: str) -> None:
            if header:  # none for a plugin that issued a client certificate
                request.headers["Authorization"] = header

        def exchange(self, request: httpx2.Request) -> httpx2.Response:
            where = str(request.url).split("?")[0]
            try:
                response = self.inner.handle_request(request)
            except self.socks_faults as exc:  # httpcore asserts, socksio raises on a bad reply
                said = clip(str(exc)) or type(exc).__name__
                raise httpx2.ProxyError(
                    f"the SOCKS proxy's answer is not SOCKS5 ({said})"
                ) from None
            try:
                data = read_bounded(response.stream, where)
            finally:
                response.close()
            headers = httpx2.Headers(response.headers)
            try:
                data = decoded(data, headers.pop("Content-Encoding", ""), MAX_BODY_BYTES)
            except BadAnswer as exc:
                raise AnswerRefused(f"the answer from {where} {exc.predicate}") from None
            headers.pop("Content-Length", None)
            _check_json(data, where)
            return httpx2.Response(
                response.status_code, headers=headers, content=data, request=request,
                extensions=response.extensions,
            )  # fmt: skip

        def close(self) -> None:
            self.inner.close()

    return Bounded()


def _check_json(data: bytes, where: str) -> None:
    if data[:1] not in (b"{", b"["):
        return
    try:
        bounded_json(data, MAX_BODY_BYTES)
    except JsonTooDeep as exc:
        raise AnswerRefused(f"the answer from {where} {exc}") from None
    except ValueError:
        pass  # not JSON after all: lightkube says so, in one line (api_call)

"""The API server is an answer like any other (``docs/security.md``): what the agent and
``credprovider fleet`` read from it is held to bounds before the client library parses it.

An ``httpx`` response hook on lightkube's client reads each body itself, in blocks: at most
:data:`MAX_BODY_BYTES`, the whole body within :data:`BODY_SECONDS` (a drip-fed answer ends
then), JSON no deeper than the plugins' cap (``tool.structured``). A list is followed through at
most :data:`MAX_PAGES` ``continue`` tokens (a server that never stops paginating ends there).
Redirects are not followed (``httpx``'s default, which lightkube keeps). What is refused is a
:class:`AnswerRefused`, one line, before lightkube sees the body; every call as a whole (connect,
headers and body) ends within :data:`CALL_SECONDS` (:func:`within`);
whatever the library still raises on an answer it cannot use is one line too
(:func:`~credprovider.tool.cluster.connect.api_call`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

from credprovider.errors import CredproviderError
from credprovider.runtime.excerpt import byte_size
from credprovider.tool.node.structured import JsonTooDeep, bounded_json

if TYPE_CHECKING:
    from lightkube import Client

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
    response: Any, max_bytes: int = MAX_BODY_BYTES, seconds: float = BODY_SECONDS
) -> bytes:
    """The body of ``response`` (an ``httpx`` response whose body is unread), bounded."""
    where = str(response.request.url).split("?")[0]
    deadline = time.monotonic() + seconds
    chunks, size = [], 0
    for chunk in response.iter_bytes():  # as they arrive (a block size would wait to fill it)
        size += len(chunk)
        if size > max_bytes:
            raise AnswerRefused(f"the answer from {where} is larger than {byte_size(max_bytes)}")
        if time.monotonic() > deadline:
            raise AnswerRefused(f"the answer from {where} took longer than {seconds:g}s")
        chunks.append(chunk)
    return b"".join(chunks)


def bound(client: Client) -> Client:
    """``client`` with every answer held to the bounds above."""
    pages = 0

    def hook(response: Any) -> None:
        nonlocal pages
        if "continue=" in str(response.request.url.query or b""):
            pages += 1
            if pages > MAX_PAGES:
                raise AnswerRefused(
                    f"the API server's list went on past {MAX_PAGES} pages: not read further"
                )
        data = read_bounded(response)
        response._content = data  # what response.read() and lightkube then use
        if data[:1] in (b"{", b"["):
            try:
                bounded_json(data, MAX_BODY_BYTES)
            except JsonTooDeep as exc:
                where = str(response.request.url).split("?")[0]
                raise AnswerRefused(f"the answer from {where} {exc}") from None
            except ValueError:
                pass  # not JSON after all: lightkube says so, in one line (api_call)

    client._client._client.event_hooks["response"].append(hook)
    return client

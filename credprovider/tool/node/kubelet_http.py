"""The one way the tool asks the node's own kubelet over HTTP (its /healthz, /metrics, /pods):
through the plugins' stdlib client (credprovider/runtime/http.py), each exchange whole within its
timeout (a drip-fed answer ends then), its body capped, a failure one :class:`KubeletUnanswered`
naming the URL. The agent's health wait and doctor's live checks both use it.
"""

from __future__ import annotations

import ssl

from credprovider.errors import CredproviderError
from credprovider.runtime.answer import BadAnswer
from credprovider.runtime.http import HttpError, request


class KubeletUnanswered(CredproviderError, OSError):
    """No whole answer from the kubelet: the URL and why."""


def kubelet_get(url: str, timeout: float, cap: int, token: str = "") -> tuple[int, bytes]:
    """``url``'s status and body. ``token``: a bearer token (the metrics of the secure port).
    An https URL is the kubelet's serving port on this node (loopback, hostNetwork): its
    certificate is usually self-signed, and only the node's root could stand in for it, so it is
    not verified, and so no trust is loaded for it (a default context would have OpenSSL open
    ``SSL_CERT_FILE`` itself, blocking on a FIFO there)."""
    context = None
    if url.startswith("https://"):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        answer = request(
            "GET", url, headers=headers, timeout=timeout, tls=context, max_body=cap,
            within=timeout,
        )  # fmt: skip
    except (HttpError, BadAnswer, ValueError) as exc:
        raise KubeletUnanswered(f"{url}: {getattr(exc, 'detail', None) or exc}") from None
    return answer.status, answer.body

"""The GCE metadata server client of the node path, on the stdlib (no google-auth on a cache miss).

It honours google-auth's environment (``GCE_METADATA_HOST``, its old name ``GCE_METADATA_ROOT``)
and answers like google-auth's ``_metadata.get``: JSON bodies decoded, text returned as text.
Metadata-server mTLS (:func:`wants_mtls`) is left to google-auth, which implements it.
"""

from __future__ import annotations

import os

from credprovider import __version__
from credprovider.errors import ProviderError
from credprovider.gcp.registry import metadata_host, shown_metadata_host
from credprovider.runtime._typing import TYPE_CHECKING, Final
from credprovider.runtime.advice import (
    NOT_THE_SERVICE,
    RETRIES_NEXT_PULL,
    name_not_resolved,
    unreachable,
)
from credprovider.runtime.answer import BadAnswer, decode_json
from credprovider.runtime.excerpt import clip, quoted
from credprovider.runtime.http import HttpError, HttpResponse, UnusableUrl, exchange
from credprovider.runtime.provider import answer_text, one_line
from credprovider.runtime.retry import RETRYABLE_STATUSES

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from credprovider.runtime.provider import Context

MTLS_MODE_ENV: Final = "GCE_METADATA_MTLS_MODE"
MTLS_MODES: Final = ("strict", "none", "default")  # google-auth's MdsMtlsMode, "none" unset
# Where google-auth looks for the metadata server's mTLS root and client key (its
# google/auth/compute_engine/_mtls.py, on Linux; the GCE guest agent writes them).
MTLS_CERTIFICATES: Final = ("/run/google-mds-mtls/root.crt", "/run/google-mds-mtls/client.key")
# The metadata server's name does not resolve: off GCE (or its DNS is not the node's).
NOT_ON_GCE: Final = (
    "the metadata server's name does not resolve: is this node on GCE? Elsewhere, give the "
    "credentials with GOOGLE_APPLICATION_CREDENTIALS in the provider's env (or GCE_METADATA_HOST "
    "for a metadata server at another address)"
)
# GCE_METADATA_HOST (or GCE_METADATA_ROOT) names no address a request can go to.
FIX_HOST: Final = "fix GCE_METADATA_HOST (or GCE_METADATA_ROOT) in the provider's env: host[:port]"
# What would make the metadata root's URL another URL than http://HOST[:PORT]/computeMetadata/v1/
_NOT_IN_A_HOST: Final = "/?#@\\ "
NO_SERVICE_ACCOUNT: Final = (
    "check that the VM has a service account with the cloud-platform scope, or give the "
    "credentials with GOOGLE_APPLICATION_CREDENTIALS in the provider's env"
)
METADATA_ATTEMPTS: Final = 3
PER_CALL_TIMEOUT_SECONDS: Final = 3.0
HEADERS: Final = {
    "Metadata-Flavor": "Google",
    "User-Agent": f"credprovider/{__version__} auth-provider-gcp",
}


def metadata_root(environ: Mapping[str, str]) -> str:
    return f"http://{metadata_host(environ)}/computeMetadata/v1/"


def wants_mtls(environ: Mapping[str, str], exists: Callable[[str], bool] = os.path.exists) -> bool:
    """Does ``GCE_METADATA_MTLS_MODE`` ask for the metadata server over mTLS (as google-auth reads it)?"""
    mode = environ.get(MTLS_MODE_ENV, "none").lower()
    if mode == "default":
        return all(exists(path) for path in MTLS_CERTIFICATES)
    return mode != "none"  # strict, or a value google-auth rejects with its own message


def require_mtls_mode(environ: Mapping[str, str]) -> None:
    """``GCE_METADATA_MTLS_MODE`` is one of google-auth's values (any case), else one line that
    says so (google-auth's own ValueError read as a failure over mTLS, which was never tried)."""
    value = environ.get(MTLS_MODE_ENV, "none")
    if value.lower() not in MTLS_MODES:
        raise ProviderError(
            f"{MTLS_MODE_ENV}={quoted(value)} is none of {', '.join(MTLS_MODES)}",
            f"fix it in the provider's env, or unset it ({MTLS_MODES[1]}: the metadata server "
            "over plain HTTP)",
        )


def decode_answer(response: HttpResponse) -> object:
    """The body as google-auth returns it: parsed JSON for ``application/json``, else text."""
    text = response.text()
    if response.header("content-type").split(";")[0].strip().lower() == "application/json":
        try:
            return decode_json(text)
        except BadAnswer:
            raise
        except ValueError:
            raise ValueError("invalid JSON") from None
    return text


def not_reached(exc: BaseException, server: str) -> str:
    """What to check when ``server`` (the metadata server, by either route) was not reached:
    whether this node is on GCE at all, when its name did not resolve."""
    return NOT_ON_GCE if name_not_resolved(exc) else unreachable(server)


def get(ctx: Context, path: str, what: str) -> object:
    """``what`` read from ``computeMetadata/v1/<path>``, retried on 5xx/429 and transport errors."""
    root = metadata_root(ctx.environ)
    failed = f"could not read {what} from the GCE metadata server ({clip(root)})"
    host = metadata_host(ctx.environ)
    if not host.strip() or any(c in host for c in _NOT_IN_A_HOST) or not host.isprintable():
        shown = shown_metadata_host(ctx.environ)  # a password never said
        raise ProviderError(f"{failed}: {quoted(shown)} is not host[:port]", FIX_HOST)
    ctx.deadline.phase = f"reading {what} from the GCE metadata server"
    ctx.log.v(4, f"GET {root}{path}")
    try:
        response = exchange(
            ctx,
            "GET",
            root + path,
            headers=HEADERS,
            what=f"{root}{path}",
            timeout_cap=PER_CALL_TIMEOUT_SECONDS,
            retry_statuses=RETRYABLE_STATUSES,
            attempts=METADATA_ATTEMPTS,
        )
    except BadAnswer as exc:
        raise ProviderError(f"{failed}: {exc.detail}", NOT_THE_SERVICE) from None
    except UnusableUrl as exc:
        raise ProviderError(f"{failed}: {one_line(exc)}", FIX_HOST) from None
    except HttpError as exc:
        advice = not_reached(exc, f"the metadata server {clip(root)}")
        raise ProviderError(f"{failed}: {one_line(exc)}", advice) from None
    if response.status in RETRYABLE_STATUSES:
        raise ProviderError(
            f"{failed}: the server is unavailable (HTTP {response.status}): "
            f"{answer_text(response.text())}",
            RETRIES_NEXT_PULL,
        )
    if response.status != 200:
        raise ProviderError(
            f"{failed}: HTTP {response.status}: {answer_text(response.text())}",
            NO_SERVICE_ACCOUNT,
        )
    try:
        return decode_answer(response)
    except BadAnswer as exc:
        raise ProviderError(f"{failed}: {exc.detail}", NOT_THE_SERVICE) from None
    except ValueError as exc:
        raise ProviderError(f"{failed}: {exc}", NOT_THE_SERVICE) from None

"""AWS Signature Version 4 for one JSON-protocol POST: pure functions, stdlib only.

Just what ``GetAuthorizationToken`` and EKS Auth's ``AssumeRoleForPodIdentity`` need: a path of
unreserved characters (``/``, ``/clusters/NAME/assume-role-for-pod-identity``), no query string, a
JSON body, header values without runs of spaces. ``tests/unit/aws/test_sigv4.py`` checks every signature against botocore's
``SigV4Auth`` for the same request, clock and credentials.
"""

from __future__ import annotations

from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Mapping

ALGORITHM: Final = "AWS4-HMAC-SHA256"
# Not signed (as botocore): a proxy or the HTTP stack may change them on the way.
UNSIGNED_HEADERS: Final = frozenset({"authorization", "user-agent", "expect", "x-amzn-trace-id"})
_PLAIN: Final = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~/"


class AccessKeys(NamedTuple):
    """A key pair and, for temporary credentials, its session token."""

    access_key: str
    secret_key: str
    session_token: str = ""


def amz_date(now: float) -> str:
    """``YYYYMMDDTHHMMSSZ`` (UTC) for a Unix time."""
    import time

    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))


def _hmac(key: bytes, text: str) -> bytes:
    import hashlib  # here, not at the top: a cache hit imports this module but signs nothing
    import hmac

    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signing_key(secret_key: str, date: str, region: str, service: str) -> bytes:
    key = _hmac(f"AWS4{secret_key}".encode(), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return key


def sign_post(
    *,
    host: str,
    headers: Mapping[str, str],
    body: bytes,
    keys: AccessKeys,
    region: str,
    service: str,
    now: float,
    path: str = "/",
) -> dict[str, str]:
    """``headers`` plus ``Host``, ``X-Amz-Date``, the session token and ``Authorization``, for a
    POST of ``body`` to ``path`` on ``host`` (letters, digits and ``-_./~`` only: they need no
    encoding, so the path is its own canonical form)."""
    import hashlib
    import hmac

    stamp = amz_date(now)
    signed = {**headers, "Host": host, "X-Amz-Date": stamp}
    if keys.session_token:
        signed["X-Amz-Security-Token"] = keys.session_token
    canonical = {
        name.lower(): " ".join(value.split())
        for name, value in signed.items()
        if name.lower() not in UNSIGNED_HEADERS
    }
    names = ";".join(sorted(canonical))
    if not path.startswith("/") or path.strip(_PLAIN):
        raise ValueError("a SigV4 path of unreserved characters only")
    canonical_request = "\n".join(
        [
            "POST",
            path,
            "",
            "".join(f"{name}:{canonical[name]}\n" for name in sorted(canonical)),
            names,
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join(
        [ALGORITHM, stamp, scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
    )
    key = signing_key(keys.secret_key, stamp[:8], region, service)
    signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    signed["Authorization"] = (
        f"{ALGORITHM} Credential={keys.access_key}/{scope}, SignedHeaders={names}, "
        f"Signature={signature}"
    )
    return signed

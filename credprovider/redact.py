"""Secret redaction: the single helper every log line and printed error goes through.

Providers call :func:`register_secret` as soon as they hold a secret (a token, a password, a client
secret). :func:`scrub` then replaces every registered secret, and anything shaped like a JWT, with
its redacted form before text reaches stderr.
"""

from __future__ import annotations

import re
import threading
from typing import Final

# Secrets shorter than this are not registered: replacing e.g. "AWS" everywhere would garble logs.
MIN_SECRET_LENGTH: Final = 6
# Show a short prefix only when the secret is long enough that the prefix reveals nothing useful.
_PREFIX_MIN_LENGTH: Final = 16
_JWT_PATTERN: Final = r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"

_lock = threading.Lock()
_secrets: set[str] = set()


def redact(secret: str) -> str:
    """Return a form of ``secret`` that is safe to print: ``abc…(32 chars)``."""
    if len(secret) >= _PREFIX_MIN_LENGTH:
        return f"{secret[:3]}…({len(secret)} chars)"
    return f"…({len(secret)} chars)"


def register_secret(secret: str | None) -> None:
    """Remember ``secret`` so that :func:`scrub` removes it from anything printed later."""
    if secret and len(secret) >= MIN_SECRET_LENGTH:
        with _lock:
            _secrets.add(secret)


def scrub(text: str) -> str:
    """Replace every registered secret and every JWT-shaped string in ``text``."""
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, redact(secret))
    if "eyJ" not in text:
        return text
    return re.sub(_JWT_PATTERN, lambda m: redact(m.group(0)), text)


def forget_secrets() -> None:
    """Drop every registered secret (used between in-process test runs)."""
    with _lock:
        _secrets.clear()

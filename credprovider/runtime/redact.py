"""Log hygiene: the single helper every log line and printed error goes through.

Providers call :func:`register_secret` as soon as they hold a secret (a token, a password, a client
secret). :func:`scrub` then replaces every registered secret, and anything shaped like a JWT, with
its redacted form before text reaches stderr. :func:`safe_line` does that, then escapes what a
terminal or log viewer would interpret (ESC, BEL, CR, C1 controls, bidi overrides) and caps the
length: the kubelet copies plugin stderr into its own log, so a request or a server must not be
able to forge, hide or flood lines there. Always scrub first, then cut: a cut secret would no
longer be recognised.
"""

from __future__ import annotations

import _thread

from credprovider.runtime._typing import Final
from credprovider.runtime.excerpt import LINE_LIMIT, clip

# Secrets shorter than this are not registered: replacing e.g. "AWS" everywhere would garble logs.
MIN_SECRET_LENGTH: Final = 6
# Show a short prefix only when the secret is long enough that the prefix reveals nothing useful.
_PREFIX_MIN_LENGTH: Final = 16
_JWT_PATTERN: Final = r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"
# A URL's userinfo (``https://user:password@host``, ``https://TOKEN@host``): a setting's URL
# quoted in an error carries it, and it is a secret whoever wrote it there.
_USERINFO_PATTERN: Final = r"([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]+@"

_lock = _thread.allocate_lock()
_secrets: set[str] = set()


def redact(secret: str) -> str:
    """Return a form of ``secret`` that is safe to print: ``abc…(32 chars)``."""
    if len(secret) >= _PREFIX_MIN_LENGTH:
        return f"{secret[:3]}…({len(secret)} chars)"
    return f"…({len(secret)} chars)"


def register_secret(secret: str | None) -> None:
    """Remember ``secret`` so that :func:`scrub` removes it from anything printed later. A JWT's
    signature is remembered on its own too: it is what makes the token a credential, and a server
    that echoes a token in an error may echo that part alone."""
    if secret and len(secret) >= MIN_SECRET_LENGTH:
        signature = secret.rpartition(".")[2] if secret.count(".") == 2 else ""
        with _lock:
            _secrets.add(secret)
            if len(signature) >= _PREFIX_MIN_LENGTH:
                _secrets.add(signature)


def scrub(text: str) -> str:
    """Replace every registered secret, every JWT-shaped string and every URL's userinfo in
    ``text``."""
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        if secret in text:
            text = text.replace(secret, redact(secret))
    text = without_userinfo(text)
    if "eyJ" not in text:
        return text
    import re  # only for text that may hold a JWT: re (with enum, functools) is costly to import

    return re.sub(_JWT_PATTERN, lambda m: redact(m.group(0)), text)


def without_userinfo(text: str) -> str:
    """``text`` with every URL's userinfo (``https://user:password@host``) shown as ``…@``."""
    if "@" not in text or "://" not in text:
        return text
    import re

    return re.sub(_USERINFO_PATTERN, r"\1…@", text)


def printable(text: str) -> str:
    """Every non-printable character escaped as Go's ``%q`` writes it (``\\x1b``, ``\\u202e``)."""
    if text.isprintable():
        return text
    from credprovider.runtime.goformat import go_escape

    return "".join(ch if ch.isprintable() or ch == "\\" else go_escape(ch) for ch in text)


def safe_line(message: str) -> str:
    """One stderr line: scrubbed, newlines folded, non-printables escaped, length capped."""
    return clip(printable(" ".join(scrub(message).split("\n"))), LINE_LIMIT)


def forget_secrets() -> None:
    """Drop every registered secret (used between in-process test runs)."""
    with _lock:
        _secrets.clear()

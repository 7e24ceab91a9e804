"""The one root of every error credprovider raises on purpose, and the two the runtime reports.

Every exception class in the project derives from :class:`CredproviderError`: the CLI's edge
catches it (one line, exit 1), and a plugin's provider turns what it meets into a
:class:`ProviderError`, whose message is the one stderr line the kubelet logs. Pure parsers keep a
``ValueError`` (or, for transport failures, ``OSError``) base as well, so callers that catch those
still do. Imports nothing: it is on every exec path.
"""

from __future__ import annotations


class CredproviderError(Exception):
    """Something credprovider detected and can say in one sentence."""


class ProviderError(CredproviderError):
    """A failure the operator can act on; its message is the one line printed on stderr: what
    failed, then (``advice``) what to do about it."""

    def __init__(self, message: str, advice: str | None = None) -> None:
        super().__init__(f"{message}; {advice}" if advice else message)


class UsageError(ProviderError):
    """The plugin's arguments are wrong (bad flag, missing value, ...)."""

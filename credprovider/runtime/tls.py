"""The trust every plugin's TLS uses: a verified context from a CA bundle a setting names (or
certifi's), the bundle read as every node file is, and the CA bundle variables' one rule.

A bundle file is read by :mod:`credprovider.runtime.nodefile` (a regular file, at most
:data:`MAX_CA_BUNDLE_BYTES`: a FIFO is never waited on, ``/dev/zero`` never read) and handed to
OpenSSL as text, so OpenSSL never opens the path itself. Only its ASCII is kept: PEM is ASCII, but
bundles carry comments that are not (p11-kit's extracted ``tls-ca-bundle.pem`` names each
certificate in a ``# label`` line; older Mozilla-derived bundles had ``# Issuer: CN=TÜBİTAK ...``),
and ``ssl`` refuses such text as ``cadata``. A directory (OpenSSL's ``capath``, which requests and
botocore accept) is read the same way, entry by entry (:func:`directory_pem`).
"""

from __future__ import annotations

import errno
import os
import re

from credprovider.errors import ProviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import ssl
    from collections.abc import Mapping, Sequence

# The CA bundle variables each transport honours, the first set one winning: requests (and so
# azure-identity and google-auth) and the ACR exchange that trusts what requests would.
REQUESTS_CA_BUNDLE_ENV: Final = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
# A node's whole trust store is a few hundred KiB (certifi's, Debian's ca-certificates.crt).
MAX_CA_BUNDLE_BYTES: Final = 16 << 20
# Debian's /etc/ssl/certs: about 150 certificates, each under its name and a hash link.
MAX_CA_DIRECTORY_ENTRIES: Final = 10_000
# The names OpenSSL's capath lookup opens: the subject name's hash, a dot, a sequence number.
_HASHED: Final = re.compile(r"[0-9a-f]{8}\.[0-9]+")


class CaBundleError(ProviderError):
    """A CA bundle a setting names cannot be used: the node's setup to fix."""


def verified_context(ca_bundle: str = "", setting: str = "") -> ssl.SSLContext:
    """Certificate and host name checks against ``ca_bundle`` (a PEM file, or, for an environment
    variable, a directory as requests allows), else certifi's bundle (as botocore and requests
    do). A bundle that cannot be loaded is :class:`CaBundleError` naming ``setting``, what gave
    it: an environment variable (to fix or unset) or a plugin's argument such as ``--ca-file``
    (the provider's args to fix)."""
    import ssl

    if not ca_bundle:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    from credprovider.runtime.nodefile import read_node_file, reason

    try:
        if not setting.startswith("-") and os.path.isdir(ca_bundle):
            pem = directory_pem(ca_bundle)
        else:
            pem = read_node_file(ca_bundle, MAX_CA_BUNDLE_BYTES).decode("ascii", "ignore")
        return ssl.create_default_context(cadata=pem)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError: first
        why = "it holds no PEM certificate" if isinstance(exc, ssl.SSLError) else reason(exc)
    if setting.startswith("-"):
        raise CaBundleError(
            f"{setting} {ca_bundle} cannot be used: {why}", "fix the provider's args"
        )
    named = f" named by {setting}" if setting else ""
    fix = f"fix or unset {setting}" if setting else "fix it"
    raise CaBundleError(f"CA bundle {ca_bundle}{named} cannot be used: {why}", fix)


def require_ca_location(path: str) -> None:
    """Checks that an SDK may load ``path`` itself as its CA file or directory: a regular file of
    at most :data:`MAX_CA_BUNDLE_BYTES`, or a directory :func:`directory_pem` can read. Raises
    ``OSError`` or ``ValueError``, as :func:`~credprovider.runtime.nodefile.read_node_file`."""
    from credprovider.runtime.nodefile import require_node_file

    if os.path.isdir(path):
        directory_pem(path)
    else:
        require_node_file(path, MAX_CA_BUNDLE_BYTES)


def directory_pem(directory: str) -> str:
    """The certificates of a CA directory (OpenSSL's ``capath``) as one PEM text, read as every
    node file is: the entries OpenSSL would open (``HASH.N``, what ``c_rehash`` and
    ``update-ca-certificates`` link), in name order; a link to nothing skipped, as OpenSSL skips
    it; anything else that cannot be read refused, naming the entry (a FIFO there would hold the
    handshake that looked it up). At most :data:`MAX_CA_DIRECTORY_ENTRIES` entries are looked at
    and :data:`MAX_CA_BUNDLE_BYTES` read in all, as for one bundle."""
    from credprovider.runtime.excerpt import byte_size
    from credprovider.runtime.nodefile import NodeFileError, read_node_file, reason

    with os.scandir(directory) as entries:
        names = []
        for count, entry in enumerate(entries):
            if count >= MAX_CA_DIRECTORY_ENTRIES:
                raise NodeFileError(
                    0, f"holds more than {MAX_CA_DIRECTORY_ENTRIES:,} entries", directory
                )
            if _HASHED.fullmatch(entry.name):
                names.append(entry.name)
    texts, left = [], MAX_CA_BUNDLE_BYTES
    for name in sorted(names):
        path = os.path.join(directory, name)
        try:
            data = read_node_file(path, left)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            if isinstance(exc, NodeFileError) and exc.errno == errno.EFBIG:
                raise NodeFileError(
                    errno.EFBIG, f"holds more than {byte_size(MAX_CA_BUNDLE_BYTES)}", directory
                ) from None
            raise NodeFileError(0, f"its entry {name} {_as_clause(reason(exc))}", path) from None
        texts.append(data.decode("ascii", "ignore"))
        left -= len(data)
    if not texts:  # OpenSSL would find no issuer there either: every handshake would fail
        raise NodeFileError(
            0, "holds no certificate under a hashed name (HASH.0: run c_rehash on it)", directory
        )
    return "\n".join(texts)


def _as_clause(why: str) -> str:
    """``reason``'s words after an entry's name: "is a FIFO, ...", or "cannot be read: ..."."""
    return why if why.startswith("is ") else f"cannot be read: {why}"


def ca_bundle_setting(environ: Mapping[str, str], names: Sequence[str]) -> tuple[str, str]:
    """``(variable, path)`` of the first of ``names`` set in ``environ``, else ``("", "")``."""
    return next(
        ((name, environ[name]) for name in names if environ.get(name, "").strip()), ("", "")
    )


def require_usable_ca_bundle(environ: Mapping[str, str], names: Sequence[str]) -> str:
    """The CA bundle an SDK's transport will load (the first of ``names`` set), checked now so
    that a broken one is the operator's one line (:class:`CaBundleError`), not the SDK's error."""
    variable, path = ca_bundle_setting(environ, names)
    if path:
        verified_context(path, variable)
    return path

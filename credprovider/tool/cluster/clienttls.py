"""The TLS the tool's API client speaks: the cluster's CA and the user's client certificate, as a
kubeconfig (or the pod's service account) gives them, and no secret ever written to a file.

lightkube turns a kubeconfig's ``client-key-data`` (kubeadm's ``admin.conf``, k3s's ``k3s.yaml``,
kind's: the cluster-admin's private key) into a named temporary file under ``$TMPDIR`` for
OpenSSL to open, twice per client (once more inside its own client, even beside a transport
given to it), removed only when Python collects it: a kill or a crash left the key on disk. Here
inline data is handed to OpenSSL from an anonymous memory file (``memfd_create``, or an
``O_TMPFILE`` file on ``/dev/shm``: no name in any directory, opened by OpenSSL through
``/proc/self/fd``) that is closed as soon as it is loaded, and a CA as ``cadata``;
the context given to lightkube has none of it (:func:`without_tls`). Files a kubeconfig names
are opened by OpenSSL where they are (checked as node files before: ``connect``). Not on the
plugins' exec path.
"""

from __future__ import annotations

import base64
import contextlib
import os
import ssl
from collections.abc import Callable, Iterator
from typing import Any

import msgspec


def client_tls(
    cluster: Any,
    user: Any,
    abs_file: Callable[[str], Any],
    issued: tuple[str, str] | None = None,
) -> ssl.SSLContext:
    """The TLS context for a lightkube ``cluster`` and ``user`` (its models), in lightkube's order
    (a CA file, else CA data, else the default trust or ``insecure-skip-tls-verify``); a client
    certificate and key from files or from data, or ``issued`` by the user's exec plugin (PEM
    text). ``ValueError`` for data that is not base64, or a certificate and key that do not
    load."""
    import httpx2

    if cluster.certificate_auth:
        context = ssl.create_default_context(cafile=str(abs_file(cluster.certificate_auth)))
    elif cluster.certificate_auth_data:
        context = ssl.create_default_context(
            cadata=_decoded(cluster.certificate_auth_data).decode()
        )
    else:
        context = httpx2.create_ssl_context(verify=not cluster.insecure, trust_env=False)
    if issued is not None:
        with _in_memory(issued[0].encode()) as certificate, _in_memory(issued[1].encode()) as key:
            try:
                context.load_cert_chain(certificate, key)
            except ssl.SSLError as exc:  # client-go: "failed parsing client key/certificate"
                raise ValueError(
                    f"the client certificate and key the exec plugin issued do not load: {exc}"
                ) from None
    elif user is not None and (user.client_cert or user.client_cert_data):
        with (
            _material(user.client_cert_data, user.client_cert, abs_file) as certificate,
            _material(user.client_key_data, user.client_key, abs_file) as key,
        ):
            context.load_cert_chain(certificate, key)
    return context


def without_tls(chosen: Any) -> Any:
    """``chosen`` (a lightkube ``SingleConfig``) without its CA and client certificate settings:
    the context of :func:`client_tls` is the one used, and lightkube, which computes its own even
    beside a transport it is given, then writes nothing to a file."""
    cluster = msgspec.structs.replace(
        chosen.cluster, certificate_auth=None, certificate_auth_data=None
    )
    user = chosen.user
    if user is not None:
        user = msgspec.structs.replace(
            user, client_cert=None, client_cert_data=None, client_key=None, client_key_data=None
        )
    return chosen._replace(cluster=cluster, user=user)


def _decoded(data: str) -> bytes:
    return base64.b64decode(data, validate=True)


@contextlib.contextmanager
def _material(data: str | None, path: str | None, abs_file: Callable[[str], Any]) -> Iterator[str]:
    """A path OpenSSL can open for a certificate or key: the kubeconfig's file, or its inline
    data in an anonymous memory file, closed on leaving (nothing of it on any disk)."""
    if not data:
        yield str(abs_file(path or ""))
        return
    with _in_memory(_decoded(data)) as where:
        yield where


@contextlib.contextmanager
def _in_memory(content: bytes) -> Iterator[str]:
    """``content`` in an anonymous memory file, as a path OpenSSL can open, closed on leaving."""
    descriptor = anonymous_memory_file()
    try:
        written = 0
        while written < len(content):
            written += os.write(descriptor, content[written:])
        yield f"/proc/self/fd/{descriptor}"
    finally:
        os.close(descriptor)


# A tmpfs on every Linux node: a file made there with O_TMPFILE has no name and lives in memory.
SHARED_MEMORY = "/dev/shm"


def anonymous_memory_file() -> int:
    """A descriptor of a file in memory that no directory names, gone when it is closed:
    ``memfd_create``, or where Python was built without it (the bundle's) an ``O_TMPFILE`` file
    on :data:`SHARED_MEMORY`. ``ValueError`` saying so if neither can be made (never a file with
    a name instead)."""
    try:
        if hasattr(os, "memfd_create"):
            return os.memfd_create("credprovider-client-tls", os.MFD_CLOEXEC)
        return os.open(SHARED_MEMORY, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ValueError(
            f"the client certificate and key cannot be held in memory for OpenSSL (an O_TMPFILE "
            f"file on {SHARED_MEMORY}: {exc.strerror or exc}); they are never written to a file"
        ) from None

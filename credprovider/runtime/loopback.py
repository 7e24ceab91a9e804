"""Loopback-only test mode: how the test suite and the demo reach emulators for fixed cloud hosts.

Some endpoints have no SDK override (an ACR login server such as ``myreg.azurecr.io``, Google STS).
Like ``curl --resolve``, ``CREDPROVIDER_TEST_RESOLVE="host=127.0.0.1:8443,other=127.0.0.1:9443"``
makes name lookups for the listed hosts return a **loopback** address and port; TLS still verifies the
original host name. It cannot send anything off the machine:

* every target must be a loopback IP literal, otherwise the plugin refuses to start;
* while it (or ``CREDPROVIDER_TEST_LOOPBACK_ONLY=1``) is set, every socket connect to a non-loopback
  address fails, so a missed override becomes an error instead of a request to a real cloud;
* the plugin announces the mode on stderr on every run.
"""

from __future__ import annotations

from credprovider.errors import CredproviderError
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

RESOLVE_ENV: Final = "CREDPROVIDER_TEST_RESOLVE"
LOOPBACK_ONLY_ENV: Final = "CREDPROVIDER_TEST_LOOPBACK_ONLY"


class LoopbackError(CredproviderError, OSError):
    """A connection to a non-loopback address was attempted in loopback-only mode."""


def requested(environ: Mapping[str, str]) -> bool:
    """Does the environment ask for test mode? (Cheap: nothing is imported.)"""
    return bool(environ.get(RESOLVE_ENV)) or environ.get(LOOPBACK_ONLY_ENV, "") in ("1", "true")


def is_loopback_address(host: str) -> bool:
    """True for IP literals in 127.0.0.0/8 or ::1 (names are not resolved)."""
    literal = host.strip("[]").split("%")[0]
    if literal == "::1" or _is_ipv4_loopback(literal):
        return True  # what test mode meets on every exec, answered without importing ipaddress
    import ipaddress  # (with functools, re and enum): any other spelling

    try:
        return ipaddress.ip_address(literal).is_loopback
    except ValueError:
        return False


def _is_ipv4_loopback(literal: str) -> bool:
    """A dotted quad in 127.0.0.0/8 written as ipaddress accepts it (decimal, no leading zeros)."""
    parts = literal.split(".")
    return (
        len(parts) == 4
        and parts[0] == "127"
        and all(
            part.isascii()
            and part.isdigit()
            and len(part) <= 3
            and (part == "0" or part[0] != "0")
            and int(part) < 256
            for part in parts
        )
    )


def parse_resolve_map(value: str) -> dict[str, tuple[str, int]]:
    """Parse ``host=ip:port[,host=ip:port...]``; every ip must be loopback."""
    mapping: dict[str, tuple[str, int]] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        host, sep, target = item.partition("=")
        ip, colon, port_text = target.rpartition(":")
        if (
            not sep
            or not host
            or not colon
            or not (port_text.isascii() and port_text.isdigit() and len(port_text) <= 5)
        ):
            raise ValueError(f"{RESOLVE_ENV}: {item!r} is not host=ip:port")
        ip = ip.strip("[]")
        if not is_loopback_address(ip):
            raise ValueError(f"{RESOLVE_ENV}: {item!r} must point at a loopback address")
        mapping[host.lower().rstrip(".")] = (ip, int(port_text))
    return mapping


def _sockaddr_host(address: Any) -> str | None:
    if isinstance(address, tuple) and address and isinstance(address[0], str):
        return address[0]
    return None  # AF_UNIX paths and the like


def install_connect_guard(
    refusal: Callable[[str], BaseException] | None = None,
) -> Callable[[], None]:
    """Make every socket connect to a non-loopback IP raise ``refusal(host)`` (by default a
    :class:`LoopbackError`); return what removes the guard again. The test suite guards its own
    process with it too, refusing with an AssertionError that no ``except OSError`` swallows."""
    import socket

    if getattr(socket.socket, "_credprovider_guarded", False):
        return lambda: None
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex

    def _check(sock: Any, address: Any) -> None:
        host = _sockaddr_host(address)
        if (
            sock.family in (socket.AF_INET, socket.AF_INET6)
            and host is not None
            and not is_loopback_address(host)
        ):
            if refusal is not None:
                raise refusal(host)
            raise LoopbackError(f"blocked connection to non-loopback address {host} (test mode)")

    def connect(sock: Any, address: Any) -> None:
        _check(sock, address)
        original_connect(sock, address)

    def connect_ex(sock: Any, address: Any) -> int:
        _check(sock, address)
        return original_connect_ex(sock, address)

    def remove() -> None:
        socket.socket.connect = original_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = original_connect_ex  # type: ignore[method-assign]
        socket.socket._credprovider_guarded = False  # type: ignore[attr-defined]

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.socket._credprovider_guarded = True  # type: ignore[attr-defined]
    return remove


def install_resolve_map(mapping: dict[str, tuple[str, int]]) -> Callable[[], None]:
    """Answer name lookups for the mapped hosts with their loopback address and port; return what
    removes the override again (the in-process tests use it; a plugin keeps it until exit)."""
    import socket

    original_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host
        if isinstance(host, bytes):
            name = host.decode("ascii") if host.isascii() else host.decode("idna")
        target = mapping.get(str(name).lower().rstrip(".")) if name is not None else None
        if target is not None:
            host, port = target[0].encode("ascii"), target[1]  # a loopback IP literal
        return original_getaddrinfo(host, port, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo

    def remove() -> None:
        socket.getaddrinfo = original_getaddrinfo

    return remove


def _guard_this_process() -> None:
    install_connect_guard()


def activate_from_env(environ: Mapping[str, str]) -> str | None:
    """Turn on test mode if the environment asks for it; return the notice to print, if any."""
    if not requested(environ):
        return None
    mapping = parse_resolve_map(environ.get(RESOLVE_ENV, ""))
    from credprovider.runtime.importhook import when_imported

    # A cache hit never opens a socket: importing ``socket`` (with selectors, enum ...) only to patch
    # it would cost every test-mode exec about 10% of its start, which production never pays.
    when_imported("socket", _guard_this_process)
    if mapping:

        def resolve_mapped_hosts() -> None:
            install_resolve_map(mapping)  # for the rest of the process

        when_imported("socket", resolve_mapped_hosts)
    hosts = ", ".join(sorted(mapping)) or "none"
    return f"test mode: only loopback connections are allowed; overridden hosts: {hosts}"

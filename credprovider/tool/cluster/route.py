"""How the API server is reached: through which proxy, and under which TLS name, as client-go
chooses them (kubectl reaches it so; the tool must where kubectl does).

* **The proxy.** A kubeconfig cluster's ``proxy-url`` is used for every request (client-go's
  ``rest.Config.Proxy``); else the environment's, by Go's rules (golang.org/x/net
  ``http/httpproxy``): ``https_proxy``/``HTTPS_PROXY`` for an https server, ``http_proxy``/
  ``HTTP_PROXY`` for http (the lower-case name first), a value without a scheme taken as
  ``http://``; never for ``localhost`` or a loopback address; ``no_proxy``/``NO_PROXY`` a comma list
  of ``*``, IP addresses and CIDR ranges (matching an address only), and names (``example.com``
  matches it and its subdomains, ``.example.com`` and ``*.example.com`` the subdomains only), each
  with an optional ``:port``. An ``http://`` or ``https://`` proxy is used (the TLS to the API
  server stays end to end, through ``CONNECT``), and a ``socks5://`` or ``socks5h://`` one, as
  client-go's (golang.org/x/net/proxy) is: the API server's name resolved by the proxy, its user
  and password from the URL; any other scheme is refused in one line.
* **The TLS name.** A cluster's ``tls-server-name`` is the name sent in SNI and checked in the
  server's certificate in place of the server URL's host (an API server reached by address).

lightkube reads neither setting and the tool gives its client no environment (``trust_env``: that
would also let ``SSL_CERT_FILE`` and ``~/.netrc`` in): before this, ``fleet status`` went around an
operator's proxy and a ``tls-server-name`` failed the certificate check. Pure; not on the plugins'
exec path.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from credprovider.errors import CredproviderError
from credprovider.runtime.excerpt import quoted
from credprovider.runtime.redact import without_userinfo

PROXY_SCHEMES: Final = ("http", "https", "socks5", "socks5h")
SOCKS_SCHEMES: Final = ("socks5", "socks5h")
SOCKS_PORT: Final = 1080  # a socks5:// URL without a port (golang.org/x/net/proxy FromURL)
# The schemes a server is reached by, for which the environment names a proxy.
SERVER_SCHEMES: Final = ("http", "https")
_DEFAULT_PORTS: Final = {"http": "80", "https": "443"}


class RouteError(CredproviderError):
    """A proxy setting the tool cannot use."""


@dataclass(frozen=True)
class Route:
    proxy: str | None = None  # the proxy's URL
    tls_server_name: str | None = None


DIRECT: Final = Route()


def route(server: str, cluster: Mapping[str, Any], environ: Mapping[str, str]) -> Route:
    """The way to ``server`` for a kubeconfig ``cluster`` entry (``{}`` in-cluster), given the
    environment; :class:`RouteError` for a proxy that cannot be used."""
    name = cluster.get("tls-server-name")
    setting = cluster.get("proxy-url")
    if isinstance(setting, str) and setting:
        proxy: str | None = _checked(setting, "the kubeconfig's proxy-url")
    else:
        proxy = environment_proxy(server, environ)
    return Route(proxy, name if isinstance(name, str) and name else None)


def environment_proxy(server: str, environ: Mapping[str, str]) -> str | None:
    """The proxy Go's ``ProxyFromEnvironment`` would use for ``server``, or ``None``."""
    parts = urlsplit(server)
    scheme = parts.scheme.lower()
    if scheme not in SERVER_SCHEMES:
        return None
    names = (f"{scheme}_proxy", f"{scheme.upper()}_PROXY")
    value = next((environ[n] for n in names if environ.get(n)), "")
    if not value:
        return None
    host = (parts.hostname or "").lower()
    port = str(parts.port) if _port_of(parts) else _DEFAULT_PORTS[scheme]
    if not _uses_proxy(host, port, environ.get("no_proxy") or environ.get("NO_PROXY") or ""):
        return None
    variable = next(n for n in names if environ.get(n))
    return _checked(value if "://" in value else f"http://{value}", variable)


def _port_of(parts: Any) -> bool:
    try:
        return parts.port is not None
    except ValueError:
        return False


def _checked(proxy: str, where: str) -> str:
    scheme = urlsplit(proxy).scheme.lower()
    if scheme not in PROXY_SCHEMES:
        raise RouteError(
            f"{where} {quoted(without_userinfo(proxy))} is not an http://, https:// or "
            "socks5:// proxy: give one of those, or run it where the API server is reached "
            "directly"
        )
    parts = urlsplit(proxy)
    try:
        port = parts.port
    except ValueError:
        raise RouteError(
            f"{where} {quoted(without_userinfo(proxy))} has no valid port: give host:port"
        ) from None
    if scheme in SOCKS_SCHEMES:  # its scheme in lower case, the port net/http's default if none
        netloc = parts.netloc if port is not None else f"{parts.netloc}:{SOCKS_PORT}"
        return parts._replace(scheme=scheme, netloc=netloc).geturl()
    return proxy


def _uses_proxy(host: str, port: str, no_proxy: str) -> bool:
    """Go's ``useProxy``: not for localhost, a loopback address, or a ``no_proxy`` match."""
    if host == "localhost":
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None and address.is_loopback:
        return False
    for entry in (part.strip().lower() for part in no_proxy.split(",")):
        if entry and _matches(entry, host, port, address):
            return False
    return True


def _matches(
    entry: str, host: str, port: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address | None
) -> bool:
    if entry == "*":
        return True
    if "/" in entry:
        try:
            return address is not None and address in ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False
    name, wanted_port = _split(entry)
    if not name:
        return False
    if wanted_port and wanted_port != port:
        return False
    try:
        listed = ipaddress.ip_address(name)
    except ValueError:
        listed = None
    if listed is not None or address is not None:
        return listed == address  # an address matches only itself, never a name
    if name.startswith("*."):
        name = name[1:]
    if name.startswith("."):
        return host.endswith(name)
    return host == name or host.endswith(f".{name}")


def _split(entry: str) -> tuple[str, str]:
    """``host``, ``host:port``, ``[v6]:port`` or a bare IPv6 address, as (host, port)."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest.removeprefix(":")
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, port
    return entry, ""

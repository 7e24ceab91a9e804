"""The proxy client-go would use for the API server (credprovider/tool/cluster/route.py): the
kubeconfig's proxy-url, else the environment's by golang.org/x/net http/httpproxy's rules."""

from __future__ import annotations

import pytest

from credprovider.tool.cluster.route import Route, RouteError, route

P = "http://proxy.internal:3128"


@pytest.mark.parametrize(
    ("server", "environ", "proxy"),
    [
        ("https://api.example.com", {"HTTPS_PROXY": P}, P),
        ("https://api.example.com", {"https_proxy": P, "HTTPS_PROXY": "http://other:1"}, P),
        ("https://api.example.com", {"HTTPS_PROXY": "proxy.internal:3128"}, P),  # no scheme
        ("https://api.example.com", {"HTTP_PROXY": P}, None),  # the https one only
        ("http://api.example.com", {"HTTP_PROXY": P}, P),
        ("https://localhost:6443", {"HTTPS_PROXY": P}, None),
        ("https://127.0.0.1:6443", {"HTTPS_PROXY": P}, None),
        ("https://[::1]:6443", {"HTTPS_PROXY": P}, None),
        ("https://api.example.com", {"HTTPS_PROXY": P, "NO_PROXY": "*"}, None),
        ("https://api.example.com", {"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, None),
        ("https://example.com", {"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, None),
        ("https://example.com", {"HTTPS_PROXY": P, "NO_PROXY": ".example.com"}, P),
        ("https://api.example.com", {"HTTPS_PROXY": P, "NO_PROXY": "*.example.com"}, None),
        ("https://badexample.com", {"HTTPS_PROXY": P, "NO_PROXY": "example.com"}, P),
        ("https://api.example.com:6443", {"HTTPS_PROXY": P, "NO_PROXY": "api.example.com:443"}, P),
        ("https://api.example.com", {"HTTPS_PROXY": P, "NO_PROXY": "api.example.com:443"}, None),
        ("https://10.0.0.1:6443", {"HTTPS_PROXY": P, "NO_PROXY": "10.0.0.0/8"}, None),
        ("https://10.0.0.1:6443", {"HTTPS_PROXY": P, "NO_PROXY": "10.0.0.1"}, None),
        ("https://10.0.0.1:6443", {"HTTPS_PROXY": P, "NO_PROXY": "10.0.0.1:443"}, P),
        ("https://10.0.0.1:6443", {"HTTPS_PROXY": P, "NO_PROXY": "0.0.1"}, P),  # a name: no IP
        ("https://api.example.com", {"HTTPS_PROXY": P, "NO_PROXY": "10.0.0.0/8, foo"}, P),
        ("https://[fd00::1]:6443", {"HTTPS_PROXY": P, "NO_PROXY": "fd00::/8"}, None),
        ("https://API.Example.com", {"HTTPS_PROXY": P, "NO_PROXY": " EXAMPLE.COM "}, None),
    ],
)
def test_the_environments_proxy_is_gos(server: str, environ: dict[str, str], proxy: str) -> None:
    assert route(server, {}, environ) == Route(proxy)


def test_the_kubeconfigs_proxy_url_and_tls_server_name_come_first() -> None:
    cluster = {"proxy-url": "https://bastion:8443", "tls-server-name": "kubernetes"}
    assert route("https://127.0.0.1:6443", cluster, {"HTTPS_PROXY": P}) == Route(
        "https://bastion:8443", "kubernetes"
    )


@pytest.mark.parametrize(
    ("proxy", "used"),
    [
        ("socks5://127.0.0.1:1080", "socks5://127.0.0.1:1080"),
        ("socks5h://u:p@bastion", "socks5h://u:p@bastion:1080"),  # x/net/proxy's default port
        ("SOCKS5://[::1]", "socks5://[::1]:1080"),
        ("Socks5h://h:99", "socks5h://h:99"),
    ],
)
def test_a_socks5_proxy_is_used_as_client_go_uses_it(proxy: str, used: str) -> None:
    assert route("https://api.example.com", {"proxy-url": proxy}, {}).proxy == used
    assert route("https://api.example.com", {}, {"HTTPS_PROXY": proxy}).proxy == used


@pytest.mark.parametrize("proxy", ["socks4://127.0.0.1:1080", "ftp://u:p@bastion:21"])
def test_another_scheme_is_refused(proxy: str) -> None:
    with pytest.raises(RouteError, match="is not an http://, https:// or socks5:// proxy") as no:
        route("https://api.example.com", {"proxy-url": proxy}, {})
    assert ":p@" not in str(no.value)
    with pytest.raises(RouteError, match="HTTPS_PROXY"):
        route("https://api.example.com", {}, {"HTTPS_PROXY": proxy})

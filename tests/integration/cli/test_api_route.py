"""The API server reached as kubectl reaches it: through the environment's proxy or the
kubeconfig's ``proxy-url``, under its ``tls-server-name``, from ``$KUBECONFIG``'s list of files
(credprovider/tool/cluster/route.py, kubeconfigs.py).
``credprovider fleet status`` runs in a network namespace holding nothing but a CONNECT proxy and
an API server stand-in known to the proxy alone as ``api.cluster.test`` (emulators/proxy.py): a
client that went around the proxy reaches nothing. Before, lightkube's client was given no
environment and read neither setting: every such operator's ``fleet status`` failed to connect."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from emulators.http import FakeRequest, FakeResponse, serve
from emulators.proxy import API_NAME, API_PORT, PROXY_PORT, SOCKS_AUTH, SOCKS_PORT, ApiBehindProxy
from emulators.tls import CertAuthority
from tests.helpers import config_file, fake_kubelet, provider_entry, run_cli

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace of the test's own")

TOKEN = "operator-token-0123456789abcdef"
PROXY = f"http://127.0.0.1:{PROXY_PORT}"


def node_list(name: str) -> Callable[[FakeRequest], FakeResponse]:
    """An API server stand-in whose every answer is a NodeList of one node, ``name``."""

    def answer(request: FakeRequest) -> FakeResponse:
        return FakeResponse.json({"kind": "NodeList", "apiVersion": "v1", "metadata": {},
                                  "items": [{"metadata": {"name": name}}]})  # fmt: skip

    return answer


def kubeconfig(directory: Path, server: str, ca: Path, **cluster: str) -> Path:
    path = directory / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server,
                                               "certificate-authority": str(ca), **cluster}}],
        "users": [{"name": "u", "user": {"token": TOKEN}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }))  # fmt: skip
    return path


def status(
    tmp_path: Path, test_ca: CertAuthority, config: Path, env: dict[str, str], **run: bool
) -> tuple[str, str, dict[str, object]]:
    cert, key = test_ca.issue(API_NAME, hosts=(API_NAME,))
    servers = ApiBehindProxy(tmp_path / "servers.log", cert, key)
    proxies = {name: "" for name in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy")}
    done = run_cli("fleet", "status", f"--kubeconfig={config}", wrapper=servers.wrapper(),
                   env={**servers.env(), **proxies, **env}, **run)  # fmt: skip
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    return done.stdout, done.stderr, servers.seen()


@pytest.mark.parametrize("use_bundle", [False, True], ids=["source", "bundle"])
def test_the_environments_proxy_is_used_as_kubectl_uses_it(
    tmp_path: Path, test_ca: CertAuthority, use_bundle: bool
) -> None:
    config = kubeconfig(tmp_path, f"https://{API_NAME}:{API_PORT}", test_ca.bundle)
    out, err, seen = status(tmp_path, test_ca, config, {"HTTPS_PROXY": PROXY},
                            use_bundle=use_bundle)  # fmt: skip
    assert "node-behind-proxy" in out, err
    assert seen["tunnels"] == [f"{API_NAME}:{API_PORT}"]
    assert seen["authorizations"] == [f"Bearer {TOKEN}"]  # inside the tunnel, never the proxy's


def test_no_proxy_goes_direct(tmp_path: Path, test_ca: CertAuthority) -> None:
    """NO_PROXY naming the server's domain: no tunnel (and here, no way to the server)."""
    config = kubeconfig(tmp_path, f"https://{API_NAME}:{API_PORT}", test_ca.bundle)
    bypass = {"https_proxy": PROXY, "no_proxy": "localhost,.cluster.test"}
    out, err, seen = status(tmp_path, test_ca, config, bypass)
    assert seen["tunnels"] == [] and "node-behind-proxy" not in out
    assert "credprovider fleet status: listing the nodes:" in err or "no API server" in err, err


def test_the_kubeconfigs_proxy_url_is_used(tmp_path: Path, test_ca: CertAuthority) -> None:
    config = kubeconfig(tmp_path, f"https://{API_NAME}:{API_PORT}", test_ca.bundle,
                        **{"proxy-url": PROXY})  # fmt: skip
    out, err, seen = status(tmp_path, test_ca, config, {})
    assert "node-behind-proxy" in out, err
    assert seen["tunnels"] == [f"{API_NAME}:{API_PORT}"]


@pytest.mark.parametrize(
    ("proxy", "use_bundle"),
    [(f"socks5://{SOCKS_AUTH}@127.0.0.1:{SOCKS_PORT}", True), ("socks5h://127.0.0.1", False)],
    ids=["socks5-password-bundle", "socks5h-default-port"],
)
def test_a_socks5_proxy_url_is_used(
    tmp_path: Path, test_ca: CertAuthority, proxy: str, use_bundle: bool
) -> None:
    """kubectl's ``proxy-url: socks5://`` (client-go dials it with golang.org/x/net/proxy): the
    API server's name goes to the proxy, which alone resolves it; its user and password from the
    URL, never printed; a URL without a port is the proxy's 1080."""
    config = kubeconfig(tmp_path, f"https://{API_NAME}:{API_PORT}", test_ca.bundle,
                        **{"proxy-url": proxy})  # fmt: skip
    out, err, seen = status(tmp_path, test_ca, config, {}, use_bundle=use_bundle)
    assert "node-behind-proxy" in out, err
    assert seen["socks"] == [f"{API_NAME}:{API_PORT}"] and seen["tunnels"] == []
    assert seen["socks_users"] == (["operator"] if "@" in proxy else [])
    assert seen["authorizations"] == [f"Bearer {TOKEN}"]
    assert "socks-secret" not in out + err


def test_a_socks_proxy_refusing_the_password_is_one_line(
    tmp_path: Path, test_ca: CertAuthority
) -> None:
    config = kubeconfig(tmp_path, f"https://{API_NAME}:{API_PORT}", test_ca.bundle,
                        **{"proxy-url": f"socks5://operator:wrong-secret@127.0.0.1:{SOCKS_PORT}"})  # fmt: skip
    out, err, seen = status(tmp_path, test_ca, config, {})
    assert "node-behind-proxy" not in out and seen["socks"] == []
    assert len(err.strip().splitlines()) == 1 and "wrong-secret" not in err, err


@pytest.mark.parametrize(
    ("proxy", "said"),
    [
        ("ftp://user:secret@127.0.0.1:21", "'ftp://…@127.0.0.1:21' is not an http://, https:// or "
         "socks5:// proxy"),
        ("socks5://user:secret@127.0.0.1:port", "'socks5://…@127.0.0.1:port' has no valid port"),
    ],
)  # fmt: skip
def test_a_proxy_url_that_cannot_be_used_is_one_line(
    tmp_path: Path, test_ca: CertAuthority, proxy: str, said: str
) -> None:
    config = kubeconfig(tmp_path, f"https://{API_NAME}:{API_PORT}", test_ca.bundle,
                        **{"proxy-url": proxy})  # fmt: skip
    _, err, seen = status(tmp_path, test_ca, config, {})
    assert seen["tunnels"] == [] and seen["socks"] == [] and "secret" not in err
    assert f"the kubeconfig's proxy-url {said}" in err


def test_the_tls_server_name_is_the_name_checked(tmp_path: Path, test_ca: CertAuthority) -> None:
    """An API server reached by address whose certificate names it (loopback: never proxied)."""
    by_address = f"https://127.0.0.1:{API_PORT}"
    config = kubeconfig(tmp_path, by_address, test_ca.bundle, **{"tls-server-name": API_NAME})
    out, err, seen = status(tmp_path, test_ca, config, {"HTTPS_PROXY": PROXY})
    assert "node-behind-proxy" in out, err
    assert seen["tunnels"] == []
    config = kubeconfig(tmp_path, by_address, test_ca.bundle)
    out, err, _ = status(tmp_path, test_ca, config, {})
    assert "node-behind-proxy" not in out and "certificate" in err, err


def test_fleet_status_reads_kubeconfigs_list(tmp_path: Path) -> None:
    """The operator's KUBECONFIG=a:b, the context in a, the cluster and user in b."""

    with serve(node_list("merged-node")) as server:
        a = tmp_path / "a"
        context = {"name": "c", "context": {"cluster": "c", "user": "u"}}
        a.write_text(json.dumps({"clusters": [], "current-context": "c", "contexts": [context]}))
        b = tmp_path / "b"
        b.write_text(json.dumps({"clusters": [{"name": "c", "cluster": {"server": server.url}}],
                                 "users": [{"name": "u", "user": {"token": "t"}}]}))  # fmt: skip
        done = run_cli("fleet", "status", env={"KUBECONFIG": f"{a}:{b}"})
    assert "merged-node" in done.stdout, done.stderr


def test_fleet_status_takes_a_context(tmp_path: Path) -> None:
    """--context picks another of the kubeconfig's contexts, as kubectl's does."""

    with serve(node_list("other-context")) as server:
        config = tmp_path / "config"
        config.write_text(json.dumps({
            "clusters": [{"name": "up", "cluster": {"server": server.url}},
                         {"name": "down", "cluster": {"server": "http://127.0.0.1:9"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "up", "context": {"cluster": "up", "user": "u"}},
                         {"name": "down", "context": {"cluster": "down", "user": "u"}}],
            "current-context": "down",
        }))  # fmt: skip
        done = run_cli("fleet", "status", f"--kubeconfig={config}", "--context=up")
        missing = run_cli("fleet", "status", f"--kubeconfig={config}", "--context=nope")
        down = run_cli("fleet", "status", f"--kubeconfig={config}")
    assert "other-context" in done.stdout, done.stderr
    assert missing.returncode == 1 and missing.stderr == (
        f"credprovider fleet status: the kubeconfig {config} has no context 'nope' (its contexts: "
        "'up', 'down'): give one with --context\n"
    )
    # an API server that refuses the connection: which one is said
    assert down.returncode == 1 and down.stderr.endswith(
        " (the API server at http://127.0.0.1:9)\n"
    ), down.stderr
    unset = json.loads(config.read_text())
    del unset["current-context"]
    config.write_text(json.dumps(unset))
    none = run_cli("fleet", "status", f"--kubeconfig={config}")
    assert none.returncode == 1 and none.stderr == (
        f"credprovider fleet status: the kubeconfig {config} sets no current-context (its "
        "contexts: 'up', 'down'): give one with --context\n"
    )
    for width in ("-5", "0", "100001", "²"):  # -5 cut the detail from its end, 0 showed none
        refused = run_cli("fleet", "status", f"--kubeconfig={config}", f"--width={width}")
        assert refused.returncode == 2 and "is not a width from 10 to 10000" in refused.stderr


def test_doctor_reads_the_node_through_the_kubelets_proxy(
    tmp_path: Path, test_ca: CertAuthority
) -> None:
    """A node behind a proxy: the kubelet's environment names it (HTTPS_PROXY in its unit), the
    operator's shell does not. doctor reads the Node with the kubelet's kubeconfig in the
    kubelet's environment, as the kubelet reaches the API server: through the proxy. (It went
    direct, reached nothing, and blamed the API server.)"""
    config = kubeconfig(tmp_path, f"https://{API_NAME}:{API_PORT}", test_ca.bundle)
    cert, key = test_ca.issue(API_NAME, hosts=(API_NAME,))
    servers = ApiBehindProxy(tmp_path / "servers.log", cert, key)
    proxies = {name: "" for name in ("HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy")}
    kubelet = fake_kubelet(
        [f"--kubeconfig={config}", f"--image-credential-provider-bin-dir={tmp_path}",
         f"--image-credential-provider-config={config_file(tmp_path, provider_entry())}"],
        {**os.environ, **proxies, "HTTPS_PROXY": PROXY},
    )  # fmt: skip
    try:
        done = run_cli("doctor", "--json", "--image=none", "--node-name", "node-behind-proxy",
                       wrapper=servers.wrapper(), env={**servers.env(), **proxies})  # fmt: skip
    finally:
        kubelet.kill()
        kubelet.wait()
    assert "Traceback" not in done.stderr, done.stderr
    seen = servers.seen()
    assert seen["tunnels"] == [f"{API_NAME}:{API_PORT}"], done.stdout
    assert seen["authorizations"] == [f"Bearer {TOKEN}"]

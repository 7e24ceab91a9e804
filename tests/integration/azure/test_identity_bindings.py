"""AKS identity bindings (upstream PR #9907): the pod's service account token exchanged at the
identity-bindings endpoint (a TLS stand-in named ib.aks.example, dialled at the API server's
address, trusting only the cluster CA at /etc/kubernetes/certs/ca.crt, which each run finds in
an overlay of /etc), then at the registry; upstream's precedence and error strings."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from emulators.azure import FakeIdentityBindings, claims
from emulators.http import FakeResponse, serve
from emulators.kubelet_exec import PluginRun, request_bytes, run_plugin
from emulators.tls import CertAuthority, make_test_ca
from tests.integration.azure.common import PLUGIN, SA_TOKEN, assert_refresh_token_answer
from tests.integration.conftest import Azure

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the cluster CA's path needs an overlay")

SNI = "ib.aks.example"
CA_PATH = "/etc/kubernetes/certs/ca.crt"
CLIENT = "ib-client-id-0001"
ANNOTATED = {"kubernetes.azure.com/acr-client-id": CLIENT}


@dataclass
class Bindings:
    fake: FakeIdentityBindings
    port: int
    azure: Azure
    ca: CertAuthority

    def run(
        self,
        image: str = "myreg.azurecr.io/app",
        *flags: str,
        token: str | None = SA_TOKEN,
        annotations: dict[str, str] | None = None,
        ca: bytes | None = None,
        use_bundle: bool = False,
    ) -> PluginRun:
        config = self.azure.config(useManagedIdentityExtension=True, tenantId="node-tenant")
        return run_plugin(
            PLUGIN,
            request_bytes(image, token=token, annotations=ANNOTATED if annotations is None else annotations),
            [config, "--ib-sni-name", f"{SNI}:{self.port}", "--ib-apiserver-ip", "127.0.0.1",
             *flags, "-v=4"],
            self.azure.env,
            use_bundle=use_bundle,
            node_files={CA_PATH: self.ca.bundle.read_bytes() if ca is None else ca},
        )  # fmt: skip


@pytest.fixture
def bindings(azure: Azure, test_ca: CertAuthority) -> Iterator[Bindings]:
    fake = FakeIdentityBindings(tokens={SA_TOKEN: {CLIENT, "default-client"}})
    with serve(fake, tls=fake.watch(test_ca.server_context(SNI))) as server:
        yield Bindings(fake, int(server.address.rsplit(":", 1)[1]), azure, test_ca)


def test_the_pods_token_is_exchanged_through_identity_bindings(
    bindings: Bindings, use_bundle: bool
) -> None:
    run = bindings.run(use_bundle=use_bundle)
    assert_refresh_token_answer(bindings.azure, run, "myreg.azurecr.io")
    [form] = bindings.fake.requests
    assert form == {
        "grant_type": "client_credentials",
        "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        "client_assertion": SA_TOKEN,
        "client_id": CLIENT,
        "scope": "https://containerregistry.azure.net/.default",
    }
    assert bindings.fake.server_names == [SNI]  # TLS named the endpoint, not the address dialled
    # the registry exchanged the bound identity's token, with azure.json's tenant
    [(_, exchange)] = bindings.azure.acr.exchanges
    assert claims(exchange["access_token"])["appid"] == CLIENT
    assert exchange["tenant"] == "node-tenant"
    assert bindings.azure.aad.token_requests == [] and bindings.azure.imds.queries == []
    assert SA_TOKEN not in run.stderr and exchange["access_token"] not in run.stderr


def test_the_default_client_id_and_an_empty_annotation(bindings: Bindings) -> None:
    """No annotation: --ib-default-client-id. An annotation key with an empty value wins over
    the default (as upstream), so nothing names a client: upstream's error."""
    run = bindings.run("myreg.azurecr.io/app", "--ib-default-client-id", "default-client",
                       annotations={})  # fmt: skip
    assert run.code == 0, run.stderr
    assert bindings.fake.requests[-1]["client_id"] == "default-client"
    run = bindings.run("myreg.azurecr.io/app", "--ib-default-client-id", "default-client",
                       annotations={"kubernetes.azure.com/acr-client-id": ""})  # fmt: skip
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines[-1] == (
        f"{PLUGIN}: error: failed to get identity bindings token credential for image "
        "myreg.azurecr.io/app: client ID not found in service account annotations (checked "
        "kubernetes.azure.com/acr-client-id) and no default client ID configured"
    )
    assert len(bindings.fake.requests) == 1


def test_a_request_without_a_token_is_upstreams_error(bindings: Bindings) -> None:
    run = bindings.run(token=None, annotations={})
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines[-1] == (
        f"{PLUGIN}: error: failed to get identity bindings token credential for image "
        "myreg.azurecr.io/app: service account token not found in request"
    )
    assert bindings.fake.requests == []


def test_identity_bindings_come_before_the_annotated_token_and_after_a_mirror(
    bindings: Bindings,
) -> None:
    """Upstream's precedence: a mirrored image uses the node's managed identity; otherwise
    identity bindings, even when the token is annotated for KEP-4412's client assertion."""
    both = {**ANNOTATED, "kubernetes.azure.com/acr-tenant-id": "pod-tenant"}
    run = bindings.run(annotations=both)
    assert run.code == 0, run.stderr
    assert len(bindings.fake.requests) == 1 and bindings.azure.aad.token_requests == []
    mirrored = bindings.run("mcr.microsoft.com/app", "--registry-mirror",
                            "mcr.microsoft.com:myreg.azurecr.io", annotations=both)  # fmt: skip
    assert mirrored.code == 0, mirrored.stderr
    assert len(bindings.fake.requests) == 1  # no second request: the managed identity was used
    assert bindings.azure.imds.queries


@pytest.mark.parametrize(
    ("ca", "said"),
    [
        (b"", f"CA file {CA_PATH} is empty"),
        (b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
         f"parse CA file {CA_PATH}: no valid certificates found"),
    ],
)  # fmt: skip
def test_the_cluster_ca_file_is_checked_as_upstream_does(
    bindings: Bindings, ca: bytes, said: str
) -> None:
    run = bindings.run(ca=ca)
    assert (run.code, run.stdout) == (1, b"")
    assert said in run.error_lines[-1]
    assert bindings.fake.requests == []


def test_only_the_cluster_ca_is_trusted(bindings: Bindings, tmp_path: Path) -> None:
    """Another CA in /etc/kubernetes/certs/ca.crt: the endpoint's certificate is not trusted,
    whatever the environment's CA bundle trusts (the test CA is in it)."""
    other = make_test_ca(tmp_path / "other")
    run = bindings.run(ca=other.bundle.read_bytes())
    assert (run.code, run.stdout) == (1, b"")
    assert (
        "CERTIFICATE_VERIFY_FAILED" in run.error_lines[-1]
        or "certificate verify failed" in (run.error_lines[-1])
    )
    assert bindings.fake.requests == []


def test_a_refusal_is_upstreams_line(bindings: Bindings) -> None:
    bindings.fake.fault = FakeResponse.json(
        {"error": "invalid_client", "error_description": "AADSTS700213: no matching federated identity record"},
        status=401,
    )  # fmt: skip
    run = bindings.run()
    assert (run.code, run.stdout) == (1, b"")
    assert "token request failed with status 401: " in run.error_lines[-1]
    assert "AADSTS700213" in run.error_lines[-1]
    assert SA_TOKEN not in run.stderr

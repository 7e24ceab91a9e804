"""The loopback emulators of each cloud, with the environment a plugin needs to reach them.

Used by ``make demo`` and ``make bench`` (the pytest suites use fixtures built from the same fakes).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Collection, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from emulators.aws import FakeEcr, ecr_env
from emulators.azure import AAD_HOSTS, FakeAad, FakeAcr, FakeImds
from emulators.gcp import FakeIamCredentials, FakeMetadata, FakeSts
from emulators.http import FakeServer, serve
from emulators.tls import CertAuthority, make_test_ca

# Keeps every SDK away from this machine's credentials and real metadata services.
SAFE_ENV = {
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/nonexistent",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    "GCE_METADATA_HOST": "127.0.0.1:9",
    "NO_GCE_CHECK": "true",
    "CREDPROVIDER_TEST_LOOPBACK_ONLY": "1",
}
ACR_REGISTRY = "contoso.azurecr.io"


@dataclass
class Emulator:
    env: dict[str, str]
    fakes: dict[str, object] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    servers: dict[str, FakeServer] = field(default_factory=dict)


@contextmanager
def aws_emulator(with_moto: bool = True) -> Iterator[Emulator]:
    """The project's ECR/ECR Public fake, and moto (ECR, STS) unless ``with_moto`` is false."""
    fake = FakeEcr()
    with serve(fake) as ecr:
        env = {**SAFE_ENV, **ecr_env(ecr.url)}
        if not with_moto:
            yield Emulator(env, {"ecr": fake}, servers={"ecr": ecr})
            return
        from moto.server import ThreadedMotoServer

        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        moto.start()
        host, port = moto.get_host_and_port()
        try:
            yield Emulator(
                {**env, "AWS_ENDPOINT_URL_STS": f"http://{host}:{port}"},
                {"ecr": fake, "moto": f"http://{host}:{port}"},
                servers={"ecr": ecr},
            )
        finally:
            moto.stop()


# The account the GCP emulator lets the node's default service account impersonate.
GCP_PULLER = "puller@registry-project.iam.gserviceaccount.com"


@contextmanager
def gcp_emulator() -> Iterator[Emulator]:
    """The GCE metadata server fake, and Google STS and the IAM Credentials API over TLS (test CA,
    loopback resolve); the node's account may impersonate :data:`GCP_PULLER`."""
    metadata, sts_fake, iam = FakeMetadata(), FakeSts(), FakeIamCredentials()
    iam.callers[metadata.access_token] = metadata.email
    iam.allow(metadata.email, GCP_PULLER)
    with tempfile.TemporaryDirectory() as directory, serve(metadata) as meta:
        ca = make_test_ca(Path(directory))
        with (
            serve(sts_fake, tls=ca.server_context("sts.googleapis.com")) as sts,
            serve(iam, tls=ca.server_context("iamcredentials.googleapis.com")) as iam_server,
        ):
            yield Emulator(
                {
                    **SAFE_ENV,
                    "GCE_METADATA_HOST": meta.address,
                    "REQUESTS_CA_BUNDLE": str(ca.bundle),
                    "CREDPROVIDER_TEST_RESOLVE": f"sts.googleapis.com={sts.address},"
                    f"iamcredentials.googleapis.com={iam_server.address}",
                },
                {"metadata": metadata, "sts": sts_fake, "iam": iam},
                servers={"metadata": meta, "sts": sts, "iam": iam_server},
            )


@contextmanager
def azure_emulator(
    registries: tuple[str, ...] = (ACR_REGISTRY,),
    certificate_names: tuple[str, ...] | None = None,
    authority_hosts: tuple[str, ...] = (),
    ca: CertAuthority | None = None,
) -> Iterator[Emulator]:
    """IMDS, Entra ID and an ACR registry answering as every login server in ``registries``
    (TLS with ``ca``, or a test CA of its own; loopback resolve). The registry's certificate names
    ``certificate_names`` (wildcards allowed; default: the registries); Entra ID also answers as
    ``authority_hosts``. ``files['config']`` is an azure.json for the node's user-assigned managed
    identity."""
    imds, aad, acr = FakeImds(), FakeAad(), FakeAcr()
    with tempfile.TemporaryDirectory() as directory:
        authority = ca or make_test_ca(Path(directory) / "ca")
        aad_hosts = (*AAD_HOSTS, *authority_hosts)
        with (
            serve(imds) as imds_server,
            serve(aad, authority.server_context(*aad_hosts)) as aad_server,
            serve(acr, authority.server_context(*(certificate_names or registries))) as acr_server,
        ):
            resolve = [f"{host}={aad_server.address}" for host in aad_hosts]
            resolve += [f"{registry}={acr_server.address}" for registry in registries]
            config = Path(directory) / "azure.json"
            config.write_text(
                json.dumps(
                    {
                        "cloud": "AzurePublicCloud",
                        "tenantId": "demo-tenant",
                        "useManagedIdentityExtension": True,
                        "userAssignedIdentityID": "kubelet-identity-client-id",
                    }
                )
            )
            yield Emulator(
                {
                    **SAFE_ENV,
                    "AZURE_POD_IDENTITY_AUTHORITY_HOST": imds_server.url,
                    "REQUESTS_CA_BUNDLE": str(authority.bundle),
                    "CREDPROVIDER_TEST_RESOLVE": ",".join(resolve),
                },
                {"imds": imds, "aad": aad, "acr": acr},
                {"config": str(config)},
                {"imds": imds_server, "aad": aad_server, "acr": acr_server},
            )


# The registry plugin's stand-ins (registries_emulator): the registry, the audience their trust
# entries name, and the one service account they trust.
REGISTRY_HOST = "registry.example.test"
REGISTRY_AUDIENCE = "registry.example.test"
REGISTRY_SUBJECT = "system:serviceaccount:team:puller"
REGISTRY_ROBOT = "team+puller"


@contextmanager
def registries_emulator(serving: Collection[str] | None = None) -> Iterator[Emulator]:
    """A cluster's service-account issuer (discovery and JWKS over loopback HTTP) and a stand-in
    for each of the registry plugin's backends over TLS (test CA in ``files['ca']``), each
    trusting the issuer's tokens of audience :data:`REGISTRY_AUDIENCE` for service account
    ``team/puller`` only: Quay (robot ``team+puller``, both endpoints), Artifactory (integration
    ``k8s``, user ``puller``), Cloudsmith (organization ``acme``, service ``pullers``), Vault
    (role ``pull``, secret ``registry/team``) and the API server's Secret reads (``team/pull``,
    for :data:`REGISTRY_HOST`). ``fakes['issuer'].token()`` signs a pod's token. ``serving``:
    the stand-ins to serve (default: all; each server's stop costs its poll interval)."""
    from emulators.federation import (
        FakeArtifactory,
        FakeCloudsmith,
        FakeQuay,
        FakeSecrets,
        FakeVault,
        Issuer,
        Verifier,
        dockerconfigjson,
    )

    issuer = Issuer()
    with (
        tempfile.TemporaryDirectory() as directory,
        serve(issuer) as issuer_server,
        ExitStack() as stack,
    ):
        issuer.url = issuer_server.url.rstrip("/")
        verifier = Verifier(issuer.url)
        audience, subject = REGISTRY_AUDIENCE, REGISTRY_SUBJECT
        secret = dockerconfigjson({REGISTRY_HOST: ("secret-user", "secret-password-0123456789")})
        fakes = {
            "quay": FakeQuay(verifier, robots={REGISTRY_ROBOT: (issuer.url, subject)},
                             audience=audience),
            "artifactory": FakeArtifactory(verifier, providers={"k8s": (audience, {subject: "puller"})}),
            "cloudsmith": FakeCloudsmith(verifier, services={"pullers": (audience, subject)}),
            "vault": FakeVault(verifier, roles={("kubernetes", "pull"): (audience, "team", "puller")},
                               kv={("secret", "registry/team"): {
                                   "username": "vault-user", "password": "vault-password-0123456789"}}),
            "secrets": FakeSecrets(verifier, secrets={("team", "pull"): secret},
                                   readers={("team", "puller")}, audiences=(audience,)),
        }  # fmt: skip
        ca = make_test_ca(Path(directory))
        tls = ca.server_context("127.0.0.1")
        servers = {
            name: stack.enter_context(serve(fake, tls))
            for name, fake in fakes.items()
            if serving is None or name in serving
        }
        yield Emulator(dict(SAFE_ENV), {"issuer": issuer, **fakes}, {"ca": str(ca.bundle)}, servers)

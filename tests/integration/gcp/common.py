"""What the auth-provider-gcp tests share: the fixed keys of the gcr flow, a service account token,
the workload identity provider, and the env that points the plugin at the fakes."""

from __future__ import annotations

from emulators.http import FakeServer
from emulators.tls import CertAuthority

PLUGIN = "auth-provider-gcp"
KSA_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZGV2OnB1bGxlciJ9.c2ln"
IDP = "https://container.googleapis.com/v1/projects/my-project/locations/us-central1/clusters/c1"
# A self-managed cluster's issuer as a workload identity pool provider (--sts-audience)
POOL = (
    "//iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/"
    "onprem-pool/providers/cluster-a"
)
FIXED_KEYS = [
    "container.cloud.google.com",
    "gcr.io",
    "*.gcr.io",
    "*.pkg.dev",
    "container.cloud.google.com:443",
    "gcr.io:443",
    "*.gcr.io:443",
    "*.pkg.dev:443",
]


def gcp_env(
    metadata_server: FakeServer,
    test_ca: CertAuthority | None = None,
    sts_server: FakeServer | None = None,
    **extra: str,
) -> dict[str, str]:
    env = {"GCE_METADATA_HOST": metadata_server.address}
    if test_ca is not None:
        env["REQUESTS_CA_BUNDLE"] = str(test_ca.bundle)
    if sts_server is not None:
        env["CREDPROVIDER_TEST_RESOLVE"] = f"sts.googleapis.com={sts_server.address}"
    env.update(extra)
    return env

"""The service-account-token run (KEP-4412) through the real control plane: pure data, and the
steps tests/e2e/node.py takes inside the sandbox.

One config, four providers: the shipped service-account examples (config/examples/), each on its
cloud's registries so that every pull says which provider (and which service account) it came from:

* ``auth-provider-gcp``, Workload Identity (``cacheType: ServiceAccount``, optional annotation):
  pods of an annotated service account pull with the federated token Google STS gave for their
  own service account token; pods of a plain one with the node's token;
* ``ecr-credential-provider`` (``cacheType: Token``): the role of the pod's service account,
  assumed with the pod's own token, one exec per pod;
* ``acr-credential-provider`` (``requireServiceAccount: true``, a required annotation): the
  service account's client id, through Entra's token exchange with the pod's token; a pod whose
  service account lacks the annotation is never asked about;
* ``auth-provider-gcp-ungranted``: an audience the node was never granted (RBAC
  ``request-serviceaccounts-token-audience``): the kubelet cannot get a token, and the pod pulls
  without credentials.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from release.bundle import REPO
from tests.e2e.scenario import ACR_LOGIN_SERVER, ECR_ACCOUNT

EXAMPLES = REPO / "config" / "examples"

NAMESPACE = "default"
GCP_AUDIENCE = "my-project.svc.id.goog"
ECR_AUDIENCE = "sts.amazonaws.com"
ACR_AUDIENCE = "api://AzureADTokenExchange"
UNGRANTED_AUDIENCE = "ungranted-project.svc.id.goog"
# a host only the ungranted provider claims (the shipped Google provider claims every Google one)
UNGRANTED_HOST = "registry.ungranted.example"
POD_IDENTITY_AUDIENCE = "pods.eks.amazonaws.com"
GRANTED = (GCP_AUDIENCE, ECR_AUDIENCE, ACR_AUDIENCE, POD_IDENTITY_AUDIENCE)
ECR_ROLE = f"arn:aws:iam::{ECR_ACCOUNT}:role/puller"
ACR_CLIENT_ID = "workload-client-id"
ECR_HOST = f"{ECR_ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com"

SERVICE_ACCOUNTS = {
    "gcp-wi": {"iam.gke.io/enable-wi-image-pull": "true"},
    "plain": {},
    "verifier": {},  # only in wave 3: the kubelet has no answer cached for it
    "ecr-role": {"eks.amazonaws.com/ecr-role-arn": ECR_ROLE},
    "acr-wi": {
        "kubernetes.azure.com/acr-client-id": ACR_CLIENT_ID,
        "kubernetes.azure.com/acr-tenant-id": "demo-tenant",
    },
    "pod-identity": {},  # EKS Pod Identity: the association is EKS', no annotation
}


@dataclass(frozen=True)
class TokenPull:
    """One pod: its service account, its image, the provider it must get credentials from (None:
    none), what those credentials are (``sts``, ``node``, ``ecr``, ``acr``), and its wave (the
    second starts once the first has pulled: a pod of the same service account then finds the
    kubelet's cache filled, or not, by cacheType)."""

    pod: str
    service_account: str
    image: str
    provider: str | None
    credential: str | None
    wave: int = 1
    policy: str = "Always"


PULLS = (
    TokenPull("wi-1", "gcp-wi", "us-docker.pkg.dev/my-project/repo/app:1", "auth-provider-gcp", "sts"),
    TokenPull("wi-2", "gcp-wi", "us-docker.pkg.dev/my-project/repo/other:1", "auth-provider-gcp", "sts", 2),
    TokenPull("node-gcp", "plain", "us-docker.pkg.dev/my-project/repo/node:1", "auth-provider-gcp", "node"),
    TokenPull("ecr-1", "ecr-role", f"{ECR_HOST}/team/a:1", "ecr-credential-provider", "ecr"),
    TokenPull("ecr-2", "ecr-role", f"{ECR_HOST}/team/b:1", "ecr-credential-provider", "ecr", 2),
    TokenPull("acr-wi", "acr-wi", f"{ACR_LOGIN_SERVER}/team/app:1", "acr-credential-provider", "acr"),
    TokenPull("acr-no-annotation", "plain", f"{ACR_LOGIN_SERVER}/team/other:1", None, None),
    TokenPull("ungranted", "gcp-wi", f"{UNGRANTED_HOST}/repo/app:1", None, None),
)  # fmt: skip

# KEP-2535 (ensure secret pulled images), wave 3: pods with imagePullPolicy IfNotPresent on the
# image wi-1 pulled in wave 1 with its service account's credentials. The node holds it; whether
# the kubelet lets each pod use it, or verifies the pod's own credentials with a new pull, is
# imagePullCredentialsVerificationPolicy's call. What the kubelet v1.36.4 does (asserted by
# tests/e2e/test_control_plane.py), per policy: (extra execs of auth-provider-gcp, extra pulls).
VERIFICATION = {
    # the image was pulled by the kubelet with wi-1's service account: a pod of another service
    # account has its own credentials fetched (an exec for it) and the image pulled again with
    # them; a pod of the same service account uses the image as it is
    None: (1, ["node"]),  # the default, NeverVerifyPreloadedImages
    "AlwaysVerify": (1, ["node"]),
    # no check: the other service account's pod runs the image pulled with wi-1's credentials
    "NeverVerify": (0, []),
}
VERIFY_PULLS = (
    TokenPull("verify-same-sa", "gcp-wi", PULLS[0].image, "auth-provider-gcp", "sts", 3, "IfNotPresent"),
    TokenPull("verify-other-sa", "verifier", PULLS[0].image, "auth-provider-gcp", "node", 3, "IfNotPresent"),
)  # fmt: skip

# Execs the kubelet has made after each wave (its metrics): one per service account (and
# annotations) for cacheType ServiceAccount, one per pod for Token, none where it has no token to
# send. (Pods of one service account started together cost one exec each: the kubelet's
# singleflight key holds the pod's own token.)
EXPECTED_EXECS = {
    1: {
        "auth-provider-gcp": 2,  # gcp-wi and plain
        "ecr-credential-provider": 1,
        "acr-credential-provider": 1,  # the pod whose service account lacks the annotation: none
        "auth-provider-gcp-ungranted": 0,  # no token for its audience
    },
    2: {
        "auth-provider-gcp": 2,  # the second gcp-wi pod: from the kubelet's cache
        "ecr-credential-provider": 2,  # a new token, a new exec
        "acr-credential-provider": 1,
        "auth-provider-gcp-ungranted": 0,
    },
}


def shipped(example: str, **replace: str) -> dict[str, Any]:
    """The one provider of a shipped example config, its placeholders replaced."""
    from credprovider.tool.node.yamldoc import load_yaml

    text = (EXAMPLES / example).read_text()
    for placeholder, value in replace.items():
        text = text.replace(placeholder, value)
    (provider,) = load_yaml(text)["providers"]
    found: dict[str, Any] = provider
    return found


def providers() -> list[dict[str, Any]]:
    """The config's providers: the shipped service-account examples (placeholders filled in), two
    of them varied for the cases the examples do not show, and one provider the node may not
    request tokens for."""
    gcp = shipped("gcp-workload-identity.yaml", PROJECT="my-project", LOCATION="l", CLUSTER="c1")
    ecr = shipped("aws-serviceaccount.yaml")
    ecr["tokenAttributes"]["cacheType"] = "Token"  # the example's is ServiceAccount
    acr = shipped("azure-serviceaccount.yaml")
    acr["tokenAttributes"].update(  # the example's are optional, with requireServiceAccount false
        requireServiceAccount=True,
        requiredServiceAccountAnnotationKeys=["kubernetes.azure.com/acr-client-id"],
        optionalServiceAccountAnnotationKeys=["kubernetes.azure.com/acr-tenant-id"],
    )
    ungranted = {
        **gcp,
        "name": "auth-provider-gcp-ungranted",
        "matchImages": [UNGRANTED_HOST],
        "tokenAttributes": {
            "serviceAccountTokenAudience": UNGRANTED_AUDIENCE,
            "cacheType": "ServiceAccount",
            "requireServiceAccount": True,
        },
    }
    return [gcp, ecr, acr, ungranted]


def prepare(plane: Any) -> None:
    """What an admin does before the pods: the audiences the node may request, the service
    accounts."""
    for audience in GRANTED:
        plane.grant_audience(audience)
    for name, keys in SERVICE_ACCOUNTS.items():
        plane.service_account(NAMESPACE, name, keys)


# One plugin as several providers, in service-account mode: the shipped
# config/examples/aws-two-accounts.yaml as it is. Each provider assumes its own role
# (AWS_ECR_ROLE_ARN in its env) with the pod's token; a pod whose service account names a role
# (eks.amazonaws.com/ecr-role-arn) pulls with that one. ``credential`` is the role each pull's
# ECR credentials must come from.
ACCOUNTS_EXAMPLE = "aws-two-accounts.yaml"
ACCOUNT_PULLS = (
    TokenPull("account-a", "plain", "111111111111.dkr.ecr.us-west-2.amazonaws.com/app:1",
              "ecr-credential-provider-account-a", "arn:aws:iam::111111111111:role/image-pull"),
    TokenPull("account-b", "plain", "222222222222.dkr.ecr.us-west-2.amazonaws.com/app:1",
              "ecr-credential-provider-account-b", "arn:aws:iam::222222222222:role/image-pull"),
    TokenPull("account-a-annotated", "ecr-role", "111111111111.dkr.ecr.us-west-2.amazonaws.com/other:1",
              "ecr-credential-provider-account-a", ECR_ROLE),
)  # fmt: skip
# config/examples/aws-pod-identity.yaml as shipped (#64): the EKS Auth stand-in checks each pod's
# token against the API server's signing key and answers with the role of its service account's
# association; a service account without one pulls with the node's keys.
POD_IDENTITY_EXAMPLE = "aws-pod-identity.yaml"
POD_IDENTITY_CLUSTER = "my-cluster"  # as the example names it
POD_ROLE = f"arn:aws:iam::{ECR_ACCOUNT}:role/pod-identity-puller"
POD_IDENTITY_ASSOCIATIONS = {(NAMESPACE, "pod-identity"): POD_ROLE}
POD_IDENTITY_PULLS = (
    TokenPull("associated", "pod-identity", f"{ECR_HOST}/team/pi:1", "ecr-credential-provider", POD_ROLE),
    TokenPull("unassociated", "plain", f"{ECR_HOST}/team/node:1", "ecr-credential-provider", "node"),
)  # fmt: skip
SCENARIOS = {"clouds": PULLS, "accounts": ACCOUNT_PULLS, "pod-identity": POD_IDENTITY_PULLS}


def start_pods(
    plane: Any, wave: int, pulls: tuple[TokenPull, ...] = PULLS, host_network: bool = False
) -> int:
    """Start ``wave``'s pods (on the node's network: a real runtime's, with no CNI); the number
    of pulls expected once it is done (all waves so far)."""
    for pull in (*pulls, *VERIFY_PULLS):
        if pull.wave == wave:
            plane.pod(
                NAMESPACE, pull.pod, pull.image, pull.service_account, pull.policy, host_network
            )
    return sum(1 for pull in pulls if pull.wave <= wave)

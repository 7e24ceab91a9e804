"""EKS Pod Identity (issue #64): the pod's service-account token traded at EKS Auth for its
association's role, signed with the node's keys, then ECR with that role; the node's own keys for
a service account without an association; one line for every refusal. Against the EKS Auth
stand-in (emulators/eksauth.py: it checks the SigV4 signature, the token's RS256 signature with the
issuer's key, its audience and expiry) and the ECR fake (which checks the pod key's signature), on
both routes (stdlib, botocore) and through the bundle."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from emulators.aws import NOWHERE, FakeEcr, ecr_env
from emulators.eksauth import AUDIENCE, FakeEksAuth
from emulators.http import FakeResponse, serve
from emulators.kubelet_exec import PluginRun, request_bytes, run_plugin
from tests.integration.aws.common import NODE_KEY, NODE_SECRET, PLUGIN

CLUSTER = "demo-cluster"
ROLE = "arn:aws:iam::111122223333:role/pod-puller"
IMAGE = "111122223333.dkr.ecr.us-west-2.amazonaws.com/team/app"
HOST = IMAGE.split("/")[0]
POD_PASSWORD = "pod-role-password"

_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ISSUER_KEY = (
    _KEY.public_key()
    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    .decode()
)


def token(
    subject: str = "system:serviceaccount:team:puller",
    audience: str = AUDIENCE,
    expires_in: int = 600,
    key: rsa.RSAPrivateKey = _KEY,
) -> str:
    """A service-account token as the API server signs it (RS256)."""

    def part(value: object) -> str:
        raw = json.dumps(value, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    claims = {"iss": "https://kubernetes.default.svc", "sub": subject, "aud": [audience],
              "exp": int(time.time()) + expires_in, "iat": int(time.time())}  # fmt: skip
    signed = f"{part({'alg': 'RS256', 'kid': 'k'})}.{part(claims)}"
    signature = key.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signed}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


@pytest.fixture
def services() -> Iterator[tuple[FakeEcr, FakeEksAuth, str, str]]:
    ecr = FakeEcr(secret_keys={NODE_KEY: NODE_SECRET})

    def issued(access_key: str, secret: str, role: str) -> None:
        ecr.secret_keys[access_key] = secret
        ecr.passwords[access_key] = POD_PASSWORD

    eks = FakeEksAuth(CLUSTER, ISSUER_KEY, {NODE_KEY: NODE_SECRET},
                      {("team", "puller"): ROLE}, on_issued=issued)  # fmt: skip
    with serve(ecr) as ecr_server, serve(eks) as eks_server:
        yield ecr, eks, ecr_server.url, eks_server.url


def run(
    services: tuple[FakeEcr, FakeEksAuth, str, str],
    pod_token: str,
    route: dict[str, str],
    use_bundle: bool = False,
    **env: str,
) -> PluginRun:
    _, _, ecr_url, eks_url = services
    settings = {"AWS_EKS_POD_IDENTITY_CLUSTER": CLUSTER, "AWS_ENDPOINT_URL_EKS_AUTH": eks_url,
                "AWS_REGION": "us-west-2", **route, **env}  # fmt: skip
    return run_plugin(
        PLUGIN,
        request_bytes(IMAGE, token=pod_token),
        args=["-v=1"],
        env=ecr_env(ecr_url, NOWHERE, **settings),
        use_bundle=use_bundle,
    )


def test_an_associated_service_account_pulls_with_its_role(
    services: tuple[FakeEcr, FakeEksAuth, str, str], route: dict[str, str], use_bundle: bool
) -> None:
    ecr, eks, _, _ = services
    pod_token = token()
    done = run(services, pod_token, route, use_bundle)
    assert done.code == 0, done.stderr
    assert done.response["auth"][HOST]["password"] == POD_PASSWORD
    [(signer, subject, said)] = eks.calls
    assert (signer, subject, said) == (NODE_KEY, "system:serviceaccount:team:puller", "issued")
    [call] = ecr.calls
    assert call.access_key.startswith("ASIAPOD") and call.session_token
    assert call.signature_valid is True  # signed with the pod role's own secret
    assert f"EKS Pod Identity: the role {ROLE}" in done.stderr
    assert pod_token not in done.stderr and pod_token.split(".")[2] not in done.stderr


def test_a_service_account_without_an_association_pulls_with_the_nodes_keys(
    services: tuple[FakeEcr, FakeEksAuth, str, str], route: dict[str, str]
) -> None:
    ecr, eks, _, _ = services
    done = run(services, token(subject="system:serviceaccount:team:other"), route)
    assert done.code == 0, done.stderr
    assert done.response["auth"][HOST]["password"] == ecr.password
    assert [c.access_key for c in ecr.calls] == [NODE_KEY]
    assert eks.calls[0][2] == "ResourceNotFoundException"
    assert "has no association in cluster demo-cluster: using the node's credentials" in done.stderr


@pytest.mark.parametrize(
    ("pod_token", "said"),
    [
        (token(audience="sts.amazonaws.com"),
         "InvalidTokenException: the token's audience is not pods.eks.amazonaws.com; the "
         "provider's tokenAttributes.serviceAccountTokenAudience must be pods.eks.amazonaws.com"),
        (token(key=rsa.generate_private_key(public_exponent=65537, key_size=2048)),
         "InvalidTokenException: the token's signature is not the issuer's"),
        (token(expires_in=-60), "ExpiredTokenException: the token has expired"),
    ],
    ids=["audience", "signature", "expired"],
)  # fmt: skip
def test_a_token_eks_auth_refuses_is_one_line(
    services: tuple[FakeEcr, FakeEksAuth, str, str],
    route: dict[str, str],
    pod_token: str,
    said: str,
) -> None:
    ecr, _, _, _ = services
    done = run(services, pod_token, route)
    assert done.code == 1 and done.stdout == b""
    [line] = done.stderr.strip().splitlines()[-1:]
    assert "EKS Auth AssumeRoleForPodIdentity for cluster demo-cluster failed: " in line, line
    assert said in line and "Traceback" not in done.stderr
    assert ecr.calls == []  # no pull with the node's keys when the pod's token was refused


def test_a_wrong_cluster_name_and_a_signature_eks_auth_refuses(
    services: tuple[FakeEcr, FakeEksAuth, str, str],
) -> None:
    done = run(services, token(), {}, AWS_EKS_POD_IDENTITY_CLUSTER="bad name!")
    assert done.code == 1
    assert "AWS_EKS_POD_IDENTITY_CLUSTER='bad name!' is not an EKS cluster name" in done.stderr
    other = run(services, token(), {}, AWS_EKS_POD_IDENTITY_CLUSTER="another")
    assert other.code == 1 and "InvalidParameterException: no cluster another" in other.stderr
    forged = run(services, token(), {}, AWS_SECRET_ACCESS_KEY="not-the-node-secret")
    assert forged.code == 1 and "AccessDeniedException" in forged.stderr
    assert "eks-auth:AssumeRoleForPodIdentity" in forged.stderr


@pytest.mark.parametrize(
    "answer",
    [
        FakeResponse.json({"credentials": {"accessKeyId": "A"}}),
        FakeResponse.text("x" * (2 << 20)),
        FakeResponse.json({"credentials": None}),
    ],
    ids=["partial", "huge", "null"],
)
def test_a_hostile_eks_auth_answer_is_one_line(
    services: tuple[FakeEcr, FakeEksAuth, str, str], answer: FakeResponse
) -> None:
    ecr, _, _, _ = services
    with serve(lambda request: answer) as hostile:
        done = run(services, token(), {}, AWS_ENDPOINT_URL_EKS_AUTH=hostile.url)
    assert done.code == 1 and done.stdout == b"" and "Traceback" not in done.stderr
    assert "EKS Auth" in done.stderr.strip().splitlines()[-1]
    assert ecr.calls == []


def test_an_eks_auth_it_cannot_reach_says_what_to_check(
    services: tuple[FakeEcr, FakeEksAuth, str, str], route: dict[str, str]
) -> None:
    """A refused connection names the endpoint and what to check (a firewall, a proxy), as every
    other unreachable service's line does; the node's keys are not used instead."""
    ecr, _, _, _ = services
    done = run(services, token(), route, AWS_ENDPOINT_URL_EKS_AUTH=NOWHERE)
    assert done.code == 1 and done.stdout == b"" and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()[-1:]
    assert f"could not reach EKS Auth at {NOWHERE} for cluster {CLUSTER}: " in line, line
    assert "check that 127.0.0.1:9 is reachable from this node" in line, line
    assert ecr.calls == []

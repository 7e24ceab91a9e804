"""Our SigV4 signer against botocore's: same request, same clock, same credentials, same signature.

Every endpoint form the stdlib ECR path can call (each partition, FIPS, dual-stack, ECR Public, a
loopback override), with and without a session token. botocore's clock is its own
``get_current_datetime``, pinned here; nothing of ours is replaced.
"""

from __future__ import annotations

import datetime

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from credprovider.aws.direct import TARGETS
from credprovider.aws.sigv4 import AccessKeys, amz_date, sign_post

NOW = 1_790_000_123.0
KEYS = [
    AccessKeys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
    AccessKeys("ASIAEXAMPLE", "secret/with+chars=", "FwoGZXIvYXdzEJr//////////session+token=="),
]
ENDPOINTS = [
    ("ecr", "us-east-1", "api.ecr.us-east-1.amazonaws.com"),
    ("ecr", "cn-north-1", "api.ecr.cn-north-1.amazonaws.com.cn"),
    ("ecr", "us-gov-west-1", "api.ecr.us-gov-west-1.amazonaws.com"),
    ("ecr", "us-iso-east-1", "api.ecr.us-iso-east-1.c2s.ic.gov"),
    ("ecr", "us-isob-east-1", "api.ecr.us-isob-east-1.sc2s.sgov.gov"),
    ("ecr", "eu-isoe-west-1", "api.ecr.eu-isoe-west-1.cloud.adc-e.uk"),
    ("ecr", "us-isof-south-1", "api.ecr.us-isof-south-1.csp.hci.ic.gov"),
    ("ecr", "eusc-de-east-1", "api.ecr.eusc-de-east-1.amazonaws.eu"),
    ("ecr", "us-east-1", "ecr-fips.us-east-1.amazonaws.com"),
    ("ecr", "us-gov-west-1", "ecr-fips.us-gov-west-1.amazonaws.com"),
    ("ecr", "us-east-1", "ecr.us-east-1.api.aws"),
    ("ecr", "cn-north-1", "ecr.cn-north-1.api.amazonwebservices.com.cn"),
    ("ecr", "us-east-1", "ecr-fips.us-east-1.api.aws"),
    ("ecr-public", "us-east-1", "api.ecr-public.us-east-1.amazonaws.com"),
    ("ecr-public", "us-east-1", "ecr-public.us-east-1.api.aws"),
    ("ecr", "eu-west-1", "127.0.0.1:8443"),
]


def botocore_authorization(
    host: str,
    headers: dict[str, str],
    body: bytes,
    keys: AccessKeys,
    region: str,
    service: str,
    path: str = "/",
) -> str:
    request = AWSRequest(method="POST", url=f"https://{host}{path}", data=body, headers=headers)
    credentials = Credentials(keys.access_key, keys.secret_key, keys.session_token or None)
    pinned = datetime.datetime.fromtimestamp(NOW, datetime.UTC).replace(tzinfo=None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("botocore.auth.get_current_datetime", lambda: pinned)
        SigV4Auth(credentials, service, region).add_auth(request)
    return str(request.headers["Authorization"])


@pytest.mark.parametrize("keys", KEYS, ids=["long-term keys", "session token"])
@pytest.mark.parametrize(("service", "region", "host"), ENDPOINTS)
def test_signature_is_botocores(service: str, region: str, host: str, keys: AccessKeys) -> None:
    headers = {
        "X-Amz-Target": TARGETS[service],
        "Content-Type": "application/x-amz-json-1.1",
        "User-Agent": "credprovider/test",
    }
    ours = sign_post(
        host=host, headers=headers, body=b"{}", keys=keys, region=region, service=service, now=NOW
    )
    assert ours["X-Amz-Date"] == amz_date(NOW) == "20260921T141523Z"
    assert ours["Authorization"] == botocore_authorization(
        host, headers, b"{}", keys, region, service
    )
    assert ("X-Amz-Security-Token" in ours) == bool(keys.session_token)
    assert "user-agent" not in ours["Authorization"]


@pytest.mark.parametrize("keys", KEYS, ids=["long-term keys", "session token"])
def test_a_path_is_signed_as_botocore_signs_it(keys: AccessKeys) -> None:
    """EKS Auth's AssumeRoleForPodIdentity: a REST path, service eks-auth."""
    host, path = "eks-auth.us-west-2.api.aws", "/clusters/my-cluster_1/assume-role-for-pod-identity"
    headers = {"Content-Type": "application/json"}
    body = b'{"token": "x.y.z"}'
    ours = sign_post(
        host=host, headers=headers, body=body, keys=keys, region="us-west-2", service="eks-auth",
        now=NOW, path=path,
    )  # fmt: skip
    assert ours["Authorization"] == botocore_authorization(
        host, headers, body, keys, "us-west-2", "eks-auth", path
    )
    with pytest.raises(ValueError, match="unreserved"):
        sign_post(host=host, headers={}, body=b"", keys=keys, region="r", service="s", now=NOW,
                  path="/clusters/a b")  # fmt: skip


def test_a_changed_byte_changes_the_signature() -> None:
    """The comparison above can fail: body, clock, region and secret each enter the signature."""
    base = {
        "host": "api.ecr.us-east-1.amazonaws.com",
        "headers": {"X-Amz-Target": TARGETS["ecr"]},
        "body": b"{}",
        "keys": KEYS[0],
        "region": "us-east-1",
        "service": "ecr",
        "now": NOW,
    }
    reference = sign_post(**base)["Authorization"]  # type: ignore[arg-type]
    for change in (
        {"body": b"{ }"},
        {"now": NOW + 1},
        {"region": "us-east-2"},
        {"keys": AccessKeys("AKIDEXAMPLE", "other")},
    ):
        assert sign_post(**{**base, **change})["Authorization"] != reference  # type: ignore[arg-type]

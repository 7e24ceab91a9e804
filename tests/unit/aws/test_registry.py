from __future__ import annotations

import base64

import pytest

from credprovider.aws.registry import (
    TokenError,
    classify_host,
    decode_authorization_token,
    role_for_service_account,
)

ACCT = "123456789012"


@pytest.mark.parametrize(
    ("host", "region", "fips", "dualstack"),
    [
        (f"{ACCT}.dkr.ecr.us-east-1.amazonaws.com", "us-east-1", False, False),
        (f"{ACCT}.dkr.ecr-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1", True, False),
        (f"{ACCT}.dkr-ecr.us-west-2.on.aws", "us-west-2", False, True),
        (f"{ACCT}.dkr-ecr-fips.us-east-2.on.aws", "us-east-2", True, True),
        (f"{ACCT}.dkr.ecr.cn-north-1.amazonaws.com.cn", "cn-north-1", False, False),
        (
            f"{ACCT}.dkr-ecr.cn-northwest-1.on.amazonwebservices.com.cn",
            "cn-northwest-1",
            False,
            True,
        ),
        (f"{ACCT}.dkr.ecr.eusc-de-east-1.amazonaws.eu", "eusc-de-east-1", False, False),
        (f"{ACCT}.dkr.ecr.us-iso-east-1.c2s.ic.gov", "us-iso-east-1", False, False),
        (f"{ACCT}.dkr.ecr.us-isob-east-1.sc2s.sgov.gov", "us-isob-east-1", False, False),
        (f"{ACCT}.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk", "eu-isoe-west-1", False, False),
        (f"{ACCT}.dkr.ecr.us-isof-south-1.csp.hci.ic.gov", "us-isof-south-1", False, False),
        (f"{ACCT}.DKR.ECR.US-EAST-1.AMAZONAWS.COM", "us-east-1", False, False),
    ],
)
def test_private_hosts(host: str, region: str, fips: bool, dualstack: bool) -> None:
    registry = classify_host(host)
    assert (
        registry.kind,
        registry.region,
        registry.account_id,
        registry.fips,
        registry.dualstack,
    ) == ("private", region, ACCT, fips, dualstack)


@pytest.mark.parametrize("host", ["public.ecr.aws", "ecr-public.aws.com", "PUBLIC.ECR.AWS"])
def test_public_hosts(host: str) -> None:
    assert (classify_host(host).kind, classify_host(host).region) == ("public", "us-east-1")


@pytest.mark.parametrize(
    "host",
    [
        f"{ACCT}.dkr.ecr.us-east-1.amazonaws.com.evil.com",
        f"evil.{ACCT}.dkr.ecr.us-east-1.amazonaws.com",
        f"{ACCT}.dkr.ecr.us-east-1.amazonaws.com\n",
        f"{ACCT}.dkr.ecr.us-east-1.amazonaws.org",
        "12345678901.dkr.ecr.us-east-1.amazonaws.com",
        "1234567890123.dkr.ecr.us-east-1.amazonaws.com",
        "١٢٣٤٥٦٧٨٩٠١٢.dkr.ecr.us-east-1.amazonaws.com",
        f"{ACCT}.dkr.ecr..amazonaws.com",
        f"{ACCT}.dkr.ecr.-east-1.amazonaws.com",
        f"{ACCT}.dkr_ecr.us-east-1.amazonaws.com",
        f"{ACCT}.dkr.ecr.us-east-1.amazonaws.com/public.ecr.aws",
        "public.ecr.aws.evil.com",
        "evil-public.ecr.aws",
        "registry.k8s.io",
        "",
    ],
)
def test_everything_else_is_not_ecr(host: str) -> None:
    registry = classify_host(host)
    assert (registry.kind, registry.region) == ("other", None)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (b64("AWS:password"), ("AWS", "password")),
        (b64("AWS:pass:with:colons"), ("AWS", "pass:with:colons")),
        (b64("AWS:"), ("AWS", "")),
    ],
)
def test_decode_token(token: str, expected: tuple[str, str]) -> None:
    assert decode_authorization_token(token) == expected


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (None, "authorization token in response was nil"),
        ("", "authorization token in response was empty"),
        ("!!!", "not valid base64"),
        (b64("AWS:x")[:-1], "not valid base64"),
        (b64("nocolon"), "error parsing username and password from authorization token"),
        ("wqk=", "error parsing username and password"),
        (base64.b64encode(b"\xff\xfe:x").decode(), "not valid base64"),
    ],
)
def test_decode_token_errors(token: str | None, message: str) -> None:
    with pytest.raises(TokenError) as caught:
        decode_authorization_token(token)
    assert message in str(caught.value)


ROLE_A = "arn:aws:iam::111111111111:role/a"
ROLE_B = "arn:aws-us-gov:iam::222222222222:role/path/b"
ROLE_C = "arn:aws-cn:iam::333333333333:role/c"


@pytest.mark.parametrize(
    ("annotations", "env", "expected"),
    [
        (
            {"eks.amazonaws.com/ecr-role-arn": ROLE_A, "eks.amazonaws.com/role-arn": ROLE_B},
            {"AWS_ECR_ROLE_ARN": ROLE_C},
            (ROLE_A, "annotation eks.amazonaws.com/ecr-role-arn"),
        ),
        (
            {"eks.amazonaws.com/role-arn": ROLE_B},
            {"AWS_ECR_ROLE_ARN": ROLE_C},
            (ROLE_B, "annotation eks.amazonaws.com/role-arn"),
        ),
        ({}, {"AWS_ECR_ROLE_ARN": ROLE_C}, (ROLE_C, "env AWS_ECR_ROLE_ARN")),
        (
            {"eks.amazonaws.com/ecr-role-arn": " "},
            {"AWS_ECR_ROLE_ARN": ROLE_C},
            (ROLE_C, "env AWS_ECR_ROLE_ARN"),
        ),
        ({}, {}, None),
    ],
)
def test_role_selection_order(
    annotations: dict[str, str], env: dict[str, str], expected: tuple[str, str] | None
) -> None:
    choice = role_for_service_account(annotations, env)
    assert ((choice.arn, choice.source) if choice else None) == expected


@pytest.mark.parametrize(
    "value",
    [
        "role/a",
        "arn:aws:iam::1:role/a",
        "arn:aws:s3:::bucket",
        "arn:aws:iam::111111111111:user/bob",
    ],
)
def test_malformed_role_arn_is_rejected(value: str) -> None:
    with pytest.raises(ValueError, match="is not an IAM role ARN"):
        role_for_service_account({"eks.amazonaws.com/role-arn": value}, {})

"""ECR registry recognition and token decoding: pure functions, no I/O, no SDK."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

# Private ECR: <12-digit account>.dkr.ecr[-fips].<region>.<partition suffix>, also the dual-stack
# dkr-ecr[-fips] form. Matched with fullmatch on the lower-cased host only, ASCII only.
ECR_PRIVATE_HOST_RE: Final = re.compile(
    r"(?P<account>[0-9]{12})\.dkr[.-]ecr(?P<fips>-fips)?\.(?P<region>[a-z0-9][a-z0-9_-]*)\."
    r"(?P<suffix>amazonaws\.(?:com(?:\.cn)?|eu)|on\.(?:aws|amazonwebservices\.com\.cn)"
    r"|sc2s\.sgov\.gov|c2s\.ic\.gov|cloud\.adc-e\.uk|csp\.hci\.ic\.gov)",
    re.ASCII,
)
ECR_PUBLIC_HOSTS: Final = ("public.ecr.aws", "ecr-public.aws.com")
ECR_PUBLIC_REGION: Final = "us-east-1"
ECR_SUFFIXES: Final = (
    "amazonaws.com",
    "amazonaws.com.cn",
    "amazonaws.eu",
    "on.aws",
    "on.amazonwebservices.com.cn",
    "c2s.ic.gov",
    "sc2s.sgov.gov",
    "cloud.adc-e.uk",
    "csp.hci.ic.gov",
)

ROLE_ARN_ANNOTATIONS: Final = ("eks.amazonaws.com/ecr-role-arn", "eks.amazonaws.com/role-arn")
ROLE_ARN_ENV: Final = "AWS_ECR_ROLE_ARN"
ROLE_SESSION_NAME: Final = "ecr-credential-provider"
_ROLE_ARN_RE: Final = re.compile(r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}", re.ASCII)


class TokenError(ValueError):
    """An ECR authorization token that cannot be turned into a username and password."""


@dataclass(frozen=True)
class EcrRegistry:
    """What the host says about the registry. ``region`` is ``None`` for hosts that are not ECR."""

    host: str
    kind: str  # "private", "public" or "other"
    region: str | None
    account_id: str | None = None
    fips: bool = False
    dualstack: bool = False


def classify_host(host: str) -> EcrRegistry:
    """Recognise a registry host (no port): private ECR, ECR Public, or another host."""
    lowered = host.lower()
    if lowered in ECR_PUBLIC_HOSTS:
        return EcrRegistry(host, "public", ECR_PUBLIC_REGION)
    match = ECR_PRIVATE_HOST_RE.fullmatch(lowered)
    if match is None:
        return EcrRegistry(host, "other", None)
    return EcrRegistry(
        host,
        "private",
        match["region"],
        account_id=match["account"],
        fips=match["fips"] is not None,
        dualstack=".dkr-ecr" in lowered,
    )


def decode_authorization_token(token: str | None) -> tuple[str, str]:
    """Decode ECR's base64 ``user:password`` token, splitting on the first colon."""
    if token is None:
        raise TokenError("authorization token in response was nil")
    if not token:
        raise TokenError("authorization token in response was empty")
    try:
        decoded = base64.b64decode(token.encode("ascii"), validate=True).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeError):
        raise TokenError("authorization token is not valid base64") from None
    username, colon, password = decoded.partition(":")
    if not colon:
        raise TokenError("error parsing username and password from authorization token")
    return username, password


@dataclass(frozen=True)
class RoleChoice:
    arn: str
    source: str  # where the ARN came from, for logs and errors


def role_for_service_account(
    annotations: Mapping[str, str], environ: Mapping[str, str]
) -> RoleChoice | None:
    """The role to assume with a service-account token, or ``None`` to use the node's credentials.

    Order: annotation ``eks.amazonaws.com/ecr-role-arn``, annotation ``eks.amazonaws.com/role-arn``
    (the IRSA annotation), env ``AWS_ECR_ROLE_ARN``. Empty values count as absent.
    Raises ``ValueError`` when the chosen value is not an IAM role ARN.
    """
    candidates = [(annotations.get(key, ""), f"annotation {key}") for key in ROLE_ARN_ANNOTATIONS]
    candidates.append((environ.get(ROLE_ARN_ENV, ""), f"env {ROLE_ARN_ENV}"))
    for value, source in candidates:
        value = value.strip()
        if value:
            if not _ROLE_ARN_RE.fullmatch(value):
                raise ValueError(f"{source} is {value!r}, which is not an IAM role ARN")
            return RoleChoice(value, source)
    return None

"""ECR registry recognition and token decoding: pure functions, no I/O, no SDK."""

from __future__ import annotations

from credprovider.aws import PLUGIN_NAME
from credprovider.errors import CredproviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Mapping

# Private ECR: <12-digit account>.dkr.ecr[-fips].<region>.<partition suffix>, also the dual-stack
# dkr-ecr[-fips] form. Matched with fullmatch on the lower-cased host only, ASCII only.
ECR_PRIVATE_HOST_PATTERN: Final = (
    r"(?P<account>[0-9]{12})\.dkr[.-]ecr(?P<fips>-fips)?\.(?P<region>[a-z0-9][a-z0-9_-]*)\."
    r"(?P<suffix>amazonaws\.(?:com(?:\.cn)?|eu)|on\.(?:aws|amazonwebservices\.com\.cn)"
    r"|sc2s\.sgov\.gov|c2s\.ic\.gov|cloud\.adc-e\.uk|csp\.hci\.ic\.gov)"
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

# kubelet matchImages covering every host form above (one '*' per label, no ports).
MATCH_IMAGES: Final = (
    "*.dkr.ecr.*.amazonaws.com",
    "*.dkr-ecr.*.on.aws",
    "*.dkr.ecr-fips.*.amazonaws.com",
    "*.dkr-ecr-fips.*.on.aws",
    "*.dkr.ecr.*.amazonaws.com.cn",
    "*.dkr-ecr.*.on.amazonwebservices.com.cn",
    "*.dkr.ecr.*.amazonaws.eu",
    "*.dkr.ecr.*.c2s.ic.gov",
    "*.dkr.ecr.*.sc2s.sgov.gov",
    "*.dkr.ecr.*.cloud.adc-e.uk",
    "*.dkr.ecr.*.csp.hci.ic.gov",
    "public.ecr.aws",
    "ecr-public.aws.com",
)
# One image per host form, to check that a config's matchImages cover them all.
SAMPLE_IMAGES: Final = {
    "private": "123456789012.dkr.ecr.us-east-1.amazonaws.com/app",
    "FIPS": "123456789012.dkr.ecr-fips.us-east-1.amazonaws.com/app",
    "dual-stack": "123456789012.dkr-ecr.us-east-1.on.aws/app",
    "dual-stack FIPS": "123456789012.dkr-ecr-fips.us-east-1.on.aws/app",
    "China": "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/app",
    "China dual-stack": "123456789012.dkr-ecr.cn-north-1.on.amazonwebservices.com.cn/app",
    "EU sovereign cloud": "123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu/app",
    "ISO": "123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov/app",
    "ISO-B": "123456789012.dkr.ecr.us-isob-east-1.sc2s.sgov.gov/app",
    "ISO-E": "123456789012.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk/app",
    "ISO-F": "123456789012.dkr.ecr.us-isof-south-1.csp.hci.ic.gov/app",
    "ECR Public": "public.ecr.aws/nginx/nginx",
    "ECR Public dual-stack": "ecr-public.aws.com/nginx/nginx",
}

# Settings that select the credentials, region or endpoint: part of the persistent cache's identity
# (values of these are not secrets; secret keys and session tokens are not listed).
IDENTITY_ENV: Final = (
    "AWS_ACCESS_KEY_ID",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_ECR",
    "AWS_ENDPOINT_URL_ECR_PUBLIC",
    "AWS_EKS_POD_IDENTITY_CLUSTER",
    "AWS_ENDPOINT_URL_EKS_AUTH",
    "AWS_ENDPOINT_URL_STS",
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
)

ROLE_ARN_ANNOTATIONS: Final = ("eks.amazonaws.com/ecr-role-arn", "eks.amazonaws.com/role-arn")
# How the log names the token fetched for each kind of registry host.
TOKEN_KIND: Final = {
    "private": "a private ECR token",
    "public": "an ECR Public token",
    "other": "an ECR token (the host is not an ECR host)",
}
# What the shipped service-account config lists: the generic IRSA annotation (the second above) is
# read when a config lists it, but is opt-in (docs/clouds.md: every pod with an IRSA role would pull with it).
SHIPPED_ANNOTATIONS: Final = ROLE_ARN_ANNOTATIONS[:1]
ROLE_ARN_ENV: Final = "AWS_ECR_ROLE_ARN"
# The CA bundle variables botocore honours, the first set one winning (endpoint._get_verify_value).
BOTOCORE_CA_BUNDLE_ENV: Final = ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE")
ROLE_SESSION_NAME: Final = PLUGIN_NAME  # the session name upstream gives AssumeRoleWithWebIdentity
_ROLE_ARN_PATTERN: Final = r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]{1,512}"


class TokenError(CredproviderError, ValueError):
    """An ECR authorization token that cannot be turned into a username and password."""


class EcrRegistry(NamedTuple):
    """What the host says about the registry. ``region`` is ``None`` for hosts that are not ECR."""

    host: str
    kind: str  # "private", "public" or "other" (a key of TOKEN_KIND)
    region: str | None
    account_id: str | None = None
    fips: bool = False
    dualstack: bool = False


def classify_host(host: str) -> EcrRegistry:
    """Recognise a registry host (no port): private ECR, ECR Public, or another host."""
    import re

    lowered = host.lower()
    if lowered in ECR_PUBLIC_HOSTS:
        return EcrRegistry(host, "public", ECR_PUBLIC_REGION)
    match = re.fullmatch(ECR_PRIVATE_HOST_PATTERN, lowered, re.ASCII)  # compiled on first use
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
    import base64
    import binascii

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


class RoleChoice(NamedTuple):
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
    import re

    candidates = [(annotations.get(key, ""), f"annotation {key}") for key in ROLE_ARN_ANNOTATIONS]
    candidates.append((environ.get(ROLE_ARN_ENV, ""), f"env {ROLE_ARN_ENV}"))
    for value, source in candidates:
        value = value.strip()
        if value:
            if not re.fullmatch(_ROLE_ARN_PATTERN, value, re.ASCII):
                raise ValueError(f"{source} is {value!r}, which is not an IAM role ARN")
            return RoleChoice(value, source)
    return None

"""EKS Pod Identity for image pulls: the pod's service-account token (KEP-4412, audience
``pods.eks.amazonaws.com``) traded at the EKS Auth API for the role the pod's service account is
associated with, then ECR with that role. No plugin upstream does this (aws-ecr.md).

``AssumeRoleForPodIdentity`` (EKS Auth, API 2023-11-26): ``POST /clusters/NAME/assume-role-for-
pod-identity`` with ``{"token": ...}``, SigV4-signed for ``eks-auth`` with the node's credentials
(the worker node policy allows ``eks-auth:AssumeRoleForPodIdentity``); the answer's
``credentials`` are the pod's role's. A service account with no association is answered
``ResourceNotFoundException``: the node's own credentials are used, as without a token. The
cluster is named in the provider's env, :data:`CLUSTER_ENV` (the plugin takes no flags, as
upstream); without it, a token means the IRSA-style role annotations as before.

Two routes, as for ECR: the standard library here where :mod:`credprovider.aws.direct` applies
(the node's keys from the environment or IMDSv2), else botocore (its credential chain, a proxy:
:func:`credprovider.aws.botocore_api.assume_pod_role`), both read by :func:`read_answer`.
"""

from __future__ import annotations

import re

from credprovider.aws.sigv4 import AccessKeys
from credprovider.errors import ProviderError
from credprovider.runtime._typing import TYPE_CHECKING, Final, NamedTuple
from credprovider.runtime.advice import unreachable_url, url_host
from credprovider.runtime.answer import BadAnswer, decode_json
from credprovider.runtime.provider import one_line
from credprovider.runtime.redact import register_secret

if TYPE_CHECKING:
    from collections.abc import Mapping

    from credprovider.runtime.http import HttpResponse
    from credprovider.runtime.provider import Context

CLUSTER_ENV: Final = "AWS_EKS_POD_IDENTITY_CLUSTER"
AUDIENCE: Final = "pods.eks.amazonaws.com"
SERVICE: Final = "eks-auth"
ENDPOINT_ENV: Final = "AWS_ENDPOINT_URL_EKS_AUTH"  # botocore's name for the service's endpoint
NO_ASSOCIATION: Final = "ResourceNotFoundException"
_CLUSTER: Final = re.compile(r"[0-9A-Za-z][A-Za-z0-9\-_]{0,99}")


class PodRole(NamedTuple):
    """The pod's role's keys, and what EKS Auth said they are (for the log)."""

    keys: AccessKeys
    role: str
    association: str


def cluster_of(environ: Mapping[str, str]) -> str | None:
    """The cluster :data:`CLUSTER_ENV` names (None: Pod Identity is not configured); a name EKS
    would refuse is a usage error of the provider's env (ProviderError, one line)."""
    name = environ.get(CLUSTER_ENV, "").strip()
    if not name:
        return None
    if not _CLUSTER.fullmatch(name):
        raise ProviderError(
            f"{CLUSTER_ENV}={name[:120]!r} is not an EKS cluster name (1 to 100 letters, digits, "
            "'-' and '_', starting with a letter or digit): set it to the cluster's name in the "
            "provider's env"
        )
    return name


def endpoint(region: str, environ: Mapping[str, str]) -> str:
    """EKS Auth's base URL in ``region`` (``https://eks-auth.REGION.api.aws``), or the override."""
    given = environ.get(ENDPOINT_ENV, "").strip() or environ.get("AWS_ENDPOINT_URL", "").strip()
    return (given or f"https://eks-auth.{region}.api.aws").rstrip("/")


def path(cluster: str) -> str:
    return f"/clusters/{cluster}/assume-role-for-pod-identity"


def failure(cluster: str, code: str, message: str) -> ProviderError:
    """EKS Auth's refusal, said once with what to check."""
    hint = {
        "AccessDeniedException": "the node's role needs eks-auth:AssumeRoleForPodIdentity (the "
        "AmazonEKSWorkerNodePolicy has it)",
        "InvalidTokenException": "the provider's tokenAttributes.serviceAccountTokenAudience must "
        f"be {AUDIENCE}, and the token this cluster's",
        "ExpiredTokenException": "the kubelet sent an expired token: check the node's clock",
        "InvalidParameterException": f"check {CLUSTER_ENV} names this cluster",
    }.get(code, "see the EKS Auth API's error")
    return ProviderError(
        f"EKS Auth AssumeRoleForPodIdentity for cluster {cluster} failed: {code}: "
        f"{message[:300]}; {hint}"
    )


def unreached(cluster: str, base: str, detail: str) -> ProviderError:
    """EKS Auth at ``base`` not reached (refused, reset, timed out), with what to check."""
    return ProviderError(
        f"could not reach EKS Auth at {base} for cluster {cluster}: {one_line(detail)}",
        unreachable_url(base),
    )


def decoded(cluster: str, body: bytes) -> object:
    """A 200 answer's body, decoded under the plugins' caps (the stdlib route's)."""
    try:
        return decode_json(body)
    except BadAnswer:
        raise
    except ValueError:
        raise ProviderError(
            f"EKS Auth AssumeRoleForPodIdentity for cluster {cluster} answered something not JSON"
        ) from None


def read_answer(cluster: str, answer: object) -> PodRole:
    """A 200 answer's pod role, either route's (ProviderError for one without usable
    credentials)."""
    if not isinstance(answer, dict):
        answer = {}
    creds = answer.get("credentials")
    fields = ("accessKeyId", "secretAccessKey", "sessionToken")
    if not isinstance(creds, dict) or not all(
        isinstance(creds.get(f), str) and creds.get(f) for f in fields
    ):
        raise ProviderError(
            f"EKS Auth AssumeRoleForPodIdentity for cluster {cluster} returned no credentials"
        )
    register_secret(creds["secretAccessKey"])
    register_secret(creds["sessionToken"])
    user = answer.get("assumedRoleUser")
    link = answer.get("podIdentityAssociation")
    role = user.get("arn", "") if isinstance(user, dict) else ""
    association = link.get("associationId", "") if isinstance(link, dict) else ""
    return PodRole(
        AccessKeys(creds["accessKeyId"], creds["secretAccessKey"], creds["sessionToken"]),
        str(role)[:300],
        str(association)[:100],
    )


def error_code(headers: Mapping[str, str], body: bytes) -> tuple[str, str]:
    """A REST-JSON error's code (``x-amzn-errortype``, else the body's ``__type``/``code``) and
    message."""
    try:
        answer = decode_json(body)
    except ValueError:
        answer = None
    found = answer if isinstance(answer, dict) else {}
    code = headers.get("x-amzn-errortype", "") or str(
        found.get("__type") or found.get("code") or ""
    )
    message = found.get("message") or found.get("Message") or ""
    return code.split(":", 1)[0].rsplit("#", 1)[-1], str(message)


def assume_direct(
    cluster: str, token: str, node: AccessKeys, region: str, ca_bundle: str, ctx: Context
) -> PodRole | None:
    """The pod's role through the stdlib client, signed with ``node``; None: no association."""
    import json

    from credprovider.aws.sigv4 import sign_post
    from credprovider.runtime.http import HttpError, exchange, request
    from credprovider.runtime.tls import verified_context

    base = endpoint(region, ctx.environ)
    url = base + path(cluster)
    try:
        tls = verified_context(ca_bundle, "AWS_CA_BUNDLE") if url.startswith("https://") else None
    except OSError as exc:
        raise ProviderError(f"cannot read the CA bundle {ca_bundle}: {exc}") from None

    def send(
        method: str, url: str, headers: Mapping[str, str], body: bytes | None, timeout: float
    ) -> HttpResponse:
        signed = sign_post(
            host=url_host(url), headers=dict(headers),
            body=body or b"", keys=node, region=region, service=SERVICE, now=ctx.now(),
            path=path(cluster),
        )  # fmt: skip
        return request(method, url, headers=signed, body=body, timeout=timeout, tls=tls)

    ctx.deadline.phase = f"calling EKS Auth AssumeRoleForPodIdentity for cluster {cluster}"
    try:
        answer = exchange(
            ctx, "POST", url, what="EKS Auth AssumeRoleForPodIdentity",
            headers={"Content-Type": "application/json"},
            body=json.dumps({"token": token}).encode(), send=send,
        )  # fmt: skip
    except HttpError as exc:
        raise unreached(cluster, base, str(exc)) from None
    except BadAnswer as exc:
        raise ProviderError(f"EKS Auth answered badly: {exc.detail}") from None
    if answer.status == 200:
        return read_answer(cluster, decoded(cluster, answer.body))
    code, message = error_code(answer.headers, answer.body)
    if code == NO_ASSOCIATION:
        return None
    raise failure(cluster, code or str(answer.status), message)

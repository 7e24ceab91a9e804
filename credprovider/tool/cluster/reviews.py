"""What the API server lets the client do, asked the way the API server decides it
(``SelfSubjectAccessReview``, which every authenticated user may create): here, whether a node may
request service account tokens for an audience (``ServiceAccountNodeAudienceRestriction``, on since
v1.32; KEP-4412): the verb ``request-serviceaccounts-token-audience`` on the resource named as the
audience, in the core group. Asked without a service account's name, "allowed" means for every
service account; a rule that names service accounts allows only those, which reads here as not
allowed (the caller says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from credprovider.runtime.excerpt import clip
from credprovider.tool.cluster.connect import api_call

if TYPE_CHECKING:
    from lightkube import Client

AUDIENCE_VERB: Final = "request-serviceaccounts-token-audience"


@dataclass(frozen=True)
class Review:
    """The API server's answer: ``allowed``, and its reason ("" when it gave none)."""

    allowed: bool
    reason: str = ""


def may_request_tokens(client: Client, audience: str) -> Review:
    """Whether the client's user (a kubelet's: ``system:node:NAME``) may request service account
    tokens for ``audience``, for every service account. Raises ClusterError when it cannot be
    asked."""
    from lightkube.models.authorization_v1 import ResourceAttributes, SelfSubjectAccessReviewSpec
    from lightkube.resources.authorization_v1 import SelfSubjectAccessReview

    review = SelfSubjectAccessReview(
        spec=SelfSubjectAccessReviewSpec(
            resourceAttributes=ResourceAttributes(group="", resource=audience, verb=AUDIENCE_VERB)
        )
    )
    answered = api_call(
        f"asking the API server whether the node may request tokens for {clip(audience, 200)}",
        client.create,
        review,
    )
    status = getattr(answered, "status", None)
    allowed = getattr(status, "allowed", None)
    reason = getattr(status, "reason", None)
    return Review(allowed is True, clip(reason, 300) if isinstance(reason, str) else "")

"""A stand-in for EKS Auth's ``AssumeRoleForPodIdentity`` (moto has no eks-auth backend): it
checks a call as the service does, then answers with the role of the pod's association.

* the path: ``POST /clusters/<cluster>/assume-role-for-pod-identity`` of its one cluster;
* the signature: SigV4 for ``eks-auth`` by a node key whose secret it knows (botocore's signer over
  the request as received, as :class:`emulators.aws.FakeEcr` checks ECR's);
* the token: an RS256 JWT whose signature checks out with the cluster's service-account issuer
  key, audience ``pods.eks.amazonaws.com``, not expired, subject
  ``system:serviceaccount:<namespace>:<name>``;
* the association: ``(namespace, name) -> role``; none is ``ResourceNotFoundException`` (404).

Errors are REST-JSON as EKS Auth sends them (``x-amzn-ErrorType`` and ``{"message": ...}``).
Each credential issued gets a fresh access key; ``on_issued(key, secret, role)`` lets the ECR
stand-in recognise (and verify) what that key signs.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from emulators.aws import _SCOPE_RE, signature_valid
from emulators.http import FakeRequest, FakeResponse

AUDIENCE = "pods.eks.amazonaws.com"
_PATH = re.compile(r"/clusters/([^/]+)/assume-role-for-pod-identity")


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def verified_claims(token: str, public_key_pem: str) -> dict[str, Any] | None:
    """The JWT's claims when its RS256 signature checks out with the issuer's key (else None)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    try:
        header, payload, signature = token.split(".")
        if json.loads(_b64(header)).get("alg") != "RS256":
            return None
        key = serialization.load_pem_public_key(public_key_pem.encode())
        assert isinstance(key, rsa.RSAPublicKey)
        key.verify(_b64(signature), f"{header}.{payload}".encode(), padding.PKCS1v15(),
                   hashes.SHA256())  # fmt: skip
        claims = json.loads(_b64(payload))
    except (ValueError, InvalidSignature, AssertionError):
        return None
    return claims if isinstance(claims, dict) else None


def error(code: str, message: str, status: int) -> FakeResponse:
    return FakeResponse.json({"message": message}, status, headers={"x-amzn-ErrorType": code})


@dataclass
class FakeEksAuth:
    cluster: str
    issuer_key: str  # the service-account issuer's public key, PEM
    node_secrets: dict[str, str]  # access key -> secret key of the nodes allowed to call
    associations: dict[tuple[str, str], str] = field(default_factory=dict)
    on_issued: Callable[[str, str, str], None] | None = None
    valid_seconds: int = 3600
    # every call: (the access key that signed it, the subject, the role or the error code)
    calls: list[tuple[str, str, str]] = field(default_factory=list)

    def __call__(self, request: FakeRequest) -> FakeResponse:
        found = _PATH.fullmatch(request.path)
        scope = _SCOPE_RE.search(request.header("authorization"))
        key = scope.group(1) if scope else ""
        answer = self._answer(request, found, scope, key)
        said = answer.headers.get("x-amzn-ErrorType", "")
        self.calls.append((key, self._subject(request), said or "issued"))
        return answer

    def _subject(self, request: FakeRequest) -> str:
        claims = verified_claims(self._token(request), self.issuer_key)
        return str(claims.get("sub", "")) if claims else ""

    @staticmethod
    def _token(request: FakeRequest) -> str:
        try:
            body = request.json()
        except ValueError:
            return ""
        token = body.get("token") if isinstance(body, dict) else None
        return token if isinstance(token, str) else ""

    def _answer(
        self, request: FakeRequest, found: re.Match[str] | None, scope: Any, key: str
    ) -> FakeResponse:
        if request.method != "POST" or found is None:
            return error("InvalidRequestException", "unknown operation", 400)
        if found.group(1) != self.cluster:
            return error("InvalidParameterException", f"no cluster {found.group(1)}", 400)
        secret = self.node_secrets.get(key)
        if scope is None or scope.group(3) != "eks-auth" or secret is None:
            return error("AccessDeniedException", "not signed by a node of this cluster", 403)
        if not signature_valid(request, secret):
            return error("AccessDeniedException", "the request signature does not match", 403)
        claims = verified_claims(self._token(request), self.issuer_key)
        if claims is None:
            return error("InvalidTokenException", "the token's signature is not the issuer's", 400)
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences or []
        if AUDIENCE not in audiences:
            return error("InvalidTokenException", f"the token's audience is not {AUDIENCE}", 400)
        if not isinstance(claims.get("exp"), int) or claims["exp"] <= time.time():
            return error("ExpiredTokenException", "the token has expired", 400)
        parts = str(claims.get("sub", "")).split(":")
        if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"]:
            return error("InvalidTokenException", "not a service account token", 400)
        role = self.associations.get((parts[2], parts[3]))
        if role is None:
            return error("ResourceNotFoundException", "no pod identity association", 404)
        access_key = "ASIAPOD" + secrets.token_hex(6).upper()
        secret_key, session = secrets.token_hex(20), secrets.token_hex(32)
        if self.on_issued is not None:
            self.on_issued(access_key, secret_key, role)
        return FakeResponse.json(
            {
                "subject": {"namespace": parts[2], "serviceAccount": parts[3]},
                "audience": AUDIENCE,
                "podIdentityAssociation": {
                    "associationArn": f"arn:aws:eks:us-west-2:111122223333:podidentityassociation/"
                    f"{self.cluster}/a-{parts[3]}",
                    "associationId": f"a-{parts[3]}",
                },
                "assumedRoleUser": {"arn": role, "assumeRoleId": f"AROA:{parts[3]}"},
                "credentials": {
                    "accessKeyId": access_key,
                    "secretAccessKey": secret_key,
                    "sessionToken": session,
                    "expiration": int(time.time()) + self.valid_seconds,
                },
            }
        )

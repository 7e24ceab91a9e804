"""A fake of the ECR and ECR Public JSON APIs (moto has no ECR Public, and a fixed 2015 expiry).

It speaks the awsJson1.1 protocol botocore uses (``X-Amz-Target`` header) and records, per call,
the target and the SigV4 credential scope, so tests can assert the region a request was signed for
and which credentials (node or assumed role) signed it. For access keys listed in ``secret_keys``
it also checks the signature as AWS would, with botocore's signer over the request as received.
"""

from __future__ import annotations

import base64
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from emulators.http import FakeRequest, FakeResponse
from emulators.ratelimit import TokenBucket
from emulators.registry import Refused

# A node's static keys, as every test, the demo and the bench give them to the plugin.
NODE_KEY = "AKIDNODE0000000000"
NODE_SECRET = "node-secret-access-key-0123456789"
# Nothing listens on the discard port: a call that should never be made fails at once.
NOWHERE = "http://127.0.0.1:9"

AMZ_JSON = "application/x-amz-json-1.1"
PRIVATE_TARGET = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"
PUBLIC_TARGET = "SpencerFrontendService.GetAuthorizationToken"
_SCOPE_RE = re.compile(r"Credential=([^/]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")


_AUTHORIZATION_RE = re.compile(
    r"AWS4-HMAC-SHA256 Credential=([^/]+)/\d{8}/([^/]+)/([^/]+)/aws4_request, "
    r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})"
)


@dataclass
class EcrCall:
    target: str
    access_key: str
    region: str
    service: str
    session_token: str
    signature_valid: bool | None = None  # None: the access key's secret is not known here
    user_agent: str = ""
    at: float = field(default_factory=time.monotonic)  # when it arrived


def signature_valid(request: FakeRequest, secret_key: str) -> bool:
    """botocore's SigV4 over the request as received equals the signature it carries."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    match = _AUTHORIZATION_RE.fullmatch(request.header("authorization"))
    if match is None:
        return False
    access_key, region, service, signed, signature = match.groups()
    headers = {name: request.header(name) for name in signed.split(";")}
    received = AWSRequest(
        method=request.method,
        url=f"http://{request.header('host')}{request.path}",
        data=request.body,
        headers=headers,
    )
    received.context["timestamp"] = request.header("x-amz-date")
    token = request.header("x-amz-security-token") or None
    signer = SigV4Auth(Credentials(access_key, secret_key, token), service, region)
    expected = signer.signature(
        signer.string_to_sign(received, signer.canonical_request(received)), received
    )
    return bool(expected == signature)


@dataclass(frozen=True)
class EcrIssue:
    access_key: str
    region: str
    target: str
    expires_at: float | None


@dataclass
class FakeEcr:
    """ECR + ECR Public. ``password`` and ``valid_seconds`` shape the token; ``fault`` overrides all."""

    username: str = "AWS"
    password: str = "ecr-password-0123456789abcdef"
    valid_seconds: float | None = 43200.0
    fault: FakeResponse | None = None
    token_override: str | None = None
    omit_token: bool = False
    empty_data: bool = False
    delay: float = 0.0
    secret_keys: dict[str, str] = field(default_factory=dict)
    # access key id -> the password its caller's tokens carry (one identity per key; else password)
    passwords: dict[str, str] = field(default_factory=dict)
    calls: list[EcrCall] = field(default_factory=list)
    # every token's password differs (``<password>-<n>``), as ECR's do: an expired one is told
    # apart from its successor
    rotate: bool = False
    # password -> what it was issued for (the registries of the real-runtime sandbox check it)
    issued: dict[str, EcrIssue] = field(default_factory=dict)
    # ECR's rate limit: a call the bucket refuses is answered ThrottlingException (HTTP 400)
    bucket: TokenBucket | None = None
    # a token made and recorded as one step: two calls at once (the server answers each in a thread
    # of its own) counted the same len(issued), so two regions' tokens shared one rotated password
    # and the later record made the registry refuse the earlier region's pull (a 401 under load)
    _issuing: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def token(self, access_key: str = "") -> str:
        if self.token_override is not None:
            return self.token_override
        password = self.passwords.get(access_key, self.password)
        if self.rotate:
            password = f"{password}-{len(self.issued)}"
        return base64.b64encode(f"{self.username}:{password}".encode()).decode()

    def registry_identity(self, host: str, username: str, password: str) -> str:
        """Who pulls from the ECR registry ``host`` (``<account>.dkr.ecr.<region>...`` or
        ``public.ecr.aws``) with this basic auth: the access key the token was issued to. Raises
        :class:`Refused` as the registry refuses it: not a token this ECR issued, one issued
        in another region (or by the other API), or one past its expiry."""
        issue = self.issued.get(password)
        if username != self.username or issue is None:
            raise Refused("not an ECR authorization token")
        public = host.split(":")[0] in ("public.ecr.aws", "ecr-public.aws.com")
        if public != (issue.target == PUBLIC_TARGET):
            raise Refused(f"a token of {issue.target.split('.')[0]} is not valid at {host}")
        if not public and f".{issue.region}." not in f".{host}.":
            raise Refused(f"a token for {issue.region} is not valid at {host}")
        if issue.expires_at is not None and issue.expires_at <= time.time():
            raise Refused("the authorization token has expired")
        return issue.access_key

    def __call__(self, request: FakeRequest) -> FakeResponse:
        target = request.header("x-amz-target")
        scope = _SCOPE_RE.search(request.header("authorization"))
        access_key = scope.group(1) if scope else ""
        secret = self.secret_keys.get(access_key)
        self.calls.append(
            EcrCall(
                target=target,
                access_key=access_key,
                region=scope.group(2) if scope else "",
                service=scope.group(3) if scope else "",
                session_token=request.header("x-amz-security-token"),
                signature_valid=None if secret is None else signature_valid(request, secret),
                user_agent=request.header("user-agent"),
            )
        )
        if self.fault is not None:
            return self.fault
        if self.bucket is not None and not self.bucket.take():
            return aws_error("ThrottlingException", "Rate exceeded")
        if scope is None or not scope.group(2):
            # AWS's answer to a request signed for the region '' (a signer with no region).
            return aws_error(
                "InvalidSignatureException",
                "Credential should be scoped to a valid region, not ''. ",
            )
        if self.delay:
            time.sleep(self.delay)
        expires_at = None if self.valid_seconds is None else time.time() + self.valid_seconds
        with self._issuing:
            token = self.token(access_key)
            if self.token_override is None:
                password = base64.b64decode(token).decode().partition(":")[2]
                self.issued[password] = EcrIssue(access_key, scope.group(2), target, expires_at)
        entry: dict[str, object] = {} if self.omit_token else {"authorizationToken": token}
        if expires_at is not None:
            entry["expiresAt"] = expires_at
        content_type = AMZ_JSON
        if target == PRIVATE_TARGET:
            data: object = [] if self.empty_data else [entry]
            return FakeResponse.json({"authorizationData": data}, content_type=content_type)
        if target == PUBLIC_TARGET:
            return FakeResponse.json(
                {"authorizationData": None if self.empty_data else entry}, content_type=content_type
            )
        return FakeResponse.json(
            {"__type": "UnknownOperationException"}, 400, content_type=AMZ_JSON
        )


STS_ERROR_TEMPLATE = (
    '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
    "<Code>{code}</Code><Message>{message}</Message></Error><RequestId>r-1</RequestId></ErrorResponse>"
)


def sts_error(code: str, message: str, status: int = 400) -> FakeResponse:
    """An STS (query protocol) error response."""
    return FakeResponse(
        status=status,
        body=STS_ERROR_TEMPLATE.format(code=code, message=message).encode(),
        headers={"Content-Type": "text/xml"},
    )


def ecr_env(ecr_url: str, sts_url: str = NOWHERE, **extra: str) -> dict[str, str]:
    """The plugin's environment on a node with static keys (:data:`NODE_KEY`), its ECR and ECR
    Public calls sent to ``ecr_url`` and its STS calls to ``sts_url``; ``extra`` added last."""
    return {
        "AWS_ACCESS_KEY_ID": NODE_KEY,
        "AWS_SECRET_ACCESS_KEY": NODE_SECRET,
        "AWS_ENDPOINT_URL_ECR": ecr_url,
        "AWS_ENDPOINT_URL_ECR_PUBLIC": ecr_url,
        "AWS_ENDPOINT_URL_STS": sts_url,
        **extra,
    }


def aws_error(code: str, message: str, status: int = 400) -> FakeResponse:
    """An AWS JSON-protocol error answer, as ECR sends one."""
    return FakeResponse.json({"__type": code, "message": message}, status, content_type=AMZ_JSON)


@dataclass
class StsRecorder:
    """A front for moto's STS that forwards every request and records what was asked
    (``actions``) and which role each session key was issued for (``roles``: AccessKeyId -> the
    RoleArn of the AssumeRoleWithWebIdentity that issued it); ``on_assumed(key, role)`` runs for
    each (for example, to give that key's ECR tokens a password of their own)."""

    target: str
    on_assumed: Callable[[str, str], None] | None = None
    actions: list[str] = field(default_factory=list)
    roles: dict[str, str] = field(default_factory=dict)

    def __call__(self, request: FakeRequest) -> FakeResponse:
        import urllib.error
        import urllib.request
        from urllib.parse import urlencode

        action = request.form.get("Action", request.path)
        self.actions.append(action)
        query = f"?{urlencode(request.query, doseq=True)}" if request.query else ""
        headers = {k: v for k, v in request.headers.items() if k not in ("host", "content-length")}
        outgoing = urllib.request.Request(
            self.target + request.path + query,
            data=request.body,
            headers=headers,
            method=request.method,
        )
        try:
            with urllib.request.urlopen(outgoing, timeout=30) as answer:
                status, body, answer_headers = answer.status, answer.read(), answer.headers
        except urllib.error.HTTPError as refused:
            status, body, answer_headers = refused.code, refused.read(), refused.headers
        found = re.search(rb"<AccessKeyId>([^<]+)</AccessKeyId>", body)
        if action == "AssumeRoleWithWebIdentity" and status == 200 and found:
            key, role = found.group(1).decode(), request.form.get("RoleArn", "")
            self.roles[key] = role
            if self.on_assumed is not None:
                self.on_assumed(key, role)
        return FakeResponse(status, body, dict(answer_headers.items()))

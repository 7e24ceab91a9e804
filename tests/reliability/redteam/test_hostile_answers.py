"""#30 class 1: an endpoint's answer cannot crash a plugin or grow its memory without bound.

Every endpoint a plugin reads, on every route (the stdlib client, botocore, requests under
google-auth and azure-identity), is given every hostile answer in :data:`ANSWERS`: JSON nested a
hundred thousand levels deep (as a 200, as an error, inside a JWT's claims), bodies past the 1 MiB
cap (announced, streamed without end chunked or unframed, a gzip bomb), numbers no real endpoint
sends. The built bundle runs under an address-space limit (``prlimit --as``) that an unbounded
read would hit. Each case must end as the kubelet can use it: exit 1, nothing on stdout, one line
that names the endpoint and what was wrong with its answer, no traceback, no "report it".

A new endpoint is a row of :data:`ENDPOINTS`; a new kind of hostile answer a row of
:data:`ANSWERS`.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from credprovider.runtime.answer import MAX_JSON_DEPTH
from emulators.aws import AMZ_JSON
from emulators.azure import make_jwt
from emulators.gcp import write_service_account_key
from emulators.harness import GCP_PULLER, Emulator
from emulators.http import FakeRequest, FakeResponse, FakeServer, serve
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.helpers import require_bundle
from tests.reliability.checks import Figures, Outcome, answer_violations

DEADLINE = 20.0
# Room for the largest route (botocore, its thread and its loaded models) and little more: a body
# read without a cap passes it within a second of an endless stream.
ADDRESS_SPACE = 768 << 20
NESTING = 100_000
ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/app"
ROLE = "arn:aws:iam::123456789012:role/image-puller"
SA_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2E6ZGVmYXVsdDphcHAifQ.c2lnbmF0dXJl"


class Hostile:
    """A loopback server whose answers a case sets: ``answer`` for the endpoint under test, and
    ``handler`` for how the endpoint's other paths answer on the way to it."""

    def __init__(self) -> None:
        self.answer = FakeResponse(404)
        self.handler: Callable[[FakeRequest], FakeResponse] = lambda _: self.answer
        self.server = serve(lambda request: self.handler(request))

    def __enter__(self) -> FakeServer:
        return self.server.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(None, None, None)


@dataclass
class Rig:
    aws: Emulator
    gcp: Emulator
    azure: Emulator
    hostile: Hostile
    server: FakeServer
    tmp: Path


# How an endpoint is reached: installs ``answer`` where the plugin will read it and returns the
# plugin's stdin, arguments and environment.
Setup = Callable[[Rig, FakeResponse], tuple[bytes, list[str], dict[str, str]]]


@dataclass(frozen=True)
class Endpoint:
    plugin: str
    named: str  # what the error line must call the endpoint
    setup: Setup
    number: Callable[[str], FakeResponse] | None = None  # a good answer, its expiry this JSON text
    claims: Callable[[str], FakeResponse] | None = None  # a good answer, its JWT's claims this JSON
    xml: bool = False  # the endpoint answers XML (AWS STS): its deep answer nests elements


def _ecr(botocore: bool) -> Setup:
    def setup(rig: Rig, answer: FakeResponse) -> tuple[bytes, list[str], dict[str, str]]:
        rig.aws.fakes["ecr"].fault = answer  # type: ignore[attr-defined]
        extra = {"AWS_USE_DUALSTACK_ENDPOINT": "false"} if botocore else {}
        return request_bytes(ECR_IMAGE), [], {**rig.aws.env, **extra}

    return setup


def _ecr_answer(number: str) -> FakeResponse:
    token = base64.b64encode(b"AWS:ecr-password").decode()
    body = f'{{"authorizationData":[{{"authorizationToken":"{token}","expiresAt":{number},'
    body += '"proxyEndpoint":"https://123456789012.dkr.ecr.us-east-1.amazonaws.com"}]}'
    return FakeResponse(200, body.encode(), {"Content-Type": AMZ_JSON})


def _node_without_keys(rig: Rig) -> dict[str, str]:
    return {
        **rig.aws.env,
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def _ec2_imds(rig: Rig, answer: FakeResponse) -> tuple[bytes, list[str], dict[str, str]]:
    """The instance role's keys: the stdlib asks first, then botocore asks again."""

    def imds(request: FakeRequest) -> FakeResponse:
        if request.method == "PUT" and request.path == "/latest/api/token":
            return FakeResponse.text("imds-session-token")
        if request.path == "/latest/meta-data/iam/security-credentials/":
            return FakeResponse.text("node-role")
        if request.path == "/latest/meta-data/iam/security-credentials/node-role":
            return answer
        return FakeResponse.text("not found", 404)

    rig.hostile.handler = imds
    env = {
        **_node_without_keys(rig),
        "AWS_EC2_METADATA_DISABLED": "false",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": rig.server.url,
    }
    return request_bytes(ECR_IMAGE), [], env


def _ecs_container(rig: Rig, answer: FakeResponse) -> tuple[bytes, list[str], dict[str, str]]:
    rig.hostile.answer = answer
    env = {
        **_node_without_keys(rig),
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": f"{rig.server.url}/v2/credentials",
    }
    return request_bytes(ECR_IMAGE), [], env


def _aws_sts(rig: Rig, answer: FakeResponse) -> tuple[bytes, list[str], dict[str, str]]:
    rig.hostile.answer = answer
    stdin = request_bytes(
        ECR_IMAGE, token=SA_TOKEN, annotations={"eks.amazonaws.com/ecr-role-arn": ROLE}
    )
    return stdin, [], {**rig.aws.env, "AWS_ENDPOINT_URL_STS": rig.server.url}


def _azure_imds(rig: Rig, answer: FakeResponse) -> tuple[bytes, list[str], dict[str, str]]:
    rig.azure.fakes["imds"].fault = answer  # type: ignore[attr-defined]
    return request_bytes("contoso.azurecr.io/app"), [rig.azure.files["config"]], rig.azure.env


def _azure_imds_answer(number: str) -> FakeResponse:
    token = make_jwt({"aud": "acr"})
    shown = f'"{number}"' if number.lstrip("-").isdigit() else number  # IMDS quotes integers
    body = f'{{"access_token":"{token}","expires_on":{shown},"token_type":"Bearer"}}'
    return FakeResponse(200, body.encode(), {"Content-Type": "application/json"})


def _acr_exchange(proxied: bool) -> Setup:
    def setup(rig: Rig, answer: FakeResponse) -> tuple[bytes, list[str], dict[str, str]]:
        rig.azure.fakes["acr"].exchange_fault = answer  # type: ignore[attr-defined]
        extra = (
            {"HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "contoso.azurecr.io"}
            if proxied
            else {}
        )
        stdin = request_bytes("contoso.azurecr.io/app")
        return stdin, [rig.azure.files["config"]], {**rig.azure.env, **extra}

    return setup


def _acr_refresh_token(claims: str) -> FakeResponse:
    header = base64.urlsafe_b64encode(b'{"alg":"RS256"}').decode().rstrip("=")
    payload = base64.urlsafe_b64encode(claims.encode()).decode().rstrip("=")
    token = f"{header}.{payload}.c2lnbmF0dXJl"
    return FakeResponse(200, json.dumps({"refresh_token": token}).encode())


def _aad_client_secret(rig: Rig, answer: FakeResponse) -> tuple[bytes, list[str], dict[str, str]]:
    rig.azure.fakes["aad"].fault = answer  # type: ignore[attr-defined]
    config = rig.tmp / "sp.json"
    config.write_text(json.dumps({"tenantId": "t", "aadClientId": "a", "aadClientSecret": "s"}))
    return request_bytes("contoso.azurecr.io/app"), [str(config)], rig.azure.env


def _token_answer(number: str) -> FakeResponse:
    body = f'{{"access_token":"ya29.token","expires_in":{number},"token_type":"Bearer"}}'
    return FakeResponse(200, body.encode(), {"Content-Type": "application/json"})


def _gce_metadata(rig: Rig, answer: FakeResponse) -> tuple[bytes, list[str], dict[str, str]]:
    rig.gcp.fakes["metadata"].token_fault = answer  # type: ignore[attr-defined]
    return request_bytes("gcr.io/p/app"), ["get-credentials"], rig.gcp.env


def _google_key_file(rig: Rig, answer: FakeResponse) -> tuple[bytes, list[str], dict[str, str]]:
    rig.hostile.answer = answer
    key = rig.tmp / "key.json"
    write_service_account_key(key, f"{rig.server.url}/token")
    env = {**rig.gcp.env, "GOOGLE_APPLICATION_CREDENTIALS": str(key)}
    return request_bytes("gcr.io/p/app"), ["get-credentials"], env


def _google_sts(rig: Rig, answer: FakeResponse) -> tuple[bytes, list[str], dict[str, str]]:
    rig.gcp.fakes["sts"].fault = answer  # type: ignore[attr-defined]
    idp = "https://container.googleapis.com/v1/projects/p/locations/l/clusters/c1"
    args = ["get-credentials", "--identity-provider", idp, "--project-id", "p"]
    stdin = request_bytes(
        "gcr.io/p/app", token=SA_TOKEN, annotations={"iam.gke.io/enable-wi-image-pull": "true"}
    )
    return stdin, args, rig.gcp.env


def _google_impersonation(
    rig: Rig, answer: FakeResponse
) -> tuple[bytes, list[str], dict[str, str]]:
    rig.gcp.fakes["iam"].fault = answer  # type: ignore[attr-defined]
    args = ["get-credentials", f"--impersonate-service-account={GCP_PULLER}"]
    return request_bytes("gcr.io/p/app"), args, rig.gcp.env


ECR = "ecr-credential-provider"
ACR = "acr-credential-provider"
GCP = "auth-provider-gcp"
ENDPOINTS = {
    "ecr api, stdlib": Endpoint(ECR, "GetAuthorizationToken", _ecr(False), _ecr_answer),
    "ecr api, botocore": Endpoint(ECR, "GetAuthorizationToken", _ecr(True), _ecr_answer),
    "ec2 imds, stdlib then botocore": Endpoint(ECR, "security-credentials", _ec2_imds),
    "ecs container credentials, botocore": Endpoint(ECR, "credentials", _ecs_container),
    "sts assume role, botocore": Endpoint(ECR, "AssumeRoleWithWebIdentity", _aws_sts, xml=True),
    "azure imds, stdlib": Endpoint(ACR, "IMDS", _azure_imds, _azure_imds_answer),
    "acr exchange, stdlib": Endpoint(
        ACR, "exchange", _acr_exchange(False), claims=_acr_refresh_token
    ),
    "acr exchange, requests": Endpoint(
        ACR, "exchange", _acr_exchange(True), claims=_acr_refresh_token
    ),
    "aad token, azure-identity": Endpoint(ACR, "token", _aad_client_secret, _token_answer),
    "gce metadata, stdlib": Endpoint(GCP, "metadata server", _gce_metadata, _token_answer),
    "google oauth, google-auth": Endpoint(GCP, "token", _google_key_file, _token_answer),
    "google sts, workload identity": Endpoint(GCP, "STS", _google_sts, _token_answer),
    "google iam credentials, impersonation": Endpoint(
        GCP, "IAM Credentials", _google_impersonation
    ),
}


@functools.cache
def _gzip_bomb() -> bytes:
    return gzip.compress(b"{" + b" " * (64 << 20) + b"}", compresslevel=9)


def _deep(endpoint: Endpoint) -> bytes:
    if endpoint.xml:
        return b"<a>" * NESTING + b"</a>" * NESTING
    return b"[" * NESTING + b"]" * NESTING


JSON = {"Content-Type": "application/json"}
# (name, the hostile answer for an endpoint or None where it does not apply, what the line says)
Answer = tuple[str, Callable[[Endpoint], FakeResponse | None], str]
TOO_DEEP = f"nested more than {MAX_JSON_DEPTH} levels deep"
TOO_LARGE = "larger than 1 MiB"
OUT_OF_RANGE = "number out of range"
ANSWERS: list[Answer] = [
    ("deep array", lambda e: FakeResponse(200, _deep(e), JSON), TOO_DEEP),
    (
        "deep object",
        lambda e: FakeResponse(200, b'{"a":' * NESTING + b"0" + b"}" * NESTING, JSON),
        TOO_DEEP,
    ),
    ("deep error body", lambda e: FakeResponse(400, _deep(e), JSON), ""),
    ("deep server error", lambda e: FakeResponse(500, _deep(e), JSON), ""),
    (
        "2 MiB body",
        lambda e: FakeResponse(200, b'{"p":"' + b"x" * (2 << 20) + b'"}', JSON),
        TOO_LARGE,
    ),
    ("1 TiB announced", lambda e: FakeResponse(200, b"x", JSON, endless="announced"), TOO_LARGE),
    ("endless chunked", lambda e: FakeResponse(200, b"x", JSON, endless="chunked"), TOO_LARGE),
    ("endless unframed", lambda e: FakeResponse(200, b"x", JSON, endless="unframed"), TOO_LARGE),
    (
        "gzip bomb",
        lambda e: FakeResponse(200, _gzip_bomb(), {**JSON, "Content-Encoding": "gzip"}),
        TOO_LARGE,
    ),
    ("400-digit expiry", lambda e: e.number and e.number("9" * 400), OUT_OF_RANGE),
    ("expiry past float", lambda e: e.number and e.number("1e400"), OUT_OF_RANGE),
    ("negative 400 digits", lambda e: e.number and e.number("-" + "9" * 400), OUT_OF_RANGE),
    (
        "claims nested deep",
        lambda e: e.claims and e.claims("[" * NESTING + "]" * NESTING),
        TOO_DEEP,
    ),
    ("exp of 400 digits", lambda e: e.claims and e.claims(f'{{"exp":{"9" * 400}}}'), OUT_OF_RANGE),
]
CASES = [
    (endpoint, answer)
    for endpoint in ENDPOINTS
    for answer, make, _ in ANSWERS
    if make(ENDPOINTS[endpoint]) is not None
]


@pytest.fixture(scope="module")
def hostile() -> Iterator[tuple[Hostile, FakeServer]]:
    holder = Hostile()
    with holder as server:
        yield holder, server


@pytest.fixture
def rig(
    aws: Emulator,
    gcp: Emulator,
    azure: Emulator,
    hostile: tuple[Hostile, FakeServer],
    tmp_path: Path,
) -> Iterator[Rig]:
    holder, server = hostile
    yield Rig(aws, gcp, azure, holder, server, tmp_path)
    holder.answer, holder.handler = FakeResponse(404), lambda _: holder.answer
    for fake, name in (
        (aws.fakes["ecr"], "fault"),
        (azure.fakes["imds"], "fault"),
        (azure.fakes["aad"], "fault"),
        (azure.fakes["acr"], "exchange_fault"),
        (gcp.fakes["metadata"], "token_fault"),
        (gcp.fakes["sts"], "fault"),
        (gcp.fakes["iam"], "fault"),
    ):
        setattr(fake, name, None)


def test_every_endpoint_meets_every_size_and_depth_answer() -> None:
    """The table covers what the issue names: each endpoint gets each body-shape answer."""
    shapes = {name for name, _, phrase in ANSWERS if phrase in (TOO_DEEP, TOO_LARGE, "")}
    for endpoint in ENDPOINTS:
        assert shapes - {"claims nested deep"} <= {a for e, a in CASES if e == endpoint}
    assert any(e.claims for e in ENDPOINTS.values()) and any(e.number for e in ENDPOINTS.values())


@pytest.mark.parametrize(("endpoint", "answer"), CASES, ids=[" - ".join(c) for c in CASES])
def test_a_hostile_answer_is_one_line(
    rig: Rig, figures: Figures, endpoint: str, answer: str
) -> None:
    require_bundle()
    spec = ENDPOINTS[endpoint]
    make, phrase = next((m, p) for name, m, p in ANSWERS if name == answer)
    response = make(spec)
    assert response is not None
    stdin, args, env = spec.setup(rig, response)
    run = run_plugin(
        spec.plugin,
        stdin,
        [*args, f"--deadline={DEADLINE:g}s"],
        env,
        use_bundle=True,
        address_space=ADDRESS_SPACE,
    )
    problems = answer_violations(run, DEADLINE)
    line = run.error_lines[-1] if run.error_lines else ""
    if run.code != 1:
        problems.append(f"exit {run.code}: {run.stdout[:200]!r}")
    for wrong in ("report it", "internal error", "MemoryError", "RecursionError", "deadline"):
        if wrong in run.stderr:
            problems.append(f"says {wrong!r}")
    if phrase and phrase not in line:
        problems.append(f"does not say {phrase!r}")
    if spec.named.lower() not in line.lower():
        problems.append(f"does not name the endpoint ({spec.named!r})")
    figures.record(
        Outcome(
            "hostile-answer",
            f"{endpoint}: {answer}",
            run.code,
            run.seconds,
            DEADLINE,
            not problems,
            "; ".join(problems),
        )
    )
    assert not problems, f"{problems}\n{run.stderr[-600:]}"


def test_the_address_space_limit_catches_an_unbounded_read(tmp_path: Path) -> None:
    """The limit is small enough that reading an endless body into memory fails under it."""
    script = tmp_path / "unbounded.py"
    script.write_text("import sys, urllib.request\nurllib.request.urlopen(sys.argv[1]).read()\n")
    with serve(lambda _: FakeResponse(200, b"x", endless="unframed")) as server:
        import subprocess
        import sys

        proc = subprocess.run(
            ["prlimit", f"--as={ADDRESS_SPACE}", "--", sys.executable, str(script), server.url],
            capture_output=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode != 0 and b"MemoryError" in proc.stderr, proc.stderr[-300:]

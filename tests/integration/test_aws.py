"""ecr-credential-provider against moto (ECR, STS) and the project's ECR/ECR Public fake.

Endpoints are pointed at loopback with the SDK's standard ``AWS_ENDPOINT_URL_<SERVICE>`` settings.
With keys in the environment and no profile file a token is fetched by the stdlib path
(``credprovider/aws/direct.py``); the ``route`` fixture runs the main cases a second time with an
(empty) profile file, which sends them through botocore's endpoint resolution, signing, retries and
parsing. The fake checks every signature with botocore's signer.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from credprovider.goformat import SECOND, parse_go_duration
from credprovider.matching import keyring_lookup
from tests.fakes.aws import PRIVATE_TARGET, PUBLIC_TARGET, FakeEcr, sts_error
from tests.fakes.http import FakeRequest, FakeResponse, FakeServer, serve
from tests.fakes.tls import CertAuthority
from tests.helpers import request_bytes, run_listing_imports, run_plugin

PLUGIN = "ecr-credential-provider"
NODE_KEY = "AKIDNODE0000000000"
NODE_SECRET = "node-secret-access-key-0123456789"
SA_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2E6ZGVmYXVsdDphcHAifQ.c2lnbmF0dXJl"
ROLE = "arn:aws:iam::123456789012:role/image-puller"


def aws_env(ecr_url: str, sts_url: str, **extra: str) -> dict[str, str]:
    env = {
        "AWS_ACCESS_KEY_ID": NODE_KEY,
        "AWS_SECRET_ACCESS_KEY": NODE_SECRET,
        "AWS_ENDPOINT_URL_ECR": ecr_url,
        "AWS_ENDPOINT_URL_ECR_PUBLIC": ecr_url,
        "AWS_ENDPOINT_URL_STS": sts_url,
    }
    env.update(extra)
    return env


@pytest.fixture(params=["stdlib", "botocore"])
def route(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Extra env that selects the path: none (stdlib), or an empty profile file (botocore)."""
    if request.param == "stdlib":
        return {}
    config = tmp_path / "aws-config"
    config.write_text("")
    return {"AWS_CONFIG_FILE": str(config)}


def assumed_role_arn(access_key_id: str) -> str | None:
    """The role moto issued ``access_key_id`` for (moto runs in this process)."""
    from moto.sts.models import sts_backends

    for account in sts_backends.values():
        for backend in account.values():
            for role in backend.assumed_roles:
                if role.access_key_id == access_key_id:
                    return str(role.role_arn)
    return None


PRIVATE_HOSTS = [
    ("123456789012.dkr.ecr.us-east-1.amazonaws.com", "us-east-1"),
    ("123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
    ("123456789012.dkr-ecr.us-west-2.on.aws", "us-west-2"),
    ("123456789012.dkr-ecr-fips.us-east-2.on.aws", "us-east-2"),
    ("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn", "cn-north-1"),
    ("123456789012.dkr-ecr.cn-northwest-1.on.amazonwebservices.com.cn", "cn-northwest-1"),
    ("123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu", "eusc-de-east-1"),
    ("123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov", "us-iso-east-1"),
    ("123456789012.dkr.ecr.us-isob-east-1.sc2s.sgov.gov", "us-isob-east-1"),
    ("123456789012.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk", "eu-isoe-west-1"),
    ("123456789012.dkr.ecr.us-isof-south-1.csp.hci.ic.gov", "us-isof-south-1"),
]


@pytest.mark.parametrize(("host", "region"), PRIVATE_HOSTS)
def test_private_registry_of_every_partition(
    ecr: tuple[FakeEcr, FakeServer],
    moto_server: str,
    host: str,
    region: str,
    route: dict[str, str],
) -> None:
    fake, server = ecr
    fake.secret_keys[NODE_KEY] = NODE_SECRET
    image = f"{host}/team/app"
    run = run_plugin(PLUGIN, request_bytes(image), env=aws_env(server.url, moto_server, **route))
    response = run.response
    assert [c.signature_valid for c in fake.calls] == [True]
    assert response["cacheKeyType"] == "Registry"
    assert response["auth"] == {host: {"username": "AWS", "password": fake.password}}
    assert [(c.target, c.region, c.access_key) for c in fake.calls] == [
        (PRIVATE_TARGET, region, NODE_KEY)
    ]
    assert keyring_lookup(list(response["auth"]), image) == [host]


def test_against_moto_ecr(moto_server: str, use_bundle: bool) -> None:
    image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/app"
    run = run_plugin(
        PLUGIN, request_bytes(image), env=aws_env(moto_server, moto_server), use_bundle=use_bundle
    )
    # moto issues "AWS:<account>-auth-token" that expired in 2015: never cache an expired token.
    assert run.response["auth"] == {
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com": {
            "username": "AWS",
            "password": "123456789012-auth-token",
        }
    }
    assert run.response["cacheDuration"] == "0s"
    assert run.stderr_lines == [line for line in run.stderr_lines if "test mode" in line]


@pytest.mark.parametrize("host", ["public.ecr.aws", "ecr-public.aws.com"])
def test_public_registry_uses_ecr_public_in_us_east_1(
    ecr: tuple[FakeEcr, FakeServer],
    moto_server: str,
    host: str,
    use_bundle: bool,
    route: dict[str, str],
) -> None:
    fake, server = ecr
    fake.secret_keys[NODE_KEY] = NODE_SECRET
    run = run_plugin(
        PLUGIN,
        request_bytes(f"{host}/nginx/nginx"),
        env=aws_env(server.url, moto_server, **route),
        use_bundle=use_bundle,
    )
    assert [c.signature_valid for c in fake.calls] == [True]
    assert run.response["auth"] == {host: {"username": "AWS", "password": fake.password}}
    assert [(c.target, c.region, c.service) for c in fake.calls] == [
        (PUBLIC_TARGET, "us-east-1", "ecr-public")
    ]


def test_private_host_with_public_ecr_in_the_path_is_private(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    fake, server = ecr
    image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/public.ecr.aws/x"
    assert run_plugin(PLUGIN, request_bytes(image), env=aws_env(server.url, moto_server)).response
    assert [c.target for c in fake.calls] == [PRIVATE_TARGET]


@pytest.mark.parametrize(
    ("image", "key"),
    [
        (
            "123456789012.dkr.ecr.us-east-1.amazonaws.com:443/app",
            "123456789012.dkr.ecr.us-east-1.amazonaws.com:443",
        ),
        ("public.ecr.aws:443/x/y", "public.ecr.aws:443"),
    ],
)
def test_port_is_kept_in_the_auth_key(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, image: str, key: str
) -> None:
    _, server = ecr
    run = run_plugin(PLUGIN, request_bytes(image), env=aws_env(server.url, moto_server))
    assert list(run.response["auth"]) == [key]
    assert keyring_lookup([key], image) == [key]  # upstream's port-less key would not match


@pytest.mark.parametrize(
    ("valid_seconds", "expected"),
    [
        (7200, ("1h0m0s", "59m59s")),
        (43200, ("6h0m0s", "5h59m59s")),
        (1, ("0s",)),
        (-60, ("0s",)),
    ],
)
def test_cache_duration_is_half_the_remaining_validity(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, valid_seconds: int, expected: tuple[str, ...]
) -> None:
    fake, server = ecr
    fake.valid_seconds = valid_seconds
    run = run_plugin(
        PLUGIN,
        request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
        env=aws_env(server.url, moto_server),
    )
    assert run.response["cacheDuration"] in expected


def test_token_without_expiry_leaves_cache_duration_to_the_kubelet(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    fake, server = ecr
    fake.valid_seconds = None
    run = run_plugin(
        PLUGIN, request_bytes("public.ecr.aws/a/b"), env=aws_env(server.url, moto_server)
    )
    assert "cacheDuration" not in run.response


@pytest.mark.parametrize(
    ("annotations", "env", "role"),
    [
        ({"eks.amazonaws.com/ecr-role-arn": ROLE}, {}, ROLE),
        ({"eks.amazonaws.com/role-arn": ROLE}, {}, ROLE),
        (
            {
                "eks.amazonaws.com/ecr-role-arn": ROLE,
                "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/other",
            },
            {},
            ROLE,
        ),
        ({}, {"AWS_ECR_ROLE_ARN": ROLE}, ROLE),
        ({"eks.amazonaws.com/ecr-role-arn": ""}, {"AWS_ECR_ROLE_ARN": ROLE}, ROLE),
    ],
)
def test_service_account_token_assumes_the_annotated_role(
    ecr: tuple[FakeEcr, FakeServer],
    moto_server: str,
    annotations: dict[str, str],
    env: dict[str, str],
    role: str,
    use_bundle: bool,
) -> None:
    fake, server = ecr
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/app"
    run = run_plugin(
        PLUGIN,
        request_bytes(image, token=SA_TOKEN, annotations=annotations),
        env=aws_env(server.url, moto_server, **env),
        use_bundle=use_bundle,
    )
    assert run.response["auth"][image.split("/")[0]]["password"] == fake.password
    (call,) = fake.calls
    assert call.access_key != NODE_KEY and call.session_token
    assert assumed_role_arn(call.access_key) == role
    assert SA_TOKEN not in run.stderr


def test_service_account_token_without_role_uses_node_credentials(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    fake, server = ecr
    run = run_plugin(
        PLUGIN,
        request_bytes("public.ecr.aws/a/b", token=SA_TOKEN),
        args=["-v=1"],
        env=aws_env(server.url, moto_server),
    )
    assert run.code == 0
    assert [c.access_key for c in fake.calls] == [NODE_KEY]
    assert "no role ARN" in run.stderr and "using the node's credentials" in run.stderr


def test_sts_failure_is_an_error_with_the_reason(ecr: tuple[FakeEcr, FakeServer]) -> None:
    fake, server = ecr
    with serve(
        lambda _: sts_error("InvalidIdentityToken", "No OpenIDConnect provider found")
    ) as sts:
        run = run_plugin(
            PLUGIN,
            request_bytes(
                "public.ecr.aws/a/b",
                token=SA_TOKEN,
                annotations={"eks.amazonaws.com/ecr-role-arn": ROLE},
            ),
            env=aws_env(server.url, sts.url),
        )
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines == [
        f"{PLUGIN}: error: STS AssumeRoleWithWebIdentity for {ROLE} (from annotation "
        "eks.amazonaws.com/ecr-role-arn) failed: InvalidIdentityToken: No OpenIDConnect provider "
        "found; check the role's trust policy allows this cluster's OIDC issuer, service account "
        "and token audience"
    ]
    assert fake.calls == []
    assert SA_TOKEN not in run.stderr


def test_malformed_role_arn_is_an_error(ecr: tuple[FakeEcr, FakeServer], moto_server: str) -> None:
    _, server = ecr
    run = run_plugin(
        PLUGIN,
        request_bytes(
            "public.ecr.aws/a/b",
            token=SA_TOKEN,
            annotations={"eks.amazonaws.com/role-arn": "image-puller"},
        ),
        env=aws_env(server.url, moto_server),
    )
    assert run.code == 1
    assert run.error_lines == [
        f"{PLUGIN}: error: cannot assume a role for the service account: annotation "
        "eks.amazonaws.com/role-arn is 'image-puller', which is not an IAM role ARN"
    ]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ({"empty_data": True}, "returned an unusable answer: authorization data was empty"),
        (
            {"omit_token": True},
            "returned an unusable answer: authorization token in response was nil",
        ),
        ({"token_override": "%%%not-base64"}, "authorization token is not valid base64"),
        (
            {"token_override": "QVdTbm9jb2xvbg=="},
            "error parsing username and password from authorization token",
        ),
        (
            {
                "fault": FakeResponse.json(
                    {"__type": "AccessDeniedException", "message": "User is not authorized"},
                    status=400,
                    content_type="application/x-amz-json-1.1",
                )
            },
            "ECR GetAuthorizationToken in us-east-1 failed: AccessDeniedException: User is not "
            "authorized; the identity needs ecr:GetAuthorizationToken",
        ),
    ],
)
def test_error_strings(
    ecr: tuple[FakeEcr, FakeServer],
    moto_server: str,
    setup: dict[str, object],
    message: str,
    route: dict[str, str],
) -> None:
    fake, server = ecr
    for name, value in setup.items():
        setattr(fake, name, value)
    run = run_plugin(
        PLUGIN,
        request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
        env=aws_env(server.url, moto_server, **route),
    )
    assert (run.code, run.stdout) == (1, b"")
    assert len(run.error_lines) == 1
    assert message in run.error_lines[0]
    assert fake.password not in run.stderr


def test_throttling_is_retried_then_reported(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, route: dict[str, str]
) -> None:
    fake, server = ecr
    fake.fault = FakeResponse.json(
        {"__type": "ThrottlingException", "message": "Rate exceeded"},
        status=400,
        content_type="application/x-amz-json-1.1",
    )
    run = run_plugin(
        PLUGIN,
        request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
        env=aws_env(server.url, moto_server, **route),
    )
    assert run.code == 1
    assert len(fake.calls) == 3
    assert "ThrottlingException: Rate exceeded; still throttled after 3 attempts" in run.stderr


def test_no_credentials_is_explained(ecr: tuple[FakeEcr, FakeServer], moto_server: str) -> None:
    _, server = ecr
    env = aws_env(server.url, moto_server)
    del env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
    run = run_plugin(PLUGIN, request_bytes("public.ecr.aws/a/b"), env=env)
    assert run.code == 1
    assert run.error_lines == [
        f"{PLUGIN}: error: no AWS credentials found (checked env, shared profile, web identity, "
        "container credentials, IMDS): attach an instance profile or set AWS_* in the provider's env"
    ]


def test_other_host_uses_the_default_region_and_says_so(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, route: dict[str, str]
) -> None:
    fake, server = ecr
    run = run_plugin(
        PLUGIN,
        request_bytes("mirror.example.com:5000/library/nginx"),
        args=["-v=1"],
        env=aws_env(server.url, moto_server, AWS_REGION="eu-central-1", **route),
    )
    assert run.response["auth"] == {
        "mirror.example.com:5000": {"username": "AWS", "password": fake.password}
    }
    assert [c.region for c in fake.calls] == ["eu-central-1"]
    assert "mirror.example.com is not an ECR host" in run.stderr
    assert "getting an ECR token (the host is not an ECR host) for mirror.example.com" in run.stderr


@pytest.mark.parametrize("valid_seconds", [43200, None])
def test_the_log_states_cache_duration_as_the_response_does(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, valid_seconds: int | None
) -> None:
    """-v=1's answering line and the response give cacheDuration in the same (Go) form, with why."""
    fake, server = ecr
    fake.valid_seconds = valid_seconds
    run = run_plugin(
        PLUGIN,
        request_bytes("public.ecr.aws/a/b"),
        args=["-v=1"],
        env=aws_env(server.url, moto_server),
    )
    if valid_seconds is None:
        assert (
            "cacheDuration=unset (the config's defaultCacheDuration: the provider knows no expiry) "
            in run.stderr
        )
    else:
        assert run.response["cacheDuration"] in ("6h0m0s", "5h59m59s", "5h59m58s")
        said = f"cacheDuration={run.response['cacheDuration']} (half the credential's remaining "
        assert re.search(re.escape(said) + r"(11h59m5\ds|12h0m0s)\) ", run.stderr), run.stderr


def test_other_host_without_a_region_is_an_error(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    _, server = ecr
    run = run_plugin(PLUGIN, request_bytes("quay.io/org/app"), env=aws_env(server.url, moto_server))
    assert run.code == 1
    assert "quay.io is not an ECR registry host" in run.stderr
    assert "set AWS_REGION in the provider's env" in run.stderr


def test_unreachable_endpoint_fails_before_the_deadline(
    moto_server: str, route: dict[str, str]
) -> None:
    run = run_plugin(
        PLUGIN,
        request_bytes("public.ecr.aws/a/b"),
        args=["--deadline=20s"],
        env=aws_env("http://127.0.0.1:9", moto_server, **route),
    )
    assert run.code == 1
    assert run.seconds < 20
    assert "could not reach the ECR Public API in us-east-1" in run.stderr


@pytest.mark.parametrize("args", [["get-credentials"], ["get-credentials", "--v=3"], []])
def test_upstream_argument_forms_are_accepted(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, args: list[str]
) -> None:
    _, server = ecr
    run = run_plugin(
        PLUGIN, request_bytes("public.ecr.aws/a/b"), args=args, env=aws_env(server.url, moto_server)
    )
    assert run.code == 0


def test_cache_duration_parses_as_go_duration(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    _, server = ecr
    run = run_plugin(
        PLUGIN, request_bytes("public.ecr.aws/a/b"), env=aws_env(server.url, moto_server)
    )
    assert 21590 * SECOND < parse_go_duration(run.response["cacheDuration"]) <= 21600 * SECOND


# --- the stdlib path: when it is taken, the instance role, and what it costs ---------------------


def test_the_common_miss_loads_no_botocore(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, tmp_path: Path
) -> None:
    _, server = ecr
    image = request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a")
    direct = run_listing_imports(PLUGIN, image, env=aws_env(server.url, moto_server))
    assert direct.response["auth"]
    assert "botocore" not in direct.roots
    config = tmp_path / "config"
    config.write_text("[default]\n")
    via_sdk = run_listing_imports(
        PLUGIN, image, env=aws_env(server.url, moto_server, AWS_CONFIG_FILE=str(config))
    )
    assert via_sdk.response["auth"] == direct.response["auth"]
    assert "botocore" in via_sdk.roots


def test_the_route_is_said_at_v1(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, tmp_path: Path
) -> None:
    _, server = ecr
    image = request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a")
    run = run_plugin(PLUGIN, image, args=["-v=1"], env=aws_env(server.url, moto_server))
    assert "credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the environment" in (
        run.stderr
    )
    assert "(stdlib)" in run.stderr
    assert "using botocore" not in run.stderr
    run = run_plugin(
        PLUGIN,
        image,
        args=["-v=1"],
        env=aws_env(server.url, moto_server, AWS_PROFILE="ci", AWS_CONFIG_FILE="/nonexistent"),
    )
    assert "using botocore: AWS_PROFILE is set" in run.stderr


def test_v4_names_the_endpoint_called(ecr: tuple[FakeEcr, FakeServer], moto_server: str) -> None:
    _, server = ecr
    image = request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a")
    quiet = run_plugin(PLUGIN, image, args=["-v=1"], env=aws_env(server.url, moto_server))
    loud = run_plugin(PLUGIN, image, args=["-v=4"], env=aws_env(server.url, moto_server))
    line = (
        f"POST {server.url}/ (AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken, "
        "region us-east-1)"
    )
    assert line in loud.stderr and line not in quiet.stderr


ROLE_KEY = "ASIAROLE00000000000"
ROLE_SECRET = "role-secret-access-key-0123456789"
ROLE_SESSION = "role-session-token-" + "x" * 40


class FakeImds:
    """IMDSv2: a session token from PUT, then the role name and its credentials with it."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []

    def __call__(self, request: FakeRequest) -> FakeResponse:
        self.requests.append(
            (
                request.method,
                request.path,
                request.header("x-aws-ec2-metadata-token-ttl-seconds")
                or request.header("x-aws-ec2-metadata-token"),
            )
        )
        if request.method == "PUT" and request.path == "/latest/api/token":
            return FakeResponse.text("imds-session-token")
        if request.header("x-aws-ec2-metadata-token") != "imds-session-token":
            return FakeResponse.text("Unauthorized", 401)
        if request.path == "/latest/meta-data/iam/security-credentials/":
            return FakeResponse.text("node-role")
        if request.path == "/latest/meta-data/iam/security-credentials/node-role":
            return FakeResponse.json(
                {
                    "Code": "Success",
                    "Type": "AWS-HMAC",
                    "AccessKeyId": ROLE_KEY,
                    "SecretAccessKey": ROLE_SECRET,
                    "Token": ROLE_SESSION,
                    "Expiration": "2099-01-01T00:00:00Z",
                }
            )
        return FakeResponse.text("Not Found", 404)


def test_the_instance_role_is_read_through_imdsv2(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    fake, server = ecr
    fake.secret_keys[ROLE_KEY] = ROLE_SECRET
    imds = FakeImds()
    with serve(imds) as metadata:
        env = aws_env(
            server.url,
            moto_server,
            AWS_EC2_METADATA_DISABLED="false",
            AWS_EC2_METADATA_SERVICE_ENDPOINT=metadata.url,
        )
        del env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
        image = request_bytes("123456789012.dkr.ecr.eu-west-1.amazonaws.com/a")
        run = run_plugin(PLUGIN, image, args=["-v=9"], env=env)
        listed = run_listing_imports(PLUGIN, image, env=env)
    assert run.response["auth"]["123456789012.dkr.ecr.eu-west-1.amazonaws.com"]["username"] == "AWS"
    assert "credentials: the instance role node-role, from IMDSv2" in run.stderr
    assert imds.requests[:3] == [
        ("PUT", "/latest/api/token", "21600"),
        ("GET", "/latest/meta-data/iam/security-credentials/", "imds-session-token"),
        ("GET", "/latest/meta-data/iam/security-credentials/node-role", "imds-session-token"),
    ]
    assert [(c.access_key, c.session_token, c.signature_valid) for c in fake.calls[:1]] == [
        (ROLE_KEY, ROLE_SESSION, True)
    ]
    for secret in (ROLE_SECRET, ROLE_SESSION, "imds-session-token", fake.password):
        assert secret not in run.stderr
    assert "botocore" not in listed.roots


@pytest.mark.parametrize(
    ("certificate_for", "works"),
    [("api.ecr.us-east-1.amazonaws.com", True), ("api.ecr.us-east-2.amazonaws.com", False)],
)
def test_the_stdlib_path_speaks_verified_https_to_the_computed_endpoint(
    test_ca: CertAuthority, certificate_for: str, works: bool
) -> None:
    """No endpoint override: the plugin computes https://api.ecr.us-east-1.amazonaws.com/ itself;
    the test resolver sends that name to a loopback fake whose certificate the test CA signed."""
    fake = FakeEcr(secret_keys={NODE_KEY: NODE_SECRET})
    with serve(fake, tls=test_ca.server_context(certificate_for)) as server:
        env = {
            "AWS_ACCESS_KEY_ID": NODE_KEY,
            "AWS_SECRET_ACCESS_KEY": NODE_SECRET,
            "AWS_CA_BUNDLE": str(test_ca.bundle),
            "CREDPROVIDER_TEST_RESOLVE": f"api.ecr.us-east-1.amazonaws.com=127.0.0.1:{server.port}",
        }
        run = run_plugin(
            PLUGIN,
            request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
            args=["--deadline=20s"],
            env=env,
        )
    if works:
        assert run.response["auth"]
        assert [(c.region, c.signature_valid) for c in fake.calls] == [("us-east-1", True)]
    else:
        assert run.code == 1
        assert fake.calls == []
        assert "could not reach the ECR API in us-east-1" in run.stderr
        assert "CERTIFICATE_VERIFY_FAILED" in run.stderr


def test_a_bare_registry_host_asks_for_the_repository(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    """The kubelet matched the image by its host; answering for docker.io (what the reference would
    mean to Docker) would be wrong, and so would the region advice that followed."""
    fake, server = ecr
    host = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
    run = run_plugin(PLUGIN, request_bytes(host), env=aws_env(server.url, moto_server))
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines == [
        f'{PLUGIN}: error: the image "{host}" names only a registry host, no repository: did you '
        f"mean {host}/<repository>? (fix the pod's image)"
    ]
    assert fake.calls == []

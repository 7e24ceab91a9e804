"""The stdlib path: when it is taken, the instance role through IMDSv2, verified HTTPS, and what
it costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulators.aws import FakeEcr, ecr_env
from emulators.http import FakeRequest, FakeResponse, FakeServer, serve
from emulators.kubelet_exec import request_bytes, run_plugin
from emulators.tls import CertAuthority
from tests.helpers import run_listing_imports
from tests.integration.aws.common import (
    NODE_KEY,
    NODE_SECRET,
    PLUGIN,
)


def test_the_common_miss_loads_no_botocore(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, tmp_path: Path
) -> None:
    _, server = ecr
    image = request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a")
    direct = run_listing_imports(PLUGIN, image, env=ecr_env(server.url, moto_server))
    assert direct.response["auth"]
    assert "botocore" not in direct.roots
    config = tmp_path / "config"
    config.write_text("[default]\n")
    via_sdk = run_listing_imports(
        PLUGIN, image, env=ecr_env(server.url, moto_server, AWS_CONFIG_FILE=str(config))
    )
    assert via_sdk.response["auth"] == direct.response["auth"]
    assert "botocore" in via_sdk.roots


def test_the_route_is_said_at_v1(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, tmp_path: Path
) -> None:
    _, server = ecr
    image = request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a")
    run = run_plugin(PLUGIN, image, args=["-v=1"], env=ecr_env(server.url, moto_server))
    assert "credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from the environment" in (
        run.stderr
    )
    assert "(stdlib)" in run.stderr
    assert "using botocore" not in run.stderr
    run = run_plugin(
        PLUGIN,
        image,
        args=["-v=1"],
        env=ecr_env(server.url, moto_server, AWS_PROFILE="ci", AWS_CONFIG_FILE="/nonexistent"),
    )
    assert "using botocore: AWS_PROFILE is set" in run.stderr


def test_v4_names_the_endpoint_called(ecr: tuple[FakeEcr, FakeServer], moto_server: str) -> None:
    _, server = ecr
    image = request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a")
    quiet = run_plugin(PLUGIN, image, args=["-v=1"], env=ecr_env(server.url, moto_server))
    loud = run_plugin(PLUGIN, image, args=["-v=4"], env=ecr_env(server.url, moto_server))
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
        env = ecr_env(
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

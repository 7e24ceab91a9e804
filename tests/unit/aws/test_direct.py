"""The stdlib ECR path's decisions: when it applies, which endpoint, how answers are read.

The endpoint and partition facts are checked against botocore's own data and resolver for every
region botocore knows, so a new partition or an endpoint rule change shows up here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import botocore
import botocore.session
import pytest

from credprovider.aws.direct import (
    IMDS_DEFAULT,
    PARTITIONS,
    AnswerError,
    DirectRoute,
    endpoint_for,
    parse_error,
    parse_role_credentials,
    parse_token_answer,
    plan,
)
from credprovider.aws.sigv4 import AccessKeys
from credprovider.runtime.answer import BadAnswer

PARTITIONS_JSON = json.loads(
    (Path(botocore.__file__).parent / "data" / "partitions.json").read_text()
)
BOTOCORE_REGIONS = sorted(
    region for partition in PARTITIONS_JSON["partitions"] for region in partition["regions"]
)
KEYS = {"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret"}
NO_FILES: dict[str, str] = {"HOME": "/home/none"}


def test_partitions_are_botocores() -> None:
    ours = {(pid, f"^{pattern}$", suffix) for pid, pattern, suffix in PARTITIONS}
    theirs = {
        (p["id"], p["regionRegex"], p["outputs"]["dnsSuffix"])
        for p in PARTITIONS_JSON["partitions"]
    }
    assert ours == theirs


@pytest.fixture(scope="module")
def session() -> botocore.session.Session:
    return botocore.session.get_session()


@pytest.mark.parametrize("service", ["ecr", "ecr-public"])
def test_endpoint_is_the_one_botocore_resolves_in_every_region(
    service: str, session: botocore.session.Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real regions (those their partition's regex matches) resolve exactly as botocore does;
    pseudo-regions such as aws-global resolve to nothing here and so go through botocore."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_ECR", "AWS_ENDPOINT_URL_ECR_PUBLIC"):
        monkeypatch.delenv(name, raising=False)
    pseudo = set()
    for partition in PARTITIONS_JSON["partitions"]:
        pseudo |= {r for r in partition["regions"] if not re.match(partition["regionRegex"], r)}
    assert {"aws-global", "aws-cn-global"} <= pseudo
    for region in [*BOTOCORE_REGIONS, "us-west-9", "ap-future-7"]:
        if region in pseudo:
            assert endpoint_for(service, region) is None, region
            continue
        client = session.create_client(
            service, region_name=region, aws_access_key_id="a", aws_secret_access_key="b"
        )
        assert endpoint_for(service, region) == client.meta.endpoint_url + "/", region


@pytest.mark.parametrize("region", ["", "local", "us-east-1.evil.com", "US-EAST-1", "x" * 70])
def test_a_region_of_no_known_partition_has_no_endpoint(region: str) -> None:
    assert endpoint_for("ecr", region) is None


def _plan(environ: dict[str, str], files: tuple[str, ...] = ()) -> DirectRoute | str:
    return plan({**NO_FILES, **environ}, "ecr", "us-east-1", lambda path: path in files)


def test_env_keys_are_used_directly() -> None:
    route = _plan({**KEYS, "AWS_SESSION_TOKEN": "tok"})
    assert route == DirectRoute(
        "ecr",
        "us-east-1",
        "https://api.ecr.us-east-1.amazonaws.com/",
        AccessKeys("AKID", "secret", "tok"),
        "",
    )
    route = _plan({**KEYS, "AWS_CA_BUNDLE": "/etc/pki/ca.pem"})
    assert isinstance(route, DirectRoute)
    assert route.ca_bundle == "/etc/pki/ca.pem"


def test_without_keys_the_instance_role_is_read_from_imds() -> None:
    assert _plan({}) == DirectRoute(
        "ecr", "us-east-1", "https://api.ecr.us-east-1.amazonaws.com/", None, IMDS_DEFAULT
    )
    route = _plan({"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9"})
    assert isinstance(route, DirectRoute)
    assert route.imds == "http://127.0.0.1:9/"


@pytest.mark.parametrize(
    ("environ", "endpoint"),
    [
        ({"AWS_ENDPOINT_URL_ECR": "http://127.0.0.1:5000"}, "http://127.0.0.1:5000/"),
        ({"AWS_ENDPOINT_URL": "https://vpce.example/"}, "https://vpce.example/"),
        (
            {"AWS_ENDPOINT_URL": "https://global/", "AWS_ENDPOINT_URL_ECR": "https://ecr/"},
            "https://ecr/",
        ),
        (
            {"AWS_ENDPOINT_URL_ECR_PUBLIC": "https://public/"},
            "https://api.ecr.us-east-1.amazonaws.com/",
        ),
    ],
)
def test_endpoint_overrides_as_botocore_reads_them(environ: dict[str, str], endpoint: str) -> None:
    route = _plan({**KEYS, **environ})
    assert isinstance(route, DirectRoute)
    assert route.endpoint == endpoint


@pytest.mark.parametrize(
    ("environ", "files", "reason"),
    [
        ({"AWS_PROFILE": "ci"}, (), "AWS_PROFILE is set"),
        ({"AWS_WEB_IDENTITY_TOKEN_FILE": "/t"}, (), "AWS_WEB_IDENTITY_TOKEN_FILE is set"),
        ({"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://x"}, (), "CREDENTIALS_FULL_URI is set"),
        ({"AWS_USE_FIPS_ENDPOINT": "true"}, (), "AWS_USE_FIPS_ENDPOINT is set"),
        ({"AWS_USE_DUALSTACK_ENDPOINT": "true"}, (), "AWS_USE_DUALSTACK_ENDPOINT is set"),
        ({"HTTPS_PROXY": "http://proxy:3128"}, (), "HTTPS_PROXY is set"),
        ({"https_proxy": "http://proxy:3128"}, (), "https_proxy is set"),
        ({}, ("/home/none/.aws/config",), "the profile file /home/none/.aws/config exists"),
        ({"AWS_SHARED_CREDENTIALS_FILE": "/c"}, ("/c",), "the profile file /c exists"),
        ({"AWS_ACCESS_KEY_ID": "AKID"}, (), "only one of AWS_ACCESS_KEY_ID"),
        ({"AWS_EC2_METADATA_DISABLED": "TRUE"}, (), "AWS_EC2_METADATA_DISABLED is true"),
    ],
)
def test_everything_else_goes_through_botocore(
    environ: dict[str, str], files: tuple[str, ...], reason: str
) -> None:
    route = _plan(environ, files)
    assert isinstance(route, str)
    assert reason in route


def test_an_unknown_partition_goes_through_botocore() -> None:
    assert plan({**NO_FILES, **KEYS}, "ecr", "local", lambda _: False) == (
        "no known partition for the region 'local'"
    )


@pytest.mark.parametrize(
    ("status", "body", "code", "message"),
    [
        (400, b'{"__type":"AccessDeniedException","message":"no"}', "AccessDeniedException", "no"),
        (
            400,
            b'{"__type":"com.amazonaws.ecr#ThrottlingException","Message":"slow"}',
            "ThrottlingException",
            "slow",
        ),
        (503, b"Service Unavailable", "503", "Service Unavailable"),
        (502, b"<html>Bad Gateway</html>", "502", "Bad Gateway"),
        (500, b'{"__type": 5}', "500", "Internal Server Error"),
    ],
)
def test_error_answers_read_as_botocore_reads_them(
    status: int, body: bytes, code: str, message: str
) -> None:
    error = parse_error(status, body)
    assert (error.code, error.message) == (code, message)


def test_token_answers() -> None:
    private = b'{"authorizationData":[{"authorizationToken":"QVdTOnB3","expiresAt":1790000000.5}]}'
    assert parse_token_answer("ecr", private) == ("QVdTOnB3", 1790000000.5)
    public = b'{"authorizationData":{"authorizationToken":"QVdTOnB3","expiresAt":1790000000}}'
    assert parse_token_answer("ecr-public", public) == ("QVdTOnB3", 1790000000.0)
    assert parse_token_answer("ecr", b'{"authorizationData":[{"authorizationToken":"x"}]}') == (
        "x",
        None,
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"authorizationData": [', "not JSON"),
        (b'{"authorizationData": "token"}', "empty"),
        (b'{"authorizationData": []}', "empty"),
        (b'{"authorizationData": [{"authorizationToken": 5}]}', "not a string"),
        (
            b'{"authorizationData": [{"authorizationToken": "x", "expiresAt": 1e300}]}',
            "out of range",
        ),
        (b'{"authorizationData": [{"authorizationToken": "x", "expiresAt": 1e15}]}', "not a time"),
        (b'{"authorizationData": [{"authorizationToken": "x", "expiresAt": NaN}]}', "has NaN"),
        (
            b'{"authorizationData": [{"authorizationToken": "x", "expiresAt": Infinity}]}',
            "has Infinity",
        ),
        (b'{"authorizationData": [{"authorizationToken": "x", "expiresAt": true}]}', "not a time"),
        (
            b'{"authorizationData": [{"authorizationToken": "x", "expiresAt": "soon"}]}',
            "not a time",
        ),
        (b"[" * 100_000, "nested more than 32 levels"),
    ],
)
def test_unusable_token_answers(body: bytes, reason: str) -> None:
    with pytest.raises((AnswerError, BadAnswer), match=reason):
        parse_token_answer("ecr", body)


def test_instance_role_answers() -> None:
    good = {"Code": "Success", "AccessKeyId": "ASIA", "SecretAccessKey": "s", "Token": "t"}
    assert parse_role_credentials(json.dumps(good).encode()) == AccessKeys("ASIA", "s", "t")
    for bad in (
        {**good, "Code": "AssumeRoleUnauthorizedAccess"},
        {**good, "Token": ""},
        {**good, "SecretAccessKey": None},
        ["ASIA"],
    ):
        assert parse_role_credentials(json.dumps(bad).encode()) is None
    assert parse_role_credentials(b"<html>") is None

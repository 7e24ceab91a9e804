"""What the operator reads when ECR cannot be asked or answers badly: one line, the API's own
code and message, and what to do."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from credprovider.runtime.imageref import bare_host_hint
from emulators.aws import FakeEcr, aws_error, ecr_env
from emulators.http import FakeRequest, FakeResponse, FakeServer, serve
from emulators.kubelet_exec import PluginRun, request_bytes, run_plugin
from emulators.ratelimit import TokenBucket
from emulators.tls import CertAuthority
from tests.helpers import require_bundle
from tests.integration.aws.common import (
    PLUGIN,
)


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
            {"fault": aws_error("AccessDeniedException", "User is not authorized")},
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
        env=ecr_env(server.url, moto_server, **route),
    )
    assert (run.code, run.stdout) == (1, b"")
    assert len(run.error_lines) == 1
    assert message in run.error_lines[0]
    assert fake.password not in run.stderr


def test_throttling_is_retried_until_the_deadline_then_reported(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, route: dict[str, str]
) -> None:
    """A throttle is not a failure: the call is retried for the whole deadline (6 s here), not
    three times, and the one line says it ran out of time throttled."""
    fake, server = ecr
    fake.fault = aws_error("ThrottlingException", "Rate exceeded")
    run = run_plugin(
        PLUGIN,
        request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
        ["--deadline=6s", "-v=1"],
        env=ecr_env(server.url, moto_server, **route),
    )
    assert run.code == 1
    assert len(fake.calls) > 3  # botocore makes one attempt a call: the retries are ours
    assert run.error_lines[-1].endswith(
        "ThrottlingException: Rate exceeded; still throttled when the plugin's time ran out, the "
        "kubelet retries on the next pull"
    )
    assert f"throttled {len(fake.calls)} time(s) over " in run.stderr
    assert "and no time is left to wait for the service" in run.stderr


def test_a_throttled_call_is_answered_once_the_service_has_room(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, route: dict[str, str]
) -> None:
    """ECR's rate limit (a token bucket) with no token for the first second: the plugin waits
    and gets its credentials, and says at -v=1 how long it waited."""
    fake, server = ecr
    fake.bucket = TokenBucket.emptied_at_first_call(rate=1.0, burst=1.0)  # by another node's call
    run = run_plugin(
        PLUGIN,
        request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
        ["--deadline=6s", "-v=1"],
        env=ecr_env(server.url, moto_server, **route),
    )
    assert run.code == 0, run.stderr
    assert run.response["auth"]["123456789012.dkr.ecr.us-east-1.amazonaws.com"]
    assert (fake.bucket.served, fake.bucket.throttled) == (1, len(fake.calls) - 1)
    assert fake.bucket.throttled >= 1
    assert (
        f"GetAuthorizationToken: throttled {fake.bucket.throttled} time(s), waited " in run.stderr
    )


def test_no_credentials_is_explained(ecr: tuple[FakeEcr, FakeServer], moto_server: str) -> None:
    _, server = ecr
    env = ecr_env(server.url, moto_server)
    del env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
    run = run_plugin(PLUGIN, request_bytes("public.ecr.aws/a/b"), env=env)
    assert run.code == 1
    assert run.error_lines == [
        f"{PLUGIN}: error: no AWS credentials found (checked env, shared profile, web identity, "
        "container credentials, IMDS): attach an instance profile or set AWS_* in the provider's env "
        "(-v=1 says what IMDS answered)"
    ]


def test_other_host_without_a_region_is_an_error(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    _, server = ecr
    run = run_plugin(PLUGIN, request_bytes("quay.io/org/app"), env=ecr_env(server.url, moto_server))
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
        env=ecr_env("http://127.0.0.1:9", moto_server, **route),
    )
    assert run.code == 1
    assert run.seconds < 20
    assert "could not reach the ECR Public API in us-east-1" in run.stderr


def test_a_bare_registry_host_asks_for_the_repository(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    """The kubelet matched the image by its host; answering for docker.io (what the reference would
    mean to Docker) would be wrong, and so would the region advice that followed."""
    fake, server = ecr
    host = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
    run = run_plugin(PLUGIN, request_bytes(host), env=ecr_env(server.url, moto_server))
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines == [f"{PLUGIN}: error: {bare_host_hint(host)} (fix the pod's image)"]
    assert fake.calls == []


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"AWS_PROFILE": "prod"}, "The config profile (prod) could not be found"),
        # half a key pair
        ({"AWS_SECRET_ACCESS_KEY": ""}, "Partial credentials found in env"),
        # a value botocore refuses: said as a service failing or as an answer not the API's once
        ({"AWS_STS_REGIONAL_ENDPOINTS": "bogus"}, "STS regional endpoints option bogus is invalid"),
        ({"AWS_DEFAULTS_MODE": "bogus"}, "invalid defaults mode: bogus"),
        ({"AWS_ENDPOINT_URL_ECR_PUBLIC": "not a url"}, "cannot use the settings: Invalid endpoint"),
        ({"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
          "AWS_CONTAINER_CREDENTIALS_FULL_URI": "not a url"}, "Can only retrieve metadata from"),
        ({"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
          "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://[::1"}, "settings: Invalid IPv6 URL"),
    ],
)  # fmt: skip
def test_unusable_aws_settings_say_to_fix_them_not_to_retry(
    ecr: tuple[FakeEcr, FakeServer],
    moto_server: str,
    tmp_path: Path,
    settings: dict[str, str],
    said: str,
) -> None:
    """A profile that does not exist (a second provider's env naming one the node lacks) is the
    node's to fix: the line says so, not that the service is failing."""
    _, server = ecr
    (tmp_path / "config").write_text("[default]\nregion = us-east-1\n")
    env = {**ecr_env(server.url, moto_server), "AWS_CONFIG_FILE": str(tmp_path / "config")}
    env.update(settings)
    run = run_plugin(PLUGIN, request_bytes("public.ecr.aws/a/b"), env=env)
    assert run.code == 1 and run.stdout == b""
    (line,) = run.error_lines
    assert line.startswith(
        f"{PLUGIN}: error: ECR Public GetAuthorizationToken in us-east-1 failed: "
    )
    assert said in line
    assert line.endswith(
        "; fix the AWS settings the plugin runs with (AWS_PROFILE, AWS_CONFIG_FILE, "
        "AWS_SHARED_CREDENTIALS_FILE and AWS_* keys in the provider's env, or the node's ~/.aws "
        "files)"
    )
    assert "failing or throttling" not in line and "does not match the API" not in line


@pytest.mark.parametrize("given", ["AWS_CONTAINER_AUTHORIZATION_TOKEN", "a file"])
def test_a_container_token_of_two_lines_is_said_not_blamed_on_the_answer(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, tmp_path: Path, given: str
) -> None:
    """botocore refuses a container authorization token holding a line break with a bare
    ValueError, which read as an answer that "does not match the API": it is the node's
    setting, said as such, before any call."""
    _, server = ecr
    token = "eyJ.token.sig\n"  # as `echo` leaves it
    env = {
        **ecr_env(server.url, moto_server),
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": f"{server.url}/v1/credentials",
    }
    if given == "a file":
        (tmp_path / "token").write_text(token)
        env["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = str(tmp_path / "token")
    else:
        env["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = token
    run = run_plugin(PLUGIN, request_bytes("public.ecr.aws/a/b"), env=env)
    assert run.code == 1 and run.stdout == b""
    (line,) = run.error_lines
    assert "the container authorization token in " in line and "holds a line break" in line
    assert "does not match the API" not in line and "eyJ.token.sig" not in line


@pytest.mark.parametrize("status", [400, 429])
def test_throttling_waits_for_retry_after_whatever_the_body_says(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, route: dict[str, str], status: int
) -> None:
    """ThrottlingException with Retry-After: 3 (a proxy's or a stand-in's; ECR sends none): the
    next call comes no sooner than 3 s later (before: after a fraction of a second, the body's
    code taking the place of the header); within a 6 s deadline that leaves room for one more."""
    fake, server = ecr
    fake.fault = aws_error("ThrottlingException", "Rate exceeded", status)
    fake.fault.headers["Retry-After"] = "3"
    run = run_plugin(
        PLUGIN,
        request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
        ["--deadline=6s", "-v=2"],
        env=ecr_env(server.url, moto_server, **route),
    )
    assert run.code == 1
    gaps = [later.at - earlier.at for earlier, later in pairwise(fake.calls)]
    assert len(fake.calls) == 2 and gaps[0] >= 3.0, (gaps, run.stderr)
    assert "(Retry-After 3s)" in run.stderr


def test_a_retry_after_past_the_deadline_stops_at_once(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, route: dict[str, str]
) -> None:
    """Retry-After: 3600 with a minute's deadline: no retry can honour it, so none is made and
    the one line comes at once (before: 8 or 9 calls in 4.5 s)."""
    fake, server = ecr
    fake.fault = aws_error("ThrottlingException", "Rate exceeded", 429)
    fake.fault.headers["Retry-After"] = "3600"
    run = run_plugin(
        PLUGIN,
        request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
        ["-v=1"],
        env=ecr_env(server.url, moto_server, **route),
    )
    assert (run.code, len(fake.calls)) == (1, 1), run.stderr
    assert "no time is left to wait for the service" in run.stderr
    assert run.error_lines[-1].endswith("kubelet retries on the next pull")


def test_a_web_identity_token_file_read_for_botocore_gets_a_token(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, tmp_path: Path
) -> None:
    """The web identity token file botocore reads is read for it (bounded): the node's role is
    assumed with the file's token at STS, and ECR answers."""
    fake, server = ecr
    (tmp_path / "token").write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJub2RlIn0.c2ln")
    env = {
        **ecr_env(server.url, moto_server),
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/node-puller",
        "AWS_WEB_IDENTITY_TOKEN_FILE": str(tmp_path / "token"),
    }
    run = run_plugin(
        PLUGIN, request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"), env=env
    )
    assert run.code == 0, run.stderr
    assert run.response["auth"]["123456789012.dkr.ecr.us-east-1.amazonaws.com"]["password"] == (
        fake.password
    )
    (call,) = fake.calls  # signed with the role STS gave for the token: temporary keys
    assert call.session_token and call.access_key != ecr_env(server.url)["AWS_ACCESS_KEY_ID"]


def test_a_container_token_file_read_for_botocore_is_the_authorization_it_sends(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, tmp_path: Path
) -> None:
    """The container credentials' token file botocore reads is read for it (bounded): its text is
    the Authorization header of the credentials call, and ECR is signed with what came back."""
    fake, server = ecr
    token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJwb2QifQ.c2ln"
    (tmp_path / "token").write_text(token)
    seen: list[str] = []

    def credentials(request: FakeRequest) -> FakeResponse:
        seen.append(request.header("authorization"))
        return FakeResponse.json({
            "AccessKeyId": "ASIACONTAINER0000001", "SecretAccessKey": "container-secret",
            "Token": "container-session", "Expiration": "2099-01-01T00:00:00Z",
        })  # fmt: skip

    with serve(credentials) as agent:
        env = {
            **ecr_env(server.url, moto_server),
            "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": "",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": f"{agent.url}/v1/credentials",
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(tmp_path / "token"),
        }
        run = run_plugin(PLUGIN, request_bytes("public.ecr.aws/a/b"), env=env)
    assert run.code == 0, run.stderr
    assert seen == [token]
    (call,) = fake.calls
    assert (call.access_key, call.session_token) == ("ASIACONTAINER0000001", "container-session")


def _role_chain(
    server: FakeServer, sts: str, tmp_path: Path, source: str, use_bundle: bool = False
) -> PluginRun:
    """ECR through a profile whose role is assumed from the source profile ``source`` (its
    settings' lines), STS at ``sts``: botocore resolves the chain inside ECR's call."""
    (tmp_path / "config").write_text(
        "[profile puller]\nrole_arn = arn:aws:iam::123456789012:role/puller\n"
        f"source_profile = node\n[profile node]\n{source}"
    )
    env = {
        **ecr_env(server.url, sts),
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_PROFILE": "puller",
    }
    return run_plugin(
        PLUGIN,
        request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
        ["--deadline=20s"],
        env=env,
        use_bundle=use_bundle,
    )


def test_a_role_chain_from_a_web_identity_source_profile_gets_a_token(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, tmp_path: Path
) -> None:
    """A profile whose role is assumed from a source profile's web identity token file (the
    file read for botocore as it resolves the chain): both roles are assumed at STS, and ECR is
    signed with the second's keys."""
    fake, server = ecr
    (tmp_path / "token").write_text("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJub2RlIn0.c2ln")
    run = _role_chain(
        server, moto_server, tmp_path,
        "role_arn = arn:aws:iam::123456789012:role/node\n"
        f"web_identity_token_file = {tmp_path / 'token'}\n",
    )  # fmt: skip
    assert run.code == 0, run.stderr
    (call,) = fake.calls
    assert call.session_token and call.access_key != ecr_env(server.url)["AWS_ACCESS_KEY_ID"]


def test_a_role_chains_sts_it_cannot_reach_is_said_as_that(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, use_bundle: bool
) -> None:
    """The profile's role is assumed at STS as botocore resolves the chain, inside ECR's call:
    an STS that cannot be reached was said as "could not reach the ECR API". The line names
    the URL not reached and what to check; ECR is never called."""
    fake, server = ecr
    run = _role_chain(
        server, "http://127.0.0.1:9", tmp_path,
        "aws_access_key_id = AKIANODE000000000001\n"
        "aws_secret_access_key = node-secret-0123456789abcdefghijklmnopq\n",
        use_bundle=use_bundle,
    )  # fmt: skip
    assert (run.code, run.stdout) == (1, b""), run.stderr
    [line] = run.error_lines
    assert "could not reach the ECR API" not in line, line
    assert (
        "ECR GetAuthorizationToken in us-east-1 failed: the credentials the AWS settings lead to "
        "could not be fetched from http://127.0.0.1:9" in line
    ), line
    assert "check that 127.0.0.1:9 is reachable from this node" in line, line
    assert fake.calls == [] and "node-secret" not in run.stderr


def _model_where_botocore_looked(tmp_path: Path, how: str) -> None:
    """ECR's API model where botocore's default loader looked first: ``~/.aws/models`` or
    ``AWS_DATA_PATH``."""
    import gzip

    top = tmp_path / ("home/.aws/models" if how == "2 GiB in ~/.aws/models" else "data")
    version = top / "ecr" / "2015-09-21"
    version.mkdir(parents=True)
    if how == "2 GiB in ~/.aws/models":
        with (version / "service-2.json").open("wb") as model:
            model.truncate(2 << 30)
    elif how == "not JSON in AWS_DATA_PATH":
        (version / "service-2.json").write_text("{")
    else:  # 200 MiB once inflated
        (version / "service-2.json.gz").write_bytes(gzip.compress(b" " * (200 << 20)))


@pytest.mark.parametrize(
    "how", ["2 GiB in ~/.aws/models", "not JSON in AWS_DATA_PATH", "gzipped in AWS_DATA_PATH"]
)
def test_botocore_uses_only_the_models_it_ships(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, how: str, use_bundle: bool
) -> None:
    """Before: a model found there was read whole (a ``MemoryError`` under 1 GiB of address
    space), inflated without a bound, or used to call ECR (a broken one blamed on HTTPS_PROXY)."""
    fake, server = ecr
    _model_where_botocore_looked(tmp_path, how)
    (tmp_path / "config").write_text(
        "[profile node]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = s\n"
    )
    env = {
        **ecr_env(server.url),
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_CONFIG_FILE": str(tmp_path / "config"),  # a profile file: botocore's route
        "AWS_PROFILE": "node",
        "HOME": str(tmp_path / "home"),
        "AWS_DATA_PATH": str(tmp_path / "data"),
    }
    run = run_plugin(
        PLUGIN,
        request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
        [],
        env=env,
        address_space=1 << 30,
        use_bundle=use_bundle,
    )
    assert run.code == 0, run.stderr
    assert [call.access_key for call in fake.calls] == ["AKIAEXAMPLE"]


def test_botocore_in_the_bundle_trusts_certifis_bundle(
    test_ca: CertAuthority, tmp_path: Path
) -> None:
    """The bundle leaves out botocore's own CA file (build.spec): botocore reads it only without
    certifi. Through botocore's route (a profile), an endpoint the test CA signed is refused as
    unverified (certifi's trust, not a missing file), and trusted with AWS_CA_BUNDLE."""
    require_bundle()
    (tmp_path / "config").write_text(
        "[profile node]\naws_access_key_id = AKIAEXAMPLE\naws_secret_access_key = s\n"
    )
    fake = FakeEcr()
    with serve(fake, tls=test_ca.server_context("api.ecr.us-east-1.amazonaws.com")) as server:
        env: dict[str, str | None] = {
            "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": "",
            "AWS_CONFIG_FILE": str(tmp_path / "config"),
            "AWS_PROFILE": "node",
            "CREDPROVIDER_TEST_RESOLVE": f"api.ecr.us-east-1.amazonaws.com=127.0.0.1:{server.port}",
        }
        runs = [
            run_plugin(
                PLUGIN,
                request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
                ["--deadline=20s"],
                {**env, **extra},
                use_bundle=True,
            )
            for extra in ({}, {"AWS_CA_BUNDLE": str(test_ca.bundle)})
        ]
    unverified, trusted = runs
    assert unverified.code == 1 and "CERTIFICATE_VERIFY_FAILED" in unverified.stderr, (
        unverified.stderr
    )
    assert "CA certificate bundle" not in unverified.stderr
    assert trusted.code == 0, trusted.stderr
    assert [call.access_key for call in fake.calls] == ["AKIAEXAMPLE"]

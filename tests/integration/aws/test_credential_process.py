"""A profile's ``credential_process``: run under the deadline and caps (credprovider/aws/process.py),
every fault of the helper one line about the helper, never the service's, an internal error, or a
process left on the node."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest

from emulators.aws import FakeEcr, ecr_env
from emulators.http import FakeServer
from emulators.kubelet_exec import PluginRun, request_bytes, run_plugin
from tests.helpers import stop_what_is_left
from tests.integration.aws.common import PLUGIN

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/a"
HELPER_KEY = "ASIAHELPER0000000001"
HELPER_SECRET = "helper-secret-0123456789abcdefghijklmn"


def _helper(tmp_path: Path, body: str) -> Path:
    helper = tmp_path / "helper"
    helper.write_text(f"#!/bin/sh\n{body}\n")
    helper.chmod(helper.stat().st_mode | stat.S_IXUSR)
    return helper


def _run(
    ecr: tuple[FakeEcr, FakeServer],
    tmp_path: Path,
    process: str,
    *args: str,
    use_bundle: bool = False,
) -> PluginRun:
    _, server = ecr
    (tmp_path / "config").write_text(f"[profile node]\ncredential_process = {process}\n")
    env = {
        **ecr_env(server.url),
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_PROFILE": "node",
    }
    return run_plugin(PLUGIN, request_bytes(IMAGE), ["-v=2", *args], env=env, use_bundle=use_bundle)


def test_the_helpers_keys_sign_the_call(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, use_bundle: bool
) -> None:
    """The working path: botocore is given the helper's answer, ECR is signed with its keys, and
    its secret is never printed."""
    answer = {
        "Version": 1,
        "AccessKeyId": HELPER_KEY,
        "SecretAccessKey": HELPER_SECRET,
        "SessionToken": "helper-session",
    }
    (tmp_path / "answer.json").write_text(json.dumps(answer))
    helper = _helper(tmp_path, f"cat {tmp_path / 'answer.json'}")
    run = _run(ecr, tmp_path, str(helper), use_bundle=use_bundle)
    assert run.code == 0, run.stderr
    fake, _ = ecr
    (call,) = fake.calls
    assert (call.access_key, call.session_token) == (HELPER_KEY, "helper-session")
    assert HELPER_SECRET not in run.stderr


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("echo 'no keys here' >&2; exit 3", "failed with exit status 3: no keys here"),
        ("exit 4", "failed with exit status 4 (it wrote nothing on stderr)"),
        ("printf '\\377\\376' >&2; exit 1", "failed with exit status 1: "),
        (
            "echo notjson",
            "answered no JSON on stdout",
        ),  # was: "the response does not match the API"
        ("echo '[1]'", "answered JSON that is not an object"),  # was: the same
        ("echo '{\"Version\": 2}'", 'answered no "Version": 1'),
        ("echo '{\"Version\": 1}'", "answered no AccessKeyId and no SecretAccessKey"),
        ("head -c 2000000 /dev/zero", "wrote more than 1024 KiB on stdout: stopped"),
        ("python3 -c 'print(\"[\" * 100000)'", "answered JSON that "),
    ],
)
def test_a_helper_that_gives_no_credentials_is_one_line_about_it(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, body: str, says: str
) -> None:
    run = _run(ecr, tmp_path, str(_helper(tmp_path, body)))
    assert (run.code, run.stdout) == (1, b""), run.stderr
    line = run.error_lines[-1]
    assert f"the profile's credential_process {tmp_path / 'helper'} {says}" in line, line
    assert "fix the profile's credential_process" in line, line
    for wrong in ("internal error", "does not match the API", "service is failing", "Traceback"):
        assert wrong not in run.stderr, run.stderr
    fake, _ = ecr
    assert fake.calls == []


def test_a_helper_that_is_not_there_is_one_line(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path
) -> None:
    """botocore let Popen's FileNotFoundError through: an internal error."""
    run = _run(ecr, tmp_path, str(tmp_path / "missing"))
    assert (run.code, run.stdout) == (1, b"")
    assert (
        f"the profile's credential_process {tmp_path / 'missing'} cannot be run: no such file or "
        "directory" in run.error_lines[-1]
    ), run.stderr


def test_a_hanging_helper_is_stopped_whole_before_the_deadline(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, use_bundle: bool
) -> None:
    """A helper that never answers (and a child of it holding its stdout): stopped, with its
    child, before the deadline, its own line (botocore waited for ever: the deadline's line
    blamed the network, and the helper was left running after the plugin exited)."""
    pids = tmp_path / "pids"
    body = f"sleep 300 & echo $! > {pids}; echo $$ >> {pids}; wait"
    started = time.monotonic()
    try:
        run = _run(
            ecr, tmp_path, str(_helper(tmp_path, body)), "--deadline=4s", use_bundle=use_bundle
        )
        seconds = time.monotonic() - started
    finally:  # whatever the plugin did, the test leaves no process behind
        left, still = stop_what_is_left(pids)
    assert len(left) == 2 and still == [], (left, still)
    assert seconds < 8
    assert (run.code, run.stdout) == (1, b"")
    assert (
        f"the profile's credential_process {tmp_path / 'helper'} did not answer before the "
        "deadline: stopped" in run.error_lines[-1]
    ), run.stderr
    assert "check that the endpoint is reachable" not in run.stderr


SSO_PROFILE = (
    "[profile sso]\nsso_session = corp\nsso_account_id = 123456789012\n"
    "sso_role_name = puller\n[sso-session corp]\n"
    "sso_start_url = https://corp.awsapps.com/start\nsso_region = us-east-1\n"
)
LOGIN_PROFILE = "[profile sso]\nlogin_session = arn:aws:iam::123456789012:user/op\n"


@pytest.mark.parametrize("profile", ["sso_session", "login_session"])
def test_a_profile_that_signs_in_interactively_is_the_settings_to_fix(
    ecr: tuple[FakeEcr, FakeServer], tmp_path: Path, use_bundle: bool, profile: str
) -> None:
    """An IAM Identity Center profile (sso_session) on a node: from source botocore finds no
    token, and the bundle carries no 'sso' client; either was said as "the service is failing
    or throttling; the kubelet retries". A console sign-in profile (login_session, `aws login`):
    botocore's "pip install botocore[crt]", said the same way. Now each is the settings to fix,
    in words."""
    fake, server = ecr
    (tmp_path / "config").write_text(SSO_PROFILE if profile == "sso_session" else LOGIN_PROFILE)
    env = {
        **ecr_env(server.url),
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_PROFILE": "sso",
        "HOME": str(tmp_path),
    }
    run = run_plugin(PLUGIN, request_bytes(IMAGE), env=env, use_bundle=use_bundle)
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    says = (
        "the profile needs the AWS CRT, which the plugin does not carry"
        if profile == "login_session"
        else "the profile needs botocore's 'sso' client, which the plugin does not carry"
        if use_bundle
        else "Error loading SSO Token: Token for corp does not exist"
    )
    assert "pip install" not in line
    assert says in line, line
    assert "fix the AWS settings the plugin runs with" in line, line
    assert "service is failing" not in line
    assert fake.calls == []

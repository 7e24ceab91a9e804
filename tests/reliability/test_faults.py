"""Fault injection for every provider against the loopback emulators.

Each scenario runs the plugin with a short deadline (6 s instead of 50 s) and checks the contract of
:func:`answer_violations` (one response, or exit 1 with one line, nothing partial on stdout, no
traceback, before the deadline) plus the expected outcome (success or failure).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from emulators.aws import AMZ_JSON, aws_error
from emulators.harness import ACR_REGISTRY, Emulator, aws_emulator, azure_emulator, gcp_emulator
from emulators.http import FakeResponse, serve
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.reliability.checks import Figures, Outcome, answer_violations

DEADLINE = 6.0
# docs/clouds.md ("How a plugin runs"): every failure is one line saying what failed and what to
# check. Each failing fault's line must carry a "what to do" part, recognised by one of these phrases.
ADVICE = (
    "check ", "attach ", "give ", "set ", "raise ", "retries on the next pull", "close stdin",
    "grant ", "needs ", "pass ",
)  # fmt: skip


def advice_missing(line: str) -> bool:
    """Whether ``line`` says only what failed (the what-to-do part comes after the first colon)."""
    return not any(phrase in line.partition(": error: ")[2] for phrase in ADVICE)


@dataclass
class Fault:
    name: str
    setup: Callable[[Emulator], dict[str, str] | None]  # mutates the fakes; may return extra env
    succeeds: bool
    message: str = ""  # expected in the error line (failures)
    durations: tuple[
        str, ...
    ] = ()  # acceptable cacheDuration values (successes; timing shifts them)


def _set(fake_name: str, **values: Any) -> Callable[[Emulator], None]:
    def apply(emulator: Emulator) -> None:
        for key, value in values.items():
            setattr(emulator.fakes[fake_name], key, value)

    return apply


def _env(**values: str) -> Callable[[Emulator], dict[str, str]]:
    return lambda _: dict(values)


AWS_FAULTS = [
    Fault(
        "endpoint refused",
        _env(AWS_ENDPOINT_URL_ECR="http://127.0.0.1:9"),
        False,
        "could not reach the ECR API",
    ),
    Fault("black hole", _set("ecr", fault=FakeResponse(hang=True)), False, "us-east-1"),
    Fault(
        "slow below the per-call timeout",
        _set("ecr", delay=1.0),
        True,
        durations=("6h0m0s", "5h59m59s", "5h59m58s"),
    ),
    Fault("slow above the per-call timeout", _set("ecr", delay=20.0), False, "us-east-1"),
    Fault(
        "HTTP 500",
        _set(
            "ecr",
            fault=aws_error("ServerException", "boom", 500),
        ),
        False,
        "ServerException",
    ),
    Fault(
        "HTTP 503", _set("ecr", fault=FakeResponse.text("Service Unavailable", 503)), False, "503"
    ),
    Fault(
        "ThrottlingException",
        _set(
            "ecr",
            fault=aws_error("ThrottlingException", "Rate exceeded"),
        ),
        False,
        "still throttled when the plugin's time ran out",
    ),
    Fault(
        "HTTP 429",
        _set(
            "ecr",
            fault=aws_error("TooManyRequestsException", "slow down", 429),
        ),
        False,
        "TooManyRequestsException",
    ),
    Fault(
        "truncated JSON",
        _set(
            "ecr", fault=FakeResponse(200, b'{"authorizationData": [', {"Content-Type": AMZ_JSON})
        ),
        False,
        "GetAuthorizationToken",
    ),
    Fault(
        "wrong types",
        _set("ecr", fault=FakeResponse.json({"authorizationData": "token"}, content_type=AMZ_JSON)),
        False,
        "unusable answer",
    ),
    Fault(
        "HTML error page",
        _set(
            "ecr",
            fault=FakeResponse(
                502, b"<html><h1>Bad Gateway</h1></html>", {"Content-Type": "text/html"}
            ),
        ),
        False,
        "502",
    ),
    Fault("token already expired", _set("ecr", valid_seconds=-30), True, durations=("0s",)),
    Fault("token expiring in seconds", _set("ecr", valid_seconds=1.5), True, durations=("0s",)),
]


_KEPT: list[Any] = []


@pytest.fixture(autouse=True, scope="module")
def _close_kept_servers() -> Any:
    """The servers a fault keeps alive are closed with this module (their threads would otherwise
    keep pytest from exiting)."""
    yield
    while _KEPT:
        _KEPT.pop().__exit__(None, None, None)


def _imds_v2_refused(emulator: Emulator) -> dict[str, str]:
    """No credentials in env: botocore asks IMDS, whose IMDSv2 token PUT is refused."""
    imds = serve(
        lambda request: (
            FakeResponse.text("Forbidden", 403)
            if request.method == "PUT"
            else FakeResponse.text("Not Found", 404)
        )
    )
    server = imds.__enter__()
    _KEPT.append(imds)  # referenced, or it is collected (and closed) before the plugin asks it
    return {
        "AWS_ACCESS_KEY_ID": "",
        "AWS_SECRET_ACCESS_KEY": "",
        "AWS_EC2_METADATA_DISABLED": "false",
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": server.url,
    }


AWS_FAULTS.append(
    Fault("IMDSv2 token PUT refused", _imds_v2_refused, False, "no AWS credentials found")
)

GCP_FAULTS = [
    Fault("metadata refused", _env(GCE_METADATA_HOST="127.0.0.1:9"), False, "GCE metadata server"),
    Fault("black hole", _set("metadata", token_fault=FakeResponse(hang=True)), False, "metadata"),
    Fault(
        "slow below the per-call timeout",
        _set("metadata", token_fault=None),
        True,
        durations=("29m59s", "29m58s"),
    ),
    Fault(
        "HTTP 500",
        _set("metadata", token_fault=FakeResponse.text("boom", 500)),
        False,
        "unavailable",
    ),
    Fault(
        "HTTP 503",
        _set("metadata", token_fault=FakeResponse.text("busy", 503)),
        False,
        "unavailable",
    ),
    Fault(
        "HTTP 429",
        _set("metadata", token_fault=FakeResponse.text("slow down", 429)),
        False,
        "unavailable",
    ),
    Fault(  # an empty body said as one, where the line read "HTTP 404: ; ..."
        "HTTP 404 empty",
        _set("metadata", token_fault=FakeResponse(404, b"", {"Metadata-Flavor": "Google"})),
        False,
        "HTTP 404: an empty answer; ",
    ),
    Fault(
        "truncated JSON",
        _set(
            "metadata",
            token_fault=FakeResponse(
                200,
                b'{"access_token": "ya29',
                {"Content-Type": "application/json", "Metadata-Flavor": "Google"},
            ),
        ),
        False,
        "invalid JSON",
    ),
    Fault(
        "wrong types",
        _set("metadata", token_fault=FakeResponse.json({"access_token": 5, "expires_in": "x"})),
        False,
        "without an access_token",
    ),
    Fault(
        "HTML error page",
        _set("metadata", token_fault=FakeResponse.text("<html>oops</html>")),
        False,
        "without an access_token",
    ),
    Fault(
        "token path 404",
        _set("metadata", token_fault=FakeResponse.text("not found", 404)),
        False,
        "404",
    ),
    Fault("token already expired", _set("metadata", expires_in=0), True, durations=("0s",)),
    Fault(
        "token expiring in seconds", _set("metadata", expires_in=3), True, durations=("1s", "0s")
    ),
]

AZURE_FAULTS = [
    Fault(
        "IMDS refused",
        _env(AZURE_POD_IDENTITY_AUTHORITY_HOST="http://127.0.0.1:9"),
        False,
        "could not get an AAD token",
    ),
    Fault("IMDS black hole", _set("imds", fault=FakeResponse(hang=True)), False, "AAD token"),
    Fault(  # an empty body said as one, where the line read "HTTP 404: ; check that ..."
        "IMDS HTTP 404 empty",
        _set("imds", fault=FakeResponse(404, b"")),
        False,
        "answered HTTP 404: an empty answer; ",
    ),
    Fault(
        "IMDS HTTP 500",
        _set("imds", fault=FakeResponse.text("boom", 500)),
        False,
        "could not get an AAD token",
    ),
    Fault(
        "registry black hole",
        _set("acr", exchange_fault=FakeResponse(hang=True)),
        False,
        "exchange",
    ),
    Fault(
        "exchange slow below the per-call timeout",
        _set("acr", exchange_faults=[FakeResponse.text("busy", 503, delay=1.0)]),
        True,
        durations=("1h29m59s", "1h29m58s", "1h29m57s"),
    ),
    Fault(
        "exchange HTTP 503",
        _set("acr", exchange_fault=FakeResponse.text("busy", 503)),
        False,
        "HTTP 503",
    ),
    Fault(
        "exchange HTTP 429",
        _set("acr", exchange_fault=FakeResponse.text("slow down", 429)),
        False,
        "HTTP 429",
    ),
    Fault(
        "exchange truncated JSON",
        _set(
            "acr",
            exchange_fault=FakeResponse(
                200, b'{"refresh_token": "ey', {"Content-Type": "application/json"}
            ),
        ),
        False,
        "returned no refresh_token",
    ),
    Fault(
        "exchange HTML page",
        _set("acr", exchange_fault=FakeResponse.text("<html>gateway</html>")),
        False,
        "returned no refresh_token",
    ),
    Fault(
        "exchange without refresh token",
        _set("acr", exchange_fault=FakeResponse.json({"access_token": "x"})),
        False,
        "returned no refresh_token",
    ),
    Fault(
        "challenge without Bearer",
        _set("acr", challenge=['Basic realm="x"']),
        False,
        "expected realm: Bearer",
    ),
    Fault(
        "realm on another host",
        _set("acr", challenge=['Bearer realm="https://evil.net/t",service="x"']),
        False,
        "refusing to send an AAD token to another host",
    ),
    Fault("refresh token already expired", _set("acr", valid_seconds=-30), True, durations=("0s",)),
]

AAD_THROTTLED = FakeResponse.json(
    {"error": "temporarily_unavailable", "error_description": "AADSTS50196: throttled"}, status=429
)

EMULATORS = {"aws": aws_emulator, "gcp": gcp_emulator, "azure": azure_emulator}
CASES = (
    [("aws", f) for f in AWS_FAULTS]
    + [("gcp", f) for f in GCP_FAULTS]
    + [("azure", f) for f in AZURE_FAULTS]
)


def _run(cloud: str, emulator: Emulator, extra_env: dict[str, str], args: list[str] | None = None):  # type: ignore[no-untyped-def]
    env = {**emulator.env, **extra_env}
    deadline = [f"--deadline={DEADLINE:g}s"]
    if cloud == "aws":
        return run_plugin(
            "ecr-credential-provider",
            request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
            deadline,
            env,
        )
    if cloud == "gcp":
        return run_plugin(
            "auth-provider-gcp", request_bytes("gcr.io/p/app"), ["get-credentials", *deadline], env
        )
    return run_plugin(
        "acr-credential-provider",
        request_bytes(f"{ACR_REGISTRY}/app"),
        [*(args or [emulator.files["config"]]), *deadline],
        env,
    )


def test_the_advice_check_can_fail() -> None:
    assert advice_missing("p: error: ECR GetAuthorizationToken failed: 500: boom")
    assert not advice_missing("p: error: ECR failed: 500; the kubelet retries on the next pull")


def test_a_metadata_server_that_does_not_resolve_says_what_to_do_off_gce() -> None:
    """Off GCE the metadata server's name does not resolve (here: in a network namespace of its
    own, no DNS at all): the line says so and names GOOGLE_APPLICATION_CREDENTIALS; -v=2 says why
    each attempt failed, not just its exception's type."""
    run = run_plugin(
        "auth-provider-gcp",
        request_bytes("gcr.io/p/app"),
        ["get-credentials", "--deadline=6s", "-v=2"],
        {"GCE_METADATA_HOST": "metadata.credprovider.invalid"},
        own_network=True,
    )
    assert run.code == 1
    (line,) = [line for line in run.error_lines if ": error: " in line]
    assert "gaierror" in line
    assert "the metadata server's name does not resolve: is this node on GCE? Elsewhere, give the " \
        "credentials with GOOGLE_APPLICATION_CREDENTIALS in the provider's env" in line  # fmt: skip
    assert "attempt 1 got HttpError (gaierror: " in run.stderr


def test_an_imds_that_refuses_the_token_is_said_at_v1_with_the_fix() -> None:
    """IMDS refusing the IMDSv2 token PUT (botocore says so only at debug level): -v=1 says it,
    with the fix; the error line points at -v=1."""
    refusing = serve(
        lambda request: (
            FakeResponse.text("Forbidden", 403)
            if request.method == "PUT"
            else FakeResponse.text("Not Found", 404)
        )
    )
    with aws_emulator() as emulator, refusing as imds:
        env = {
            **emulator.env,
            "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": "",
            "AWS_EC2_METADATA_DISABLED": "false",
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": imds.url,
        }
        run = run_plugin(
            "ecr-credential-provider",
            request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
            ["--deadline=6s", "-v=1"],
            env,
        )
        assert [r.method for r in imds.requests][:1] == ["PUT"]
    assert run.code == 1
    assert "IMDS refused the IMDSv2 token (HTTP 403): check that the instance metadata service is " \
        "enabled with an instance profile attached; behind a container, its IMDSv2 hop limit must be " \
        "2 or more" in run.stderr  # fmt: skip
    assert "(-v=1 says what IMDS answered)" in run.error_lines[-1]


@pytest.mark.parametrize(("cloud", "fault"), CASES, ids=[f"{c}-{f.name}" for c, f in CASES])
def test_fault(figures: Figures, cloud: str, fault: Fault) -> None:
    with EMULATORS[cloud]() as emulator:
        extra = fault.setup(emulator) or {}
        run = _run(cloud, emulator, extra)
    problems = answer_violations(run, DEADLINE)
    if fault.succeeds:
        if run.code != 0:
            problems.append(f"expected success, got: {run.stderr[-300:]}")
        elif run.response.get("cacheDuration") not in fault.durations:
            problems.append(
                f"cacheDuration {run.response.get('cacheDuration')}, expected one of {fault.durations}"
            )
    elif run.code != 1 or fault.message not in " ".join(run.error_lines):
        problems.append(
            f"expected a failure mentioning {fault.message!r}, got {run.code}: {run.stderr[-300:]}"
        )
    elif any(advice_missing(line) for line in run.error_lines):
        problems.append(f"no 'what to do' in: {run.error_lines}")
    figures.record(
        Outcome(
            "fault",
            f"{cloud}: {fault.name}",
            run.code,
            run.seconds,
            DEADLINE,
            not problems,
            "; ".join(problems),
        )
    )
    assert not problems


def test_aad_throttling_with_a_service_principal(figures: Figures, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with azure_emulator() as emulator:
        emulator.fakes["aad"].fault = AAD_THROTTLED  # type: ignore[attr-defined]
        config = tmp_path / "sp.json"
        config.write_text(
            '{"tenantId": "t", "aadClientId": "app", "aadClientSecret": "sp-secret-value-123456"}'
        )
        run = _run("azure", emulator, {}, [str(config)])
    problems = answer_violations(run, DEADLINE)
    if run.code != 1 or "AADSTS50196" not in run.stderr:
        problems.append(f"expected the AAD throttling reason, got {run.code}: {run.stderr[-300:]}")
    figures.record(
        Outcome(
            "fault",
            "azure: AAD throttling",
            run.code,
            run.seconds,
            DEADLINE,
            not problems,
            "; ".join(problems),
        )
    )
    assert not problems


def test_the_checks_catch_a_plugin_that_misses_its_deadline(figures: Figures) -> None:
    """The suite can fail: with the deadline effectively disabled (120 s), a black hole is not
    answered in time, and :func:`answer_violations` says so."""
    import subprocess

    with aws_emulator(with_moto=False) as emulator:
        emulator.fakes["ecr"].fault = FakeResponse(hang=True)  # type: ignore[attr-defined]
        try:
            run = run_plugin(
                "ecr-credential-provider",
                request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
                ["--deadline=120s"],
                {**emulator.env},
                timeout=DEADLINE + 6,
            )
        except subprocess.TimeoutExpired:
            missed = True
        else:
            missed = bool(answer_violations(run, DEADLINE))
    assert missed, "a black hole without the deadline should have missed the 6 s budget"


# An ECR image the AWS emulator answers for.
ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/a"


@pytest.mark.skipif(os.geteuid() != 0, reason="a process limit is enforced on users but root")
def test_a_plugin_that_can_start_no_thread_still_answers_within_its_deadline() -> None:
    """A kubelet whose processes are at their limit (ulimit -u, a cgroup's pids.max): the plugin
    could start no worker thread, and printed a traceback ("RuntimeError: can't start new
    thread"). It does the work on its own thread then, the deadline an alarm: an answer, or one
    line at the deadline from a server that never answers."""
    limited = ["prlimit", "--nproc=1"]
    with aws_emulator(with_moto=False) as emulator:
        run = run_plugin("ecr-credential-provider", request_bytes(ECR_IMAGE), env=emulator.env,
                         use_bundle=True, as_nobody=True, wrapper=limited)  # fmt: skip
    assert answer_violations(run, DEADLINE) == [] and run.code == 0, run.stderr
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        env = {
            **emulator.env,
            "AWS_ENDPOINT_URL_ECR": f"http://127.0.0.1:{silent.getsockname()[1]}",
        }
        run = run_plugin("ecr-credential-provider", request_bytes(ECR_IMAGE), ["--deadline=3s"],
                         env=env, use_bundle=True, as_nobody=True, wrapper=limited)  # fmt: skip
    assert answer_violations(run, 3.0) == [] and run.code == 1, run.stderr
    assert "no answer within the 3s deadline" in run.error_lines[0]


@pytest.mark.parametrize("mib", [24, 32, 48])
def test_a_plugin_short_of_memory_says_so_in_one_line(mib: int) -> None:
    """Under a memory limit too tight for its SDK (ulimit -v, a cgroup's memory.max), a plugin
    printed "MemoryError" tracebacks, the last one from the check meant to explain the failure
    (it read its 4 MiB manifest in one piece). An answer, or one line saying memory ran out."""
    with aws_emulator(with_moto=False) as emulator:
        run = run_plugin("ecr-credential-provider", request_bytes(ECR_IMAGE), env=emulator.env,
                         use_bundle=True, address_space=mib << 20)  # fmt: skip
    assert answer_violations(run, DEADLINE) == [], run.stderr
    if run.code:
        assert "out of memory" in run.error_lines[0], run.stderr

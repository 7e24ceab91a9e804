"""A Workload Identity Federation config whose subject token comes from an executable
(``credential_source.executable``, with GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES=1): google-auth's
protocol, its helper run under the plugin's bounds (credprovider/runtime/child.py) instead of
``subprocess.run``: stopped before the deadline with whatever it started, its output capped, its
``output_file`` read as a node file, each fault one line about the helper."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from emulators.gcp import FakeSts
from emulators.http import FakeServer
from emulators.kubelet_exec import PluginRun
from emulators.tls import CertAuthority
from tests.helpers import require_bundle, stop_what_is_left
from tests.integration.gcp.common import KSA_TOKEN
from tests.integration.gcp.test_identities import WIF_AUDIENCE, run_with_wif_file

ALLOW = {"GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES": "1"}
JWT = "urn:ietf:params:oauth:token-type:jwt"


def _answer(**extra: object) -> str:
    answer = {"version": 1, "success": True, "token_type": JWT, "id_token": KSA_TOKEN}
    return json.dumps({**answer, "expiration_time": int(time.time()) + 3600, **extra})


def _run(
    tmp_path: Path,
    sts: tuple[FakeSts, FakeServer],
    test_ca: CertAuthority,
    body: str,
    *args: str,
    output_file: Path | None = None,
    timeout_millis: int = 30000,
    env: dict[str, str] = ALLOW,
    use_bundle: bool = False,
) -> PluginRun:
    helper = tmp_path / "helper"
    helper.write_text(f"#!/bin/sh\n{body}\n")
    helper.chmod(helper.stat().st_mode | stat.S_IXUSR)
    executable: dict[str, object] = {
        "command": f"{helper} --flag",
        "timeout_millis": timeout_millis,
    }
    if output_file is not None:
        executable["output_file"] = str(output_file)
    _, server = sts
    source = {"executable": executable}
    return run_with_wif_file(tmp_path, server, test_ca, source, *args, use_bundle=use_bundle, **env)


def test_the_helpers_token_is_exchanged(
    tmp_path: Path, sts: tuple[FakeSts, FakeServer], test_ca: CertAuthority, use_bundle: bool
) -> None:
    """The working path: the helper is given google-auth's variables (the audience, the token
    type, never interactive) and its token is what STS is asked to exchange."""
    seen = tmp_path / "seen"
    (tmp_path / "answer.json").write_text(_answer())
    body = (
        f'echo "$GOOGLE_EXTERNAL_ACCOUNT_AUDIENCE $GOOGLE_EXTERNAL_ACCOUNT_TOKEN_TYPE '
        f'$GOOGLE_EXTERNAL_ACCOUNT_INTERACTIVE $1" > {seen}; cat {tmp_path / "answer.json"}'
    )
    run = _run(tmp_path, sts, test_ca, body, use_bundle=use_bundle)
    assert run.code == 0, run.stderr
    fake_sts, _ = sts
    assert run.response["auth"]["gcr.io"]["password"] == fake_sts.access_token
    assert fake_sts.forms[-1]["subject_token"] == KSA_TOKEN
    assert seen.read_text().split() == [WIF_AUDIENCE, JWT, "0", "--flag"]


def test_an_unexpired_output_file_is_used_and_a_fifo_there_is_passed_over(
    tmp_path: Path, sts: tuple[FakeSts, FakeServer], test_ca: CertAuthority
) -> None:
    """google-auth's cache: a valid answer in output_file spares the run; a FIFO in its place is
    never waited on (google-auth opened it and blocked until the kubelet's kill)."""
    cache = tmp_path / "cache.json"
    cache.write_text(_answer())
    run = _run(tmp_path, sts, test_ca, "exit 9", output_file=cache)
    assert run.code == 0, run.stderr
    cache.unlink()
    os.mkfifo(cache)
    (tmp_path / "answer.json").write_text(_answer())
    run = _run(tmp_path, sts, test_ca, f"cat {tmp_path / 'answer.json'}", output_file=cache)
    assert run.code == 0, run.stderr
    assert run.seconds < 10


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("echo 'cannot reach the IdP' >&2; exit 3", "exited with status 3: cannot reach the IdP"),
        ("echo notjson", "answered no JSON"),
        ("echo '[1]'", "answered no JSON object"),
        ("head -c 2000000 /dev/zero", "wrote more than 1024 KiB on stdout: stopped"),
        ("python3 -c 'print(\"[\" * 100000)'", "answered JSON that "),
        (
            """echo '{"version": 1, "success": false, "code": "401", "message": "denied"}'""",
            "Executable returned unsuccessful response: code: 401, message: denied.",
        ),
    ],
)
def test_a_helper_that_gives_no_token_is_one_line_about_it(
    tmp_path: Path,
    sts: tuple[FakeSts, FakeServer],
    test_ca: CertAuthority,
    body: str,
    says: str,
) -> None:
    run = _run(tmp_path, sts, test_ca, body)
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert f"the executable {tmp_path / 'helper'} {says}" in line or says.startswith("Executable")
    assert says in line, line
    assert "internal error" not in line
    fake_sts, _ = sts
    assert fake_sts.forms == []


def test_executables_stay_opt_in(
    tmp_path: Path, sts: tuple[FakeSts, FakeServer], test_ca: CertAuthority
) -> None:
    marker = tmp_path / "ran"
    run = _run(tmp_path, sts, test_ca, f"touch {marker}", env={})
    assert (run.code, run.stdout) == (1, b"")
    assert "GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES" in run.error_lines[0]
    assert not marker.exists()


@pytest.mark.parametrize(
    ("timeout_millis", "bound", "bundle"),
    [(30000, "the deadline", False), (30000, "the deadline", True), (5000, "", False)],
)
def test_a_hanging_helper_is_stopped_whole_within_its_bound(
    tmp_path: Path,
    sts: tuple[FakeSts, FakeServer],
    test_ca: CertAuthority,
    timeout_millis: int,
    bound: str,
    bundle: bool,
) -> None:
    """google-auth's 30 s default outlasts a 4 s deadline: the deadline's line blamed the network
    and the helper was left running. Now it is stopped with its child before the deadline; a
    timeout_millis shorter than the deadline is its bound, said as such."""
    if bundle:
        require_bundle()
    pids = tmp_path / "pids"
    body = f"sleep 300 & echo $! > {pids}; echo $$ >> {pids}; wait"
    deadline = "--deadline=4s" if bound else "--deadline=20s"
    try:
        run = _run(
            tmp_path, sts, test_ca, body, deadline, timeout_millis=timeout_millis, use_bundle=bundle
        )
    finally:  # whatever the plugin did, the test leaves no process behind
        left, still = stop_what_is_left(pids)
    assert len(left) == 2 and still == [], (left, still)
    assert (run.code, run.stdout) == (1, b""), run.stderr
    bound = bound or f"its timeout_millis ({timeout_millis // 1000}s)"
    assert f"did not answer within {bound}: stopped" in run.error_lines[-1], run.stderr
    assert "check that the endpoint is reachable" not in run.stderr
    assert run.seconds < (6 if bound == "the deadline" else 9)

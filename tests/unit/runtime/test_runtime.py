"""The shared exec runtime, in-process (fast) and as a real subprocess (exit codes, deadline)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time

import pytest

from credprovider.errors import UsageError
from credprovider.runtime.args import split_common_args
from credprovider.runtime.goformat import SECOND
from credprovider.runtime.provider import cache_duration_for
from credprovider.runtime.serve import MAX_REQUEST_BYTES, run
from emulators.kubelet_exec import request_bytes
from release.bundle import REPO
from tests.fakes.fake_plugin import SECRET, SPEC
from tests.helpers import API_VERSIONS

NOW = 1_800_000_000.0


class _NotATty(io.BytesIO):
    def isatty(self) -> bool:
        return False


class _Tty(io.BytesIO):
    def isatty(self) -> bool:
        return True


def run_fake(
    stdin: bytes,
    argv: list[str] | None = None,
    environ: dict[str, str] | None = None,
    stdin_cls: type[io.BytesIO] = _NotATty,
) -> tuple[int, bytes, str]:
    out, err = io.BytesIO(), io.StringIO()
    code = run(
        SPEC,
        argv or [],
        stdin=stdin_cls(stdin),
        stdout=out,
        stderr=err,
        environ=environ or {},
        now=lambda: NOW,
    )
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("api_version", API_VERSIONS)
def test_answers_in_the_request_api_version(api_version: str) -> None:
    code, out, err = run_fake(request_bytes("registry.io:5000/app", api_version))
    assert (code, err) == (0, "")
    assert (
        out
        == (
            '{"kind":"CredentialProviderResponse","apiVersion":"' + api_version + '",'
            '"cacheKeyType":"Image","cacheDuration":"30m0s","auth":{"registry.io:5000":'
            '{"username":"fake-user","password":"' + SECRET + '"}}}\n'
        ).encode()
    )


BAD_REQUESTS = [
    ("empty stdin", b""),
    ("whitespace", b" \n"),
    ("not JSON", b"hello"),
    ("JSON array", b"[1,2]"),
    (
        "wrong kind",
        b'{"kind":"Pod","apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":"a/b"}',
    ),
    (
        "wrong group",
        b'{"kind":"CredentialProviderRequest","apiVersion":"example.com/v1","image":"a/b"}',
    ),
    (
        "wrong version",
        b'{"kind":"CredentialProviderRequest",'
        b'"apiVersion":"credentialprovider.kubelet.k8s.io/v3","image":"a/b"}',
    ),
    (
        "missing image",
        b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1"}',
    ),
    (
        "empty image",
        b'{"kind":"CredentialProviderRequest",'
        b'"apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":""}',
    ),
    ("oversize", b"{" + b" " * MAX_REQUEST_BYTES + b"}"),
]


@pytest.mark.parametrize(("case", "stdin"), BAD_REQUESTS, ids=[c for c, _ in BAD_REQUESTS])
def test_bad_requests_fail_with_one_line_and_no_stdout(case: str, stdin: bytes) -> None:
    code, out, err = run_fake(stdin)
    assert code == 1
    assert out == b""
    lines = err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("fake-plugin: error: invalid request: ")


def test_oversize_request_says_so() -> None:
    _, _, err = run_fake(b"{" + b" " * MAX_REQUEST_BYTES + b"}")
    assert "larger than 1 MiB" in err


def test_terminal_stdin_explains_how_to_use_the_plugin() -> None:
    code, out, err = run_fake(b"", stdin_cls=_Tty)
    assert (code, out) == (1, b"")
    assert "stdin is a terminal: pipe a CredentialProviderRequest" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--mode", "ok", "r.example.io/team/app:1"], "the image 'r.example.io/team/app:1' given"),
        (["get-credentials"], "stdin was empty: expected a CredentialProviderRequest"),
        (["/etc/kubernetes/azure.json"], "stdin was empty: expected a CredentialProviderRequest"),
    ],
)
def test_an_image_given_as_an_argument_is_said_not_read(argv: list[str], said: str) -> None:
    """An operator trying a plugin by hand with the image as its argument and nothing on stdin:
    the image is not read, and the line says how to ask for it; a subcommand or a file's path is
    no image."""
    code, out, err = run_fake(b"", argv)
    assert (code, out) == (1, b"") and len(err.splitlines()) == 1
    assert said in err
    if "given" in said:
        assert "pipe a CredentialProviderRequest naming it" in err
        assert "credprovider get 'r.example.io/team/app:1'" in err


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("error", "fake-plugin: error: fake failure for r.io/x: check the fake endpoint"),
        ("crash", "fake-plugin: error: internal error: KeyError: 'boom' (rerun with -v=4"),
    ],
)
def test_provider_failures_are_one_line(mode: str, expected: str) -> None:
    code, out, err = run_fake(request_bytes("r.io/x"), ["--mode", mode])
    assert (code, out) == (1, b"")
    assert len(err.splitlines()) == 1
    assert err.startswith(expected)


def test_crash_traceback_only_when_verbose() -> None:
    _, _, quiet = run_fake(request_bytes("r.io/x"), ["--mode", "crash"])
    _, _, verbose = run_fake(request_bytes("r.io/x"), ["--mode", "crash", "-v=4"])
    assert "Traceback" not in quiet
    assert "Traceback (most recent call last)" in verbose
    assert verbose.splitlines()[-1].startswith("fake-plugin: error: internal error: KeyError")


@pytest.mark.parametrize("verbosity", ["-v=9", "--v=9", "-v", "9"])
def test_secrets_are_redacted_at_any_verbosity(verbosity: str) -> None:
    argv = ["--mode", "leak", verbosity] if verbosity != "9" else ["--mode", "leak", "-v", "9"]
    code, out, err = run_fake(request_bytes("r.io/x"), argv)
    if verbosity == "-v":  # bare -v is --version, as upstream's ecr-credential-provider
        assert code == 0 and b"version" in out
        return
    assert code == 1
    assert SECRET not in err
    assert "s3c…(42 chars)" in err


def test_logs_are_quiet_by_default_and_verbose_on_request() -> None:
    _, _, quiet = run_fake(request_bytes("r.io/x"))
    _, _, verbose = run_fake(request_bytes("r.io/x"), ["-v=1"])
    assert quiet == ""
    assert "fake provider in mode ok got the password s3c…(42 chars)" in verbose
    assert SECRET not in verbose


def test_deadline_is_enforced_in_process() -> None:
    """The fetch is abandoned at the deadline, and the process environment it ran in (the
    context's, see Context.sdk_environment) does not outlive the run."""
    before = dict(os.environ)
    start = time.monotonic()
    code, out, err = run_fake(request_bytes("r.io/x"), ["--mode", "hang", "--deadline=300ms"])
    elapsed = time.monotonic() - start
    assert (code, out) == (1, b"")
    assert elapsed < 5
    assert "no answer within the 0.3s deadline while waiting for a fake endpoint" in err
    assert dict(os.environ) == before


def test_deadline_from_environment() -> None:
    code, _, err = run_fake(
        request_bytes("r.io/x"), ["--mode", "hang"], environ={"CREDPROVIDER_DEADLINE": "0.2"}
    )
    assert code == 1
    assert "0.2s deadline" in err


@pytest.mark.parametrize("value", ["soon", "0s", "-1s", "0", "\u00b2", "1\u00b2"])  # "²": isdigit
def test_bad_deadlines_are_usage_errors(value: str) -> None:
    code, out, err = run_fake(request_bytes("r.io/x"), [f"--deadline={value}"])
    assert (code, out) == (1, b"")
    assert "deadline" in err


def test_unknown_flag_is_a_usage_error() -> None:
    code, out, err = run_fake(request_bytes("r.io/x"), ["--no-such-flag"])
    assert (code, out) == (1, b"")
    assert "unrecognized arguments: --no-such-flag" in err


def test_version_and_help_do_not_read_stdin() -> None:
    code, out, _ = run_fake(b"", ["--version"])
    assert code == 0 and out.startswith(b"fake-plugin version ")
    code, out, err = run_fake(b"", ["--help"])
    assert code == 0 and out == b"" and "--deadline" in err


@pytest.mark.parametrize(
    ("argv", "verbosity", "rest", "version"),
    [
        (["-v=4"], 4, [], False),
        (["--v=3"], 3, [], False),
        (["-v", "2"], 2, [], False),
        (["--v", "5", "get-credentials"], 5, ["get-credentials"], False),
        (["get-credentials", "--v=3"], 3, ["get-credentials"], False),
        (["-v"], 0, [], True),
        (["--version"], 0, [], True),
        (["--logtostderr", "--vmodule=x=2", "--stderrthreshold", "INFO", "a"], 0, ["a"], False),
        (["--authFlow=gcr", "-v=1"], 1, ["--authFlow=gcr"], False),
        (
            ["cfg.json", "--registry-mirror", "a:b"],
            0,
            ["cfg.json", "--registry-mirror", "a:b"],
            False,
        ),
    ],
)
def test_common_flags(argv: list[str], verbosity: int, rest: list[str], version: bool) -> None:
    opts, remaining = split_common_args(argv)
    assert (opts.verbosity, remaining, opts.show_version) == (verbosity, rest, version)


@pytest.mark.parametrize("argv", [["-v=high"], ["-v=\u00b2"], ["--v=\u0663"], ["-v=" + "9" * 5000]])
def test_non_numeric_verbosity_is_a_usage_error(argv: list[str]) -> None:
    with pytest.raises(UsageError):
        split_common_args(argv)
    code, out, err = run_fake(request_bytes("r.io/x"), argv)
    assert (code, out) == (1, b"") and err.startswith("fake-plugin: error: invalid verbosity")


def test_a_failure_before_the_request_is_one_line() -> None:
    """--version builds the provider from its args (a plugin refuses args it cannot run with): a
    build that fails unexpectedly is one line, as a fetch's failure is, never a traceback."""
    code, out, err = run_fake(b"", ["--version", "--valid-seconds", "nope"])
    assert (code, out) == (1, b"")
    assert (
        err.startswith("fake-plugin: error: internal error: ValueError") and "Traceback" not in err
    )
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("remaining_seconds", "expected_seconds"),
    [
        (43200, 21600),
        (43199, 21599),
        (3601, 1800),
        (4, 2),
        (3, 1),
        (2, 1),
        (1.9, 0),
        (0, 0),
        (-100, 0),
    ],
)
def test_cache_duration_policy_is_half_the_remaining_validity(
    remaining_seconds: float, expected_seconds: int
) -> None:
    assert cache_duration_for(NOW + remaining_seconds, NOW) == expected_seconds * SECOND


def test_no_expiry_omits_cache_duration() -> None:
    _, out, _ = run_fake(request_bytes("r.io/x"), ["--mode", "no-expiry"])
    assert "cacheDuration" not in json.loads(out)


def test_expired_credentials_are_not_cached() -> None:
    _, out, _ = run_fake(request_bytes("r.io/x"), ["--valid-seconds", "-5"])
    assert json.loads(out)["cacheDuration"] == "0s"


def _subprocess(args: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "tests.fakes.fake_plugin", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=30,
        check=False,
        cwd=REPO,
    )


def test_subprocess_success_exit_code_and_single_response() -> None:
    proc = _subprocess([], request_bytes("r.io/x"))
    assert proc.returncode == 0
    assert proc.stdout.count(b"\n") == 1
    assert json.loads(proc.stdout)["kind"] == "CredentialProviderResponse"


def test_subprocess_deadline_kills_a_hung_provider() -> None:
    start = time.monotonic()
    proc = _subprocess(["--mode", "hang", "--deadline=1s"], request_bytes("r.io/x"))
    assert proc.returncode == 1
    assert proc.stdout == b""
    assert time.monotonic() - start < 10
    stderr = proc.stderr.decode()
    assert [line for line in stderr.splitlines() if "test mode" not in line] == [
        "fake-plugin: error: no answer within the 1s deadline while waiting for a fake endpoint "
        "that never answers: check that the endpoint is reachable from this node (proxy, firewall, "
        "metadata service), or raise --deadline/CREDPROVIDER_DEADLINE (below 60s)"
    ]


def test_a_deadline_with_stdin_left_open_says_so() -> None:
    """An operator's hand run that never closes stdin: the plugin says the request never ended, not
    that an endpoint is unreachable."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_plugin", "--deadline=1s"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=REPO,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(b'{"kind":"CredentialProviderRequest"')  # and stdin stays open
    proc.stdin.flush()
    try:
        proc.wait(timeout=20)
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        proc.kill()
        proc.stdin.close()
    assert (proc.returncode, out) == (1, b"")
    assert [line for line in err.decode().splitlines() if "test mode" not in line] == [
        "fake-plugin: error: no answer within the 1s deadline: stdin was never closed, so the "
        "request never ended: send one CredentialProviderRequest and close stdin (echo '{...}' | "
        "PLUGIN), as the kubelet does"
    ]


def test_the_deadline_counts_from_exec() -> None:
    from credprovider.runtime.deadline import Deadline, seconds_since_exec

    assert Deadline(10, already_spent=3).remaining() <= 7
    fresh = subprocess.run(
        [
            sys.executable,
            "-c",
            "from credprovider.runtime.deadline import seconds_since_exec as s; print(s())",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        check=True,
    )
    assert 0 < float(fresh.stdout) < 5  # the interpreter's start-up, read from /proc
    assert 0 <= seconds_since_exec() <= 5  # capped for long-lived processes


@pytest.mark.parametrize(
    ("args", "values", "positionals"),
    [
        ([], {}, []),
        (["get-credentials", "--authFlow", "gcr"], {"flow": "gcr"}, ["get-credentials"]),
        (["--authFlow=dockercfg", "get-credentials"], {"flow": "dockercfg"}, ["get-credentials"]),
        (["-a", "gcr", "-a=dockercfg-url"], {"flow": "dockercfg-url"}, []),
        (["cfg.json", "-r", "a:b", "-"], {"mirror": "a:b"}, ["cfg.json", "-"]),
        (["--authFlow="], {"flow": ""}, []),
    ],
)
def test_parse_arguments(args: list[str], values: dict[str, str], positionals: list[str]) -> None:
    from credprovider.runtime.args import parse_arguments

    options = {"--authFlow": "flow", "-a": "flow", "-r": "mirror"}
    assert parse_arguments(args, options) == (values, positionals)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--authFlow"], "argument --authFlow: expected one argument"),
        (["--auth"], r"unrecognized arguments: --auth \(see --help\)"),
        (["--authflow=gcr"], r"unrecognized arguments: --authflow=gcr; did you mean --authFlow\?"),
        (["--AUTHFLOW", "gcr"], r"unrecognized arguments: --AUTHFLOW; did you mean --authFlow\?"),
    ],
)
def test_parse_arguments_errors(args: list[str], message: str) -> None:
    from credprovider.runtime.args import parse_arguments

    with pytest.raises(UsageError, match=message):
        parse_arguments(args, {"--authFlow": "flow"})


def test_one_verbosity_scheme_in_help_and_docs() -> None:
    """The levels are told once (runtime.log.VERBOSITY_SCHEME): every plugin's --help and
    docs/clouds.md say the same thing."""
    import io

    from credprovider.entry import PLUGIN_MODULES
    from credprovider.runtime.log import VERBOSITY_SCHEME
    from credprovider.runtime.serve import run

    clouds = " ".join((REPO / "docs" / "clouds.md").read_text().split())
    assert VERBOSITY_SCHEME in clouds
    for module in PLUGIN_MODULES.values():
        spec = __import__(module, fromlist=["SPEC"]).SPEC
        err = io.StringIO()
        assert (
            run(spec, ["--help"], stdin=io.BytesIO(), stdout=io.BytesIO(), stderr=err, environ={})
            == 0
        )
        assert VERBOSITY_SCHEME in " ".join(err.getvalue().split())


def test_plugin_help_fits_a_terminal() -> None:
    """Every line of a plugin's --help fits 100 columns, but the usage line and the example
    command, which a person copies whole (the verbosity line was 219 characters, its last word
    wrapped alone onto the next)."""
    import io

    from credprovider.entry import PLUGIN_MODULES
    from credprovider.runtime.args import HELP_WIDTH
    from credprovider.runtime.serve import run

    for module in PLUGIN_MODULES.values():
        spec = __import__(module, fromlist=["SPEC"]).SPEC
        err = io.StringIO()
        run(spec, ["--help"], stdin=io.BytesIO(), stdout=io.BytesIO(), stderr=err, environ={})
        lines = err.getvalue().splitlines()
        long = [line for line in lines[1:] if len(line) > HELP_WIDTH and "| " not in line]
        assert long == [], spec.name
        assert "always redacted" in err.getvalue(), spec.name


def test_decisions_are_what_the_logger_writes_less_its_other_kinds() -> None:
    """The plugin's log and the tool's reading of it share one definition of each line kind."""
    import io

    from credprovider.runtime.log import ANSWER_KIND, REQUEST_KIND, Logger, decisions

    stream = io.StringIO()
    log = Logger("ecr-credential-provider", 1, stream)
    log.v(1, f"{REQUEST_KIND}apiVersion=v1 image=a/b")
    log.v(1, "credentials from the instance profile")
    log.warning("the region is guessed")
    log.v(1, "cache: stored r.io in 1f2e")
    log.v(2, "a retry (not at -v=1)")
    log.v(1, f"{ANSWER_KIND}cacheKeyType=Registry")
    log.error("it failed")
    stream.write("another-plugin: credentials from elsewhere\n")
    assert decisions(stream.getvalue(), "ecr-credential-provider") == [
        "credentials from the instance profile",
        "cache: stored r.io in 1f2e",
    ]


def test_version_refuses_arguments_the_plugin_cannot_run_with() -> None:
    """The upstream Go plugins parse their flags before --version acts; so do we, so that a
    provider's args can be checked without a request (credprovider validate)."""
    code, out, err = run_fake(b"", ["--no-such-flag", "--version"])
    assert (code, out) == (1, b"")
    assert "unrecognized arguments: --no-such-flag" in err
    code, out, _ = run_fake(b"", ["--version"])
    assert code == 0 and out.startswith(b"fake-plugin version ")


def test_a_name_not_resolving_is_found_among_an_sdks_wrappings() -> None:
    """google-auth wraps urllib3's NameResolutionError (from socket.gaierror) in requests'
    ConnectionError and its own TransportError: the gaierror is found; a refused connection in
    the same wrapping is not it, and a chain that loops ends."""
    import socket

    from credprovider.runtime.advice import name_not_resolved

    def wrapped(root: BaseException) -> BaseException:
        error: BaseException = root
        for layer in (OSError("resolution"), ConnectionError("pool"), RuntimeError("transport")):
            layer.__cause__ = error
            error = layer
        outer = ValueError("outer")
        outer.__context__ = error
        return outer

    assert name_not_resolved(wrapped(socket.gaierror(-2, "Name or service not known")))
    assert not name_not_resolved(wrapped(ConnectionRefusedError(111, "Connection refused")))
    looping = OSError("a")
    looping.__cause__ = OSError("b")
    looping.__cause__.__cause__ = looping
    assert not name_not_resolved(looping)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("--url 'https://robot:s3cr3tpw@quay.example/x' is not", "--url 'https://…@quay.example/x' is not"),
        ("GET http://TOKEN123@169.254.169.254/latest", "GET http://…@169.254.169.254/latest"),
        ("a:b@c.d and ftp://u:p@h ok", "a:b@c.d and ftp://…@h ok"),  # a URL's only
        ("https://host/users/a@b.example", "https://host/users/a@b.example"),  # not userinfo
        ("registry.io/app@sha256:ab", "registry.io/app@sha256:ab"),
    ],
)  # fmt: skip
def test_a_urls_userinfo_is_never_printed(text: str, shown: str) -> None:
    """A setting's URL quoted in an error (a --url, an endpoint variable) may carry a password
    or a token as its userinfo: every printed line goes through scrub, which drops it."""
    from credprovider.runtime.redact import safe_line, scrub

    assert scrub(text) == shown
    assert safe_line(text) == shown

"""registry-credential-provider beyond the contract (issue #64): what each backend is sent, the
cache duration from the shorter of the credential's and the token's expiry, a credential never
sent for another host, usage refused before any call, and each backend's hostile or refusing
answer as one line naming the backend and what to fix, within the deadline."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from credprovider.runtime.goformat import parse_go_duration
from emulators.federation import Issuer
from emulators.http import FakeResponse
from emulators.kubelet_exec import PluginRun, request_bytes, run_plugin
from tests.contract.test_registries import AUDIENCE, BACKENDS, HOST, BackendCloud, backend_cloud


def _absent(path: str) -> bool:
    """The node has no such path (doctor's ``exists``)."""
    return False


PLUGIN = "registry-credential-provider"
IMAGE = f"{HOST}/team/app"


def run(cloud: BackendCloud, *extra: str, image: str = IMAGE, token: str | None = None,
        annotations: dict[str, str] | None = None, **env: str) -> PluginRun:  # fmt: skip
    stdin = request_bytes(image, token=cloud.token if token is None else token,
                          annotations=cloud.annotations if annotations is None else annotations)  # fmt: skip
    return run_plugin(PLUGIN, stdin, [*cloud.args, *extra], {**cloud.env, **env})


def one_line(result: PluginRun) -> str:
    assert (result.code, result.stdout) == (1, b""), result.stderr
    assert len(result.error_lines) == 1 and "Traceback" not in result.stderr, result.stderr
    line = result.error_lines[0]
    assert line.startswith(f"{PLUGIN}: error: ")
    return line


@pytest.fixture(params=sorted(BACKENDS))
def cloud(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendCloud]:
    with backend_cloud(request.param) as made:
        yield made


@pytest.fixture
def quay(tmp_path: Path) -> Iterator[BackendCloud]:
    with backend_cloud("quay") as made:
        yield made


def test_each_backend_answers_in_half_the_shorter_lifetime(cloud: BackendCloud) -> None:
    """A token with 10 minutes left bounds every backend's answer (their credentials live an hour
    or have no expiry at all): cacheDuration is half of it."""
    token = cloud.issuer.token(audience=AUDIENCE, expires_in=600)
    response = run(cloud, token=token).response
    assert 290 <= parse_go_duration(response["cacheDuration"]) / 1e9 <= 300, response
    assert list(response["auth"]) == [HOST]


def test_an_hour_long_credential_and_a_day_long_token_give_half_an_hour(quay: BackendCloud) -> None:
    response = run(quay).response  # the token lives an hour, Quay's JWT an hour
    assert response["cacheDuration"] in ("29m59s", "30m0s", "29m58s"), response
    assert response["cacheKeyType"] == "Registry"


def test_the_credential_is_never_sent_for_another_host(quay: BackendCloud) -> None:
    line = one_line(run(quay, image="elsewhere.example.test/team/app"))
    assert "elsewhere.example.test is not a registry the Quay robot federation credential" in line
    assert "--registry" in line and quay.fake.calls == []


def test_the_port_form_of_a_registry_is_the_same_registry(quay: BackendCloud) -> None:
    assert list(run(quay, image=f"{HOST}:443/team/app").response["auth"]) == [f"{HOST}:443"]


def test_no_token_is_one_line_saying_what_to_configure(quay: BackendCloud) -> None:
    line = one_line(run(quay, token=""))
    assert "no service account token" in line and "tokenAttributes" in line
    assert quay.fake.calls == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "--backend is required"),
        (["--backend", "harbor"], "--backend 'harbor' is not one of quay"),
        (["--backend", "quay", "--url", "https://q.example.test"], "--backend quay needs --robot"),
        (["--backend", "quay", "--url", "http://q.example.test", "--robot", "a+b"],
         "must be an https:// URL"),
        (["--backend", "vault", "--url", "https://v.example.test", "--role", "r",
          "--secret-path", "a/../b", "--registry", "h"], "--secret-path 'a/../b' is not"),
        (["--backend", "cloudsmith", "--org", "o", "--service-slug", "s", "--robot", "a+b"],
         "--robot does not apply to --backend cloudsmith"),
        (["--backend", "vault", "--url", "https://v.example.test", "--role", "r",
          "--secret-path", "p"], "--backend vault needs --registry"),
    ],
)  # fmt: skip
def test_usage_is_refused_before_any_call(args: list[str], said: str, quay: BackendCloud) -> None:
    stdin = request_bytes(IMAGE, token=quay.token)
    line = one_line(run_plugin(PLUGIN, stdin, args, quay.env))
    assert said in line, line


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (FakeResponse(status=200, body=b"x" * (2 << 20)), "larger than 1 MiB"),
        (FakeResponse.text("<html>proxy</html>"), "answered with no JSON"),
        (FakeResponse.json({"nothing": "here"}), ""),
        (FakeResponse.json({"error": "slow_down"}, 429, headers={"Retry-After": "3600"}),
         "HTTP 429"),
        (FakeResponse.json({"errors": ["permission denied"]}, 403), "HTTP 403: permission denied"),
        (FakeResponse.json({"detail": "Not found."}, 404), "HTTP 404"),
        (FakeResponse(body=b"[" * 40 + b"1" + b"]" * 40), "nested more than 32"),
        # a redirect is never followed (the pod's token would go where --url does not say); it
        # was "refused with HTTP 302: ;", saying neither where to nor what to do
        (FakeResponse(status=302, headers={"Location": "https://sso.example.com/login"}),
         "refused with HTTP 302: a redirect to 'https://sso.example.com/login', not followed; "
         "check --url: give the address"),
        (FakeResponse(status=403), "refused with HTTP 403; "),
    ],
)  # fmt: skip
def test_a_hostile_or_refusing_answer_is_one_line_naming_the_backend(
    cloud: BackendCloud, fault: FakeResponse, said: str
) -> None:
    fake = cloud.fake
    fake.fault = fault
    started = time.monotonic()
    line = one_line(run(cloud, "--deadline", "8s"))
    assert time.monotonic() - started < 8
    backend = cloud.args[cloud.args.index("--backend") + 1]
    title = {"quay": "Quay robot federation", "quay-sts": "Quay token exchange",
             "artifactory": "Artifactory", "cloudsmith": "Cloudsmith", "vault": "Vault",
             "secret": "pull Secret"}[backend]  # fmt: skip
    assert title in line and said in line, line
    assert not any(secret in line for secret in (cloud.token,))


@pytest.mark.parametrize("echoed", ["basic", "signature"])
def test_a_backend_echoing_the_token_in_a_form_of_its_own_is_scrubbed(
    quay: BackendCloud, echoed: str
) -> None:
    """A refusal that echoes the pod's token as Quay was sent it (the Basic credential, robot and
    token in base64) or its signature alone (the part that makes it a credential): neither
    reaches the kubelet's log, at any verbosity. Both did, up to the line's cap."""
    from base64 import b64encode

    basic = b64encode(f"{quay.args[quay.args.index('--robot') + 1]}:{quay.token}".encode())
    said = {"basic": f"Basic {basic.decode()}", "signature": quay.token.rpartition(".")[2]}[echoed]
    quay.fake.fault = FakeResponse.json({"error": f"bad credentials: {said}"}, 401)
    for verbosity in ("0", "9"):
        result = run(quay, "-v", verbosity)
        assert (result.code, result.stdout) == (1, b"") and "Traceback" not in result.stderr
        line = result.stderr.splitlines()[-1]
        assert "refused with HTTP 401: bad credentials: " in line, line
        shown = said.split()[-1]
        for start in range(0, len(shown) - 16, 8):
            assert shown[start : start + 16] not in result.stderr, (start, line)


@pytest.mark.parametrize("expires_in", [0, -5, "soon"])
def test_a_credential_said_to_last_no_time_is_not_cached(expires_in: object) -> None:
    """An exchange answering an ``expires_in`` that is no positive number of seconds: the answer
    is the credential with ``cacheDuration: 0s``, not the pod token's half hour (the kubelet would
    reuse a dead credential for it)."""
    with backend_cloud("quay-sts") as sts:
        sts.fake.fault = FakeResponse.json({"access_token": "issued-1", "expires_in": expires_in})
        result = run(sts)
    assert result.code == 0, result.stderr
    assert result.response["cacheDuration"] == "0s"
    assert result.response["auth"][HOST]["password"] == "issued-1"


def test_throttling_past_the_deadline_stops_at_once(quay: BackendCloud) -> None:
    fake = quay.fake
    fake.fault = FakeResponse.json({"error": "slow_down"}, 429, headers={"Retry-After": "3600"})
    line = one_line(run(quay))
    assert "HTTP 429" in line and "throttling" in line
    assert len(fake.calls) == 1


def test_a_hanging_backend_ends_at_the_deadline(quay: BackendCloud) -> None:
    quay.fake.fault = FakeResponse(hang=True)
    started = time.monotonic()
    line = one_line(run(quay, "--deadline", "3s"))
    assert time.monotonic() - started < 6 and "Quay robot federation" in line


def test_a_token_the_issuer_did_not_sign_is_refused_with_the_setup_to_check(
    quay: BackendCloud,
) -> None:
    forged = Issuer(url=quay.issuer.url).token(audience=AUDIENCE)  # another key, same iss
    line = one_line(run(quay, token=forged))
    assert "HTTP 401: Invalid robot" in line
    assert "federation entry trusting this cluster's service-account issuer" in line
    assert "system:serviceaccount:team:NAME" in line


def test_artifactory_is_sent_the_documented_exchange(tmp_path: Path) -> None:
    with backend_cloud("artifactory") as cloud:
        fake = cloud.fake
        seen: list[dict[str, str]] = []
        answer = fake.answer

        def record(request):  # type: ignore[no-untyped-def]
            seen.append(request.json())
            return answer(request)

        fake.answer = record
        assert run(cloud, "--audience", "jfrog", "--project-key", "team").code == 0
    body = seen[0]
    assert body["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange"
    assert body["subject_token_type"] == "urn:ietf:params:oauth:token-type:id_token"
    assert (body["provider_name"], body["provider_type"]) == ("k8s", "Generic OpenID Connect")
    assert (body["audience"], body["project_key"]) == ("jfrog", "team")
    assert body["subject_token"] == cloud.token


def test_vault_sends_its_namespace_and_reads_the_named_fields(tmp_path: Path) -> None:
    with backend_cloud("vault") as cloud:
        fake = cloud.fake
        fake.namespace = "teams/a"
        assert "permission denied" in one_line(run(cloud))
        fake.kv[("secret", "registry/team")] = {"login": "u2", "token": "p2-0123456789abcdef"}
        response = run(cloud, "--vault-namespace", "teams/a", "--username-field", "login",
                       "--password-field", "token").response  # fmt: skip
    assert response["auth"][HOST] == {"username": "u2", "password": "p2-0123456789abcdef"}


def test_the_secret_backend_reads_only_the_tokens_namespace(tmp_path: Path) -> None:
    with backend_cloud("secret") as cloud:
        fake = cloud.fake
        line = one_line(run(cloud, annotations={}))
        assert "has no annotation registry.credprovider.io/pull-secret" in line
        assert fake.calls == []
        line = one_line(run(cloud, annotations={"registry.credprovider.io/pull-secret": "../x"}))
        assert "names no Secret" in line
        other = cloud.issuer.token(namespace="other", audience=AUDIENCE)
        line = one_line(run(cloud, token=other))
        assert "HTTP 403" in line and "cannot get resource" in line
        assert "needs get on secrets in its namespace" in line
        assert fake.calls[-1] == "GET /api/v1/namespaces/other/secrets/pull"
        response = run(cloud).response
    assert response["cacheKeyType"] == "Image"
    assert json.dumps(response["auth"][HOST]) == json.dumps(
        {"username": "secret-user", "password": "secret-password-0123456789"}
    )


def test_doctor_reaches_each_backend_as_the_plugin_does(cloud: BackendCloud) -> None:
    """doctor's reachability probe: the backend's health endpoint over the plugin's TLS (its
    --ca-file); without that CA the certificate is refused, as the plugin would refuse it."""
    from credprovider.registries.descriptor import identity
    from credprovider.tool.doctor.identity import probe
    from credprovider.tool.doctor.model import FAIL, PASS

    found = identity({}, cloud.args, lambda path: None, _absent)
    assert not isinstance(found, str)
    [(status, message, _)] = probe(found, {})
    assert status == PASS and message.startswith(found.what), message
    assert cloud.fake.calls == []  # a health check is no credential call
    at = cloud.args.index("--ca-file")
    untrusted = identity({}, cloud.args[:at] + cloud.args[at + 2 :], lambda path: None, _absent)
    assert not isinstance(untrusted, str)
    [(status, message, fix)] = probe(untrusted, {})
    assert status == FAIL and "CERTIFICATE_VERIFY_FAILED" in message.upper().replace(" ", "_")
    assert "reachable" in fix


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "directory", "absent", "not PEM"])
def test_a_ca_file_that_is_no_bundle_is_one_line_at_once(
    quay: BackendCloud, tmp_path: Path, kind: str
) -> None:
    """--ca-file is read as every node file is: a FIFO is never waited on, /dev/zero never read."""
    import os

    path = {
        "/dev/zero": "/dev/zero",
        "directory": str(tmp_path),
        "absent": str(tmp_path / "no"),
    }.get(kind, str(tmp_path / "bundle.pem"))
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "not PEM":
        Path(path).write_text("not a certificate\n")
    at = quay.args.index("--ca-file")
    args = [*quay.args[:at], "--ca-file", path, *quay.args[at + 2 :]]
    started = time.monotonic()
    run_ = run_plugin(PLUGIN, request_bytes(IMAGE, token=quay.token), args, quay.env)
    line = one_line(run_)
    assert time.monotonic() - started < 5 and f"--ca-file {path} cannot be used" in line
    says = {
        "fifo": "is a FIFO, not a regular file",
        "/dev/zero": "is a character device, not a regular file",
        "directory": "is a directory, not a regular file",
        "absent": "no such file or directory",
        "not PEM": "it holds no PEM certificate",  # not OpenSSL's "no start line ... (_ssl.c:4020)"
    }[kind]
    assert says in line, line
    assert quay.fake.calls == []


def _throttled_once(cloud: BackendCloud, headers: dict[str, str]) -> list[float]:
    """The backend answers its first credential call 429 with ``headers``; when each call came."""
    seen: list[float] = []
    answer = cloud.fake.answer

    def once(request):  # type: ignore[no-untyped-def]
        seen.append(time.monotonic())
        if len(seen) == 1:
            return FakeResponse.json({"detail": "Request was throttled."}, 429, headers=headers)
        return answer(request)

    cloud.fake.answer = once  # type: ignore[method-assign]
    return seen


def test_cloudsmiths_rate_limit_reset_is_honoured_without_retry_after(tmp_path: Path) -> None:
    """Cloudsmith says when its window resets (X-RateLimit-Reset, Unix seconds), not Retry-After:
    the retry waits for it."""
    with backend_cloud("cloudsmith") as cloud:
        reset = int(time.time()) + 3
        seen = _throttled_once(
            cloud, {"X-RateLimit-Reset": str(reset), "X-RateLimit-Remaining": "0"}
        )
        assert run(cloud).code == 0
    assert len(seen) == 2 and seen[1] - seen[0] >= 1.5


def test_a_rate_limit_reset_past_the_deadline_stops_at_once(tmp_path: Path) -> None:
    with backend_cloud("cloudsmith") as cloud:
        seen = _throttled_once(cloud, {"X-RateLimit-Reset": str(int(time.time()) + 3600)})
        line = one_line(run(cloud))
    assert len(seen) == 1 and "HTTP 429" in line and "throttling" in line


def test_a_ca_file_with_a_distributions_comments_is_trusted(
    quay: BackendCloud, tmp_path: Path
) -> None:
    """A bundle may name its certificates in UTF-8 comments (p11-kit's extracted bundles label
    each one in a ``#`` line); ssl refuses such text as ``cadata`` (a TypeError, an internal error
    before), so only its ASCII, which is all of PEM, is handed over, and doctor's probe trusts it
    alike."""
    from credprovider.registries.descriptor import identity
    from credprovider.tool.doctor.identity import probe
    from credprovider.tool.doctor.model import PASS

    at = quay.args.index("--ca-file")
    bundle = tmp_path / "tls-ca-bundle.pem"
    bundle.write_bytes(
        "# NetLock Arany (Class Gold) Főtanúsítvány\n".encode()
        + Path(quay.args[at + 1]).read_bytes()
    )
    args = [*quay.args[:at], "--ca-file", str(bundle), *quay.args[at + 2 :]]
    response = run_plugin(PLUGIN, request_bytes(IMAGE, token=quay.token), args, quay.env).response
    assert list(response["auth"]) == [HOST]
    found = identity({}, args, lambda path: None, _absent)
    assert not isinstance(found, str)
    [(status, message, _)] = probe(found, {})
    assert status == PASS, message


def test_doctor_says_a_ca_file_it_cannot_use_as_the_plugin_does(
    quay: BackendCloud, tmp_path: Path
) -> None:
    """doctor's probe reads --ca-file as the plugin does: a directory is no bundle for it (the
    CA bundle variables may name one, as requests allows), and the line names the argument."""
    from credprovider.registries.descriptor import identity
    from credprovider.tool.doctor.identity import probe
    from credprovider.tool.doctor.model import FAIL

    at = quay.args.index("--ca-file")
    args = [*quay.args[:at], "--ca-file", str(tmp_path), *quay.args[at + 2 :]]
    plugin = one_line(run_plugin(PLUGIN, request_bytes(IMAGE, token=quay.token), args, quay.env))
    found = identity({}, args, lambda path: None, _absent)
    assert not isinstance(found, str)
    [(status, message, _)] = probe(found, {})
    said = f"--ca-file {tmp_path} cannot be used: is a directory, not a regular file"
    assert status == FAIL and said in message, message
    assert said in plugin

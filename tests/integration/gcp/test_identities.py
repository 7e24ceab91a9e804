"""Where the token comes from besides the node: workload identity through Google STS, and
GOOGLE_APPLICATION_CREDENTIALS (service account key, external account) off GCE."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from emulators.gcp import FakeMetadata, FakeOAuth, FakeSts, write_service_account_key
from emulators.http import FakeRequest, FakeResponse, FakeServer, serve
from emulators.kubelet_exec import PluginRun, plugin_command, request_bytes, run_plugin
from emulators.tls import CertAuthority
from tests.helpers import make_special
from tests.integration.gcp.common import IDP, KSA_TOKEN, PLUGIN, POOL, gcp_env

WI_ARGS = ["get-credentials", "--identity-provider", IDP, "--project-id", "my-project"]


def test_workload_identity_exchanges_the_service_account_token(
    metadata: tuple[FakeMetadata, FakeServer],
    sts: tuple[FakeSts, FakeServer],
    test_ca: CertAuthority,
    use_bundle: bool,
) -> None:
    meta, meta_server = metadata
    fake_sts, sts_server = sts
    run = run_plugin(
        PLUGIN,
        request_bytes(
            "us-docker.pkg.dev/p/r/i",
            token=KSA_TOKEN,
            annotations={"iam.gke.io/enable-wi-image-pull": "true"},
        ),
        WI_ARGS,
        gcp_env(meta_server, test_ca, sts_server),
        use_bundle=use_bundle,
    )
    assert run.response["auth"]["*.pkg.dev"] == {
        "username": "_token",
        "password": fake_sts.access_token,
    }
    assert run.response["cacheDuration"] in ("30m0s", "29m59s")  # half of expires_in 3600
    (form,) = fake_sts.forms
    assert form == {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "audience": f"identitynamespace:my-project.svc.id.goog:{IDP}",
        "scope": "https://www.googleapis.com/auth/cloud-platform",
        "requested_token_type": "urn:ietf:params:oauth:token-type:access_token",
        "subject_token": KSA_TOKEN,
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
    }
    assert meta.paths == []
    assert KSA_TOKEN not in run.stderr


@pytest.mark.parametrize("annotated", [True, False])
def test_federation_off_gke_exchanges_for_the_pool_audience(
    metadata: tuple[FakeMetadata, FakeServer],
    sts: tuple[FakeSts, FakeServer],
    test_ca: CertAuthority,
    use_bundle: bool,
    annotated: bool,
) -> None:
    """--sts-audience (upstream's PR #1248): the same opt-in and exchange as GKE's, the pool
    provider as the audience, no --project-id; a pod that did not opt in gets the node's token."""
    meta, meta_server = metadata
    fake_sts, sts_server = sts
    run = run_plugin(
        PLUGIN,
        request_bytes(
            "us-docker.pkg.dev/p/r/i",
            token=KSA_TOKEN,
            annotations={"iam.gke.io/enable-wi-image-pull": "true"} if annotated else {},
        ),
        ["get-credentials", "--sts-audience", POOL],
        gcp_env(meta_server, test_ca, sts_server),
        use_bundle=use_bundle,
    )
    assert run.code == 0, run.stderr
    if not annotated:
        assert fake_sts.forms == [] and meta.paths != []
        assert run.response["auth"]["*.pkg.dev"]["password"] == meta.access_token
        return
    assert run.response["auth"]["*.pkg.dev"]["password"] == fake_sts.access_token
    (form,) = fake_sts.forms
    assert (form["audience"], form["subject_token"]) == (POOL, KSA_TOKEN)
    assert form["subject_token_type"] == "urn:ietf:params:oauth:token-type:jwt"
    assert meta.paths == []
    assert KSA_TOKEN not in run.stderr


def _opted_in_pull(
    meta_server: FakeServer, test_ca: CertAuthority, sts_server: FakeServer, *more: str
) -> PluginRun:
    """A pull by a pod whose service account opted in to Workload Identity (its token sent)."""
    return run_plugin(
        PLUGIN,
        request_bytes(
            "gcr.io/p/a", token=KSA_TOKEN, annotations={"iam.gke.io/enable-wi-image-pull": "true"}
        ),
        [*WI_ARGS, *more],
        gcp_env(meta_server, test_ca, sts_server),
    )


def test_workload_identity_failure_does_not_fall_back(
    metadata: tuple[FakeMetadata, FakeServer],
    sts: tuple[FakeSts, FakeServer],
    test_ca: CertAuthority,
) -> None:
    meta, meta_server = metadata
    fake_sts, sts_server = sts
    fake_sts.fault = FakeResponse.json(
        {"error": "invalid_grant", "error_description": "The audience in ID Token does not match"},
        status=400,
    )
    run = _opted_in_pull(meta_server, test_ca, sts_server)
    assert (run.code, run.stdout) == (1, b"")
    assert "no fallback to the node identity" in run.error_lines[0]
    assert "invalid_grant" in run.error_lines[0]
    assert meta.paths == []


def test_an_sts_it_cannot_reach_says_what_to_check(
    metadata: tuple[FakeMetadata, FakeServer], test_ca: CertAuthority
) -> None:
    """A refused connection at Google STS names it and what to check (a firewall, a proxy), as
    every unreachable service's line does; nothing falls back to the node's identity."""
    meta, meta_server = metadata
    run = run_plugin(
        PLUGIN,
        request_bytes(
            "gcr.io/p/a", token=KSA_TOKEN, annotations={"iam.gke.io/enable-wi-image-pull": "true"}
        ),
        WI_ARGS,
        gcp_env(meta_server, test_ca, CREDPROVIDER_TEST_RESOLVE="sts.googleapis.com=127.0.0.1:9"),
    )
    assert (run.code, run.stdout) == (1, b"")
    [line] = run.error_lines
    assert "no fallback to the node identity" in line, line
    assert "check that sts.googleapis.com is reachable from this node" in line, line
    # the OS's reason, not google-auth's, requests' and urllib3's layers of repr
    assert (
        "opted in (no fallback to the node identity): ConnectionRefusedError: [Errno 111]" in line
    )
    assert "HTTPSConnectionPool" not in line
    assert meta.paths == []


def test_a_token_endpoint_it_cannot_reach_says_what_to_check(tmp_path: Path) -> None:
    key_file = tmp_path / "key.json"
    write_service_account_key(key_file, "http://127.0.0.1:9/token")
    run = run_plugin(
        PLUGIN,
        request_bytes("gcr.io/p/a"),
        ["get-credentials"],
        {"GOOGLE_APPLICATION_CREDENTIALS": str(key_file)},
    )
    assert (run.code, run.stdout) == (1, b"")
    [line] = run.error_lines
    assert f"could not get a token with the credentials in {key_file}: " in line, line
    assert f"check that the token endpoint {key_file} names is reachable" in line, line


def test_workload_identity_without_a_token_fails_fast(
    metadata: tuple[FakeMetadata, FakeServer],
) -> None:
    meta, server = metadata
    run = run_plugin(
        PLUGIN,
        request_bytes("gcr.io/p/a", annotations={"iam.gke.io/enable-wi-image-pull": "true"}),
        WI_ARGS,
        gcp_env(server),
    )
    assert run.code == 1
    assert "sent no service account token" in run.stderr
    assert meta.paths == []


@pytest.mark.parametrize(
    "annotations",
    [{}, {"iam.gke.io/enable-wi-image-pull": "True"}, {"iam.gke.io/enable-wi-image-pull": "false"}],
)
def test_without_the_opt_in_the_node_identity_is_used(
    metadata: tuple[FakeMetadata, FakeServer],
    sts: tuple[FakeSts, FakeServer],
    test_ca: CertAuthority,
    annotations: dict[str, str],
) -> None:
    meta, meta_server = metadata
    fake_sts, sts_server = sts
    run = run_plugin(
        PLUGIN,
        request_bytes("gcr.io/p/a", token=KSA_TOKEN, annotations=annotations),
        WI_ARGS,
        gcp_env(meta_server, test_ca, sts_server),
    )
    assert run.response["auth"]["gcr.io"]["password"] == meta.access_token
    assert fake_sts.forms == []


def run_with_key_file(
    tmp_path: Path,
    token_server: Callable[[FakeRequest], FakeResponse],
    *args: str,
    use_bundle: bool = False,
    **env: str,
) -> PluginRun:
    """auth-provider-gcp with GOOGLE_APPLICATION_CREDENTIALS naming a service-account key whose
    tokens come from ``token_server`` (served on loopback for the run)."""
    with serve(token_server) as oauth:
        key_file = tmp_path / "key.json"
        write_service_account_key(key_file, f"{oauth.url}/token")
        return run_plugin(
            PLUGIN,
            request_bytes("gcr.io/p/a"),
            ["get-credentials", *args],
            {"GOOGLE_APPLICATION_CREDENTIALS": str(key_file), **env},
            use_bundle=use_bundle,
        )


def test_service_account_key_file_off_gce(tmp_path: Path, use_bundle: bool) -> None:
    fake = FakeOAuth()
    run = run_with_key_file(tmp_path, fake, use_bundle=use_bundle)
    assert run.response["auth"]["gcr.io"]["password"] == fake.access_token
    assert run.response["cacheDuration"] in ("29m59s", "29m58s")
    (form,) = fake.forms
    assert form["assertion"].count(".") == 2  # a signed JWT, made by google-auth with our key


@pytest.mark.parametrize("netrc", ["a FIFO", "2 GiB", "an entry for the host"])
def test_a_netrc_is_never_read_for_a_token_request(
    tmp_path: Path, netrc: str, use_bundle: bool
) -> None:
    """requests (google-auth's transport, and azure-identity's) read ``~/.netrc`` before each
    request with no auth of its own: a FIFO there held the plugin to its deadline, 2 GiB were read
    whole, and an entry for the token server's host was sent as ``Authorization: Basic`` (over
    any the SDK set). The Go plugins read no netrc; neither does this one."""
    fake, authorizations = FakeOAuth(), []

    def token_server(request: FakeRequest) -> FakeResponse:
        authorizations.append(request.header("authorization"))
        return fake(request)

    home = tmp_path / "home"
    home.mkdir()
    if netrc == "an entry for the host":
        (home / ".netrc").write_text("machine 127.0.0.1 login u password netrc-secret\n")
    else:
        make_special(home / ".netrc", netrc)
    run = run_with_key_file(
        tmp_path, token_server, "--deadline=8s", use_bundle=use_bundle, HOME=str(home)
    )
    assert run.code == 0, run.stderr
    assert run.response["auth"]["gcr.io"]["password"] == fake.access_token
    assert authorizations == [""]
    assert run.seconds < 5, run.seconds


WIF_AUDIENCE = "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/nodes/providers/onprem"


def run_with_wif_file(
    tmp_path: Path,
    sts_server: FakeServer,
    test_ca: CertAuthority,
    source: dict[str, object],
    *args: str,
    use_bundle: bool = False,
    subject_type: str = "urn:ietf:params:oauth:token-type:jwt",
    wrapper: Sequence[str] = (),
    **env: str,
) -> PluginRun:
    """auth-provider-gcp with GOOGLE_APPLICATION_CREDENTIALS naming a Workload Identity
    Federation config whose subject token (of ``subject_type``) comes from ``source`` (its
    credential_source)."""
    config = tmp_path / "wif.json"
    config.write_text(
        json.dumps(
            {
                "type": "external_account",
                "audience": WIF_AUDIENCE,
                "subject_token_type": subject_type,
                "token_url": "https://sts.googleapis.com/v1/token",
                "credential_source": source,
            }
        )
    )
    return run_plugin(
        PLUGIN,
        request_bytes("gcr.io/p/a"),
        ["get-credentials", *args],
        {
            "GOOGLE_APPLICATION_CREDENTIALS": str(config),
            "REQUESTS_CA_BUNDLE": str(test_ca.bundle),
            "CREDPROVIDER_TEST_RESOLVE": f"sts.googleapis.com={sts_server.address}",
            **env,
        },
        use_bundle=use_bundle,
        wrapper=wrapper,
    )


def test_external_account_config_off_gce(
    tmp_path: Path, sts: tuple[FakeSts, FakeServer], test_ca: CertAuthority
) -> None:
    fake_sts, sts_server = sts
    subject = tmp_path / "oidc-token"
    subject.write_text(KSA_TOKEN)
    run = run_with_wif_file(tmp_path, sts_server, test_ca, {"file": str(subject)})
    assert run.response["auth"]["gcr.io"]["password"] == fake_sts.access_token
    (form,) = fake_sts.forms
    assert (form["audience"], form["subject_token"]) == (WIF_AUDIENCE, KSA_TOKEN)
    # google-auth's json format: the token is a field of the file
    subject.write_text(json.dumps({"id_token": KSA_TOKEN, "other": 1}))
    json_source = {
        "file": str(subject),
        "format": {"type": "json", "subject_token_field_name": "id_token"},
    }
    run = run_with_wif_file(tmp_path, sts_server, test_ca, json_source)
    assert run.response["auth"]["gcr.io"]["password"] == fake_sts.access_token
    assert fake_sts.forms[-1]["subject_token"] == KSA_TOKEN


@pytest.mark.parametrize("key_log", ["a file", "a FIFO"])
def test_tls_keys_are_never_written_where_sslkeylogfile_says(
    tmp_path: Path, sts: tuple[FakeSts, FakeServer], test_ca: CertAuthority, key_log: str
) -> None:
    """Python's ssl and urllib3 write every TLS session's keys to SSLKEYLOGFILE (a capture of the
    token exchange could then be read; a FIFO there held the plugin to its deadline). The Go
    plugins never write one; neither does this one, on requests' route or the stdlib's."""
    keys = tmp_path / "keys.log"
    if key_log == "a FIFO":
        os.mkfifo(keys)
    (tmp_path / "token").write_text(KSA_TOKEN)
    _, server = sts
    run = run_with_wif_file(
        tmp_path,
        server,
        test_ca,
        {"file": str(tmp_path / "token")},
        "--deadline=8s",
        SSLKEYLOGFILE=str(keys),
    )
    assert run.code == 0, run.stderr
    assert run.seconds < 5, run.seconds
    assert not keys.exists() if key_log == "a file" else keys.is_fifo()


def test_a_subject_token_file_that_never_ends_or_never_answers_is_refused(
    tmp_path: Path, sts: tuple[FakeSts, FakeServer], test_ca: CertAuthority
) -> None:
    """#62: /dev/zero as the subject token file grew the plugin past 7 GiB on the kubelet's
    exec path; a FIFO would block it until the kubelet's kill. Both are refused in one line,
    nothing read into memory and nothing asked of STS (runtime/nodefile.py's rules)."""
    fake_sts, sts_server = sts
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    large = tmp_path / "large"
    with large.open("wb") as handle:  # sparse: past the cap without using the disk
        handle.truncate(64 * 1024 * 1024)
    for path, says in (("/dev/zero", "character device"), (str(fifo), "FIFO"),
                       (str(large), "larger than"), (str(tmp_path), "directory")):  # fmt: skip
        run = run_with_wif_file(tmp_path, sts_server, test_ca, {"file": path})
        assert (run.code, run.stdout) == (1, b""), (path, run.stderr)
        assert len(run.error_lines) == 1 and "Traceback" not in run.stderr, run.stderr
        assert f"the subject token file {path}" in run.error_lines[0], run.error_lines
        assert says in run.error_lines[0], run.error_lines
        assert run.seconds < 30, path
    assert fake_sts.forms == []


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "No such file or directory"),
        ("{}", "the file's type is missing, none google-auth loads (one of service_account, "),
        ('{"type": "nope"}', "the file's type is 'nope', none google-auth loads"),
        ("not json", "the file is not JSON"),
        (b"\xff\xfe", "the file is not UTF-8 text"),
        ("[]", "the file holds no JSON object"),
        (
            '{"type": "service_account"}',
            "Failed to load service account credentials from the file: Service account info "
            "was not in the expected format, missing fields ",
        ),
        (
            '{"type": "impersonated_service_account"}',
            "the file is not impersonated_service_account credentials google-auth can load: "
            "a field is missing or holds the wrong kind of value",
        ),
        (
            '{"type": "external_account", "credential_source": [1]}',
            "Invalid credential_source. The credential_source is not a dict.",
        ),
    ],
)
def test_bad_credentials_file_is_one_line_about_the_file(
    tmp_path: Path, content: str | bytes | None, says: str
) -> None:
    """Each says what is wrong with the file, once (google-auth's loader, given the parsed file,
    names it "dict object" and prints its two-part errors as a tuple; a JSON list and an
    impersonated account without its source were internal errors)."""
    path = tmp_path / "creds.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    run = run_plugin(
        PLUGIN,
        request_bytes("gcr.io/p/a"),
        ["get-credentials"],
        {"GOOGLE_APPLICATION_CREDENTIALS": str(path)},
    )
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert line.startswith(f"auth-provider-gcp: error: GOOGLE_APPLICATION_CREDENTIALS={path}: ")
    assert says in line, line
    for wrong in ("internal error", "dict object", "('", str(path) + ": " + str(path)):
        assert wrong not in line, line


@pytest.mark.parametrize("ca", ["a FIFO", "/dev/zero", "20 MiB", "a FIFO in a directory"])
def test_a_gdch_ca_cert_path_that_cannot_be_read_is_one_line_at_once(
    tmp_path: Path, ca: str
) -> None:
    """A GDCH service account's ``ca_cert_path``, which google-auth hands requests to verify its
    token server with: OpenSSL opened a FIFO there blocking (the plugin held to its deadline,
    blamed on the network) and read any size."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from emulators.tls import key_pem

    path = tmp_path / "ca.pem"
    if ca == "a FIFO":
        os.mkfifo(path)
    elif ca == "20 MiB":
        path.write_bytes(b"#" * (20 << 20))
    elif ca == "a FIFO in a directory":  # OpenSSL's capath, as requests takes it
        path = tmp_path / "certs"
        path.mkdir()
        os.mkfifo(path / "5ed36f99.0")
    else:
        path = Path("/dev/zero")
    with socket.socket() as listener:  # a token server that takes the connection, then waits
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        key = tmp_path / "gdch.json"
        key.write_text(
            json.dumps(
                {
                    "type": "gdch_service_account",
                    "format_version": "1",
                    "project": "p",
                    "private_key_id": "k1",
                    "private_key": key_pem(ec.generate_private_key(ec.SECP256R1())).decode(),
                    "name": "puller",
                    "ca_cert_path": str(path),
                    "token_uri": f"https://127.0.0.1:{listener.getsockname()[1]}/token",
                }
            )
        )
        run = run_plugin(
            PLUGIN,
            request_bytes("gcr.io/p/a"),
            ["get-credentials", "--deadline=8s"],
            {"GOOGLE_APPLICATION_CREDENTIALS": str(key)},
        )
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert f"the file's ca_cert_path {path} cannot be used: " in line, line
    assert run.seconds < 5, run.seconds


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_the_credentials_file_is_opened_only_by_the_plugins_reader(
    tmp_path: Path, use_bundle: bool
) -> None:
    """google-auth's own loader opens GOOGLE_APPLICATION_CREDENTIALS again after the plugin's
    bounded read, whole, blocking, and perhaps onto another file by then; given what the plugin
    read, it never opens it: every open of the key is the node-file reader's (O_NONBLOCK; the
    cache key's fingerprint and the credentials, each read whole and bounded)."""
    fake = FakeOAuth()
    trace = tmp_path / "trace"
    key_file = tmp_path / "key.json"
    with serve(fake) as oauth:
        write_service_account_key(key_file, f"{oauth.url}/token")
        proc = subprocess.run(
            [
                *("strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(trace)),
                *plugin_command(PLUGIN, use_bundle),
                "get-credentials",
            ],
            input=request_bytes("gcr.io/p/a"),
            capture_output=True,
            timeout=90,
            env={
                **os.environ,
                "PYTHONPATH": str(Path.cwd()),
                "GOOGLE_APPLICATION_CREDENTIALS": str(key_file),
            },
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["auth"]["gcr.io"]["password"] == fake.access_token
    opens = [line for line in trace.read_text().splitlines() if f'"{key_file}"' in line]
    assert opens, trace.read_text()
    assert all("O_NONBLOCK" in line for line in opens), opens


def test_a_throttled_sts_exchange_waits_and_is_answered(
    metadata: tuple[FakeMetadata, FakeServer],
    sts: tuple[FakeSts, FakeServer],
    test_ca: CertAuthority,
) -> None:
    """Google STS said 429 with Retry-After: waited out, then the pod's own token is exchanged."""
    _, meta_server = metadata
    fake_sts, sts_server = sts
    fake_sts.faults = [
        FakeResponse.json(
            {"error": "rate_limit_exceeded", "error_description": "Quota exceeded"},
            status=429,
            headers={"Retry-After": "1"},
        )
    ]
    run = _opted_in_pull(meta_server, test_ca, sts_server, "-v=2")
    assert run.code == 0, run.stderr
    assert run.response["auth"]["*.pkg.dev"]["password"] == fake_sts.access_token
    assert len(fake_sts.forms) == 2
    assert "STS token exchange: throttled (Retry-After 1s); retrying in 1.00s" in run.stderr
    assert KSA_TOKEN not in run.stderr

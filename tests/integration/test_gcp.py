"""auth-provider-gcp against the project's fakes of the GCE metadata server, Google STS and OAuth.

The node's metadata-server token comes from the project's stdlib client (found through google-auth's
``GCE_METADATA_HOST``); google-auth's real code runs for the rest: the STS client (``sts.googleapis.com`` reached over TLS with a test CA through the loopback-only
``CREDPROVIDER_TEST_RESOLVE``), and service-account / external-account credentials from
``GOOGLE_APPLICATION_CREDENTIALS``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from credprovider.matching import keyring_lookup
from tests.fakes.gcp import FakeMetadata, FakeOAuth, FakeSts
from tests.fakes.http import FakeResponse, FakeServer, serve
from tests.fakes.tls import CertAuthority
from tests.helpers import request_bytes, run_listing_imports, run_plugin

PLUGIN = "auth-provider-gcp"
KSA_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZGV2OnB1bGxlciJ9.c2ln"
IDP = "https://container.googleapis.com/v1/projects/my-project/locations/us-central1/clusters/c1"
FIXED_KEYS = [
    "container.cloud.google.com",
    "gcr.io",
    "*.gcr.io",
    "*.pkg.dev",
    "container.cloud.google.com:443",
    "gcr.io:443",
    "*.gcr.io:443",
    "*.pkg.dev:443",
]


@pytest.fixture
def sts(test_ca: CertAuthority) -> Iterator[tuple[FakeSts, FakeServer]]:
    fake = FakeSts()
    with serve(fake, tls=test_ca.server_context("sts.googleapis.com")) as server:
        yield fake, server


def gcp_env(
    metadata_server: FakeServer,
    test_ca: CertAuthority | None = None,
    sts_server: FakeServer | None = None,
    **extra: str,
) -> dict[str, str]:
    env = {"GCE_METADATA_HOST": metadata_server.address}
    if test_ca is not None:
        env["REQUESTS_CA_BUNDLE"] = str(test_ca.bundle)
    if sts_server is not None:
        env["CREDPROVIDER_TEST_RESOLVE"] = f"sts.googleapis.com={sts_server.address}"
    env.update(extra)
    return env


@pytest.mark.parametrize(
    ("image", "extra_key"),
    [
        ("gcr.io/project/app", None),
        ("us.gcr.io/project/app", "us.gcr.io"),
        ("us-central1-docker.pkg.dev/project/repo/app", "us-central1-docker.pkg.dev"),
        ("container.cloud.google.com/x/y", None),
        ("gcr.io:443/project/app", None),
        ("eu.gcr.io:5000/project/app", "eu.gcr.io:5000"),
    ],
)
def test_gcr_flow_with_the_metadata_server(
    metadata: tuple[FakeMetadata, FakeServer], image: str, extra_key: str | None
) -> None:
    fake, server = metadata
    run = run_plugin(PLUGIN, request_bytes(image), ["get-credentials"], gcp_env(server))
    response = run.response
    expected_keys = FIXED_KEYS + ([extra_key] if extra_key else [])
    assert sorted(response["auth"]) == sorted(expected_keys)
    assert {json.dumps(v) for v in response["auth"].values()} == {
        json.dumps({"username": "_token", "password": fake.access_token})
    }
    assert response["cacheKeyType"] == "Global"
    assert response["cacheDuration"] == "29m59s"  # half of expires_in 3599
    assert keyring_lookup(list(response["auth"]), image), "no key matches the image"
    assert fake.paths == ["/computeMetadata/v1/instance/service-accounts/default/token"]


def test_through_the_bundle(metadata: tuple[FakeMetadata, FakeServer], use_bundle: bool) -> None:
    fake, server = metadata
    run = run_plugin(
        PLUGIN,
        request_bytes("gcr.io/p/a"),
        ["get-credentials", "--v=3"],
        gcp_env(server),
        use_bundle=use_bundle,
    )
    assert run.response["auth"]["gcr.io"]["password"] == fake.access_token
    assert fake.access_token not in run.stderr


@pytest.mark.parametrize(
    "image",
    ["registry.k8s.io/pause", "gcr.io.evil.com/x", "evil-pkg.dev/x", "docker.io/library/nginx"],
)
def test_non_google_registries_get_no_token(
    metadata: tuple[FakeMetadata, FakeServer], image: str
) -> None:
    fake, server = metadata
    run = run_plugin(PLUGIN, request_bytes(image), ["get-credentials"], gcp_env(server))
    assert run.response == {
        "kind": "CredentialProviderResponse",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "cacheKeyType": "Global",
        "cacheDuration": "0s",
    }
    assert fake.paths == []


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (
            FakeResponse.text("boom", status=500),
            "metadata server (http://127.0.0.1:{port}/computeMetadata/v1/): the server is "
            "unavailable (HTTP 500): boom",
        ),
        (
            FakeResponse.text("no such service account", status=404),
            "metadata server (http://127.0.0.1:{port}/computeMetadata/v1/): HTTP 404: no such "
            "service account",
        ),
        (
            FakeResponse(302, b"", {"Location": "http://169.254.169.254/elsewhere"}),
            "metadata server (http://127.0.0.1:{port}/computeMetadata/v1/): HTTP 302: ",
        ),
        (
            FakeResponse(200, b"x" * ((1 << 20) + 1), {"Content-Type": "text/plain"}),
            "is larger than 1048576 bytes",
        ),
        (
            FakeResponse.text("<html>oops</html>", headers={"Metadata-Flavor": "Google"}),
            "answered without an access_token",
        ),
        (FakeResponse.json({"token_type": "Bearer"}), "answered without an access_token"),
    ],
)
def test_metadata_failures_are_errors(
    metadata: tuple[FakeMetadata, FakeServer], fault: FakeResponse, message: str
) -> None:
    fake, server = metadata
    fake.token_fault = fault
    run = run_plugin(PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials"], gcp_env(server))
    assert (run.code, run.stdout) == (1, b"")
    assert len(run.error_lines) == 1
    assert message.format(port=server.address.rsplit(":", 1)[1]) in run.error_lines[0]


def test_server_errors_are_retried_a_bounded_number_of_times(
    metadata: tuple[FakeMetadata, FakeServer],
) -> None:
    fake, server = metadata
    fake.token_fault = FakeResponse.text("unavailable", status=503)
    run = run_plugin(PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials"], gcp_env(server))
    assert run.code == 1
    assert len(fake.paths) == 3


def test_unreachable_metadata_server_is_an_error() -> None:
    run = run_plugin(
        PLUGIN,
        request_bytes("gcr.io/p/a"),
        ["get-credentials"],
        {"GCE_METADATA_HOST": "127.0.0.1:9"},
    )
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines[0].startswith(
        f"{PLUGIN}: error: could not read the default service account's access token from the "
        "GCE metadata server (http://127.0.0.1:9/computeMetadata/v1/)"
    )


def test_v1_says_where_the_credentials_came_from(
    metadata: tuple[FakeMetadata, FakeServer],
) -> None:
    _fake, server = metadata
    run = run_plugin(
        PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials", "-v=1"], gcp_env(server)
    )
    host = server.url.removeprefix("http://")
    assert (
        "credentials: the VM's default service account, from the metadata server at " + host
    ) in run.stderr
    assert f"cacheDuration={run.response['cacheDuration']} " in run.stderr


def test_the_node_token_is_fetched_without_google_auth(
    metadata: tuple[FakeMetadata, FakeServer],
) -> None:
    """The common cache miss (node identity) pays for http.client, not google-auth and requests."""
    fake, server = metadata
    run = run_listing_imports(
        PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials"], gcp_env(server)
    )
    assert run.response["auth"]["gcr.io"]["password"] == fake.access_token
    heavy = {
        "google",
        "requests",
        "urllib3",
        "cryptography",
        "certifi",
        "charset_normalizer",
        "logging",
    }
    assert heavy.isdisjoint(run.roots), heavy.intersection(run.roots)


def test_the_metadata_server_is_reached_directly_not_through_a_proxy(
    metadata: tuple[FakeMetadata, FakeServer],
) -> None:
    fake, server = metadata
    proxies = {"HTTP_PROXY": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9"}
    run = run_plugin(
        PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials"], gcp_env(server, **proxies)
    )
    assert run.response["auth"]["gcr.io"]["password"] == fake.access_token


def test_the_old_metadata_root_variable_is_honoured(
    metadata: tuple[FakeMetadata, FakeServer],
) -> None:
    fake, server = metadata
    env = {"GCE_METADATA_HOST": "", "GCE_METADATA_ROOT": server.address}
    run = run_plugin(PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials"], env)
    assert run.response["auth"]["gcr.io"]["password"] == fake.access_token


def test_metadata_mtls_is_left_to_google_auth(metadata: tuple[FakeMetadata, FakeServer]) -> None:
    """GCE_METADATA_MTLS_MODE=strict goes through google-auth (its message: no certificates here)."""
    fake, server = metadata
    env = gcp_env(server, GCE_METADATA_MTLS_MODE="strict")
    run = run_plugin(PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials"], env)
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines == [
        f"{PLUGIN}: error: could not read the default service account's access token from the "
        "GCE metadata server over mTLS: mTLS certificates not found in strict mode."
    ]
    assert fake.paths == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["get-credentials", "--authFlow", "GCR"],
            'invalid value "GCR" for authFlow (must be one of "gcr", "dockercfg", or "dockercfg-url")',
        ),
        (["get-credentials", "-a", "dockerConfig"], 'invalid value "dockerConfig" for authFlow'),
        (
            ["get-credentials", "--identity-provider", IDP],
            "--project-id is required when --identity-provider is set",
        ),
        (
            ["get-credentials", "--authFlow=dockercfg", "--identity-provider", IDP],
            "--project-id is required when --identity-provider is set",
        ),
        (["fetch"], "unknown command 'fetch'"),
        (
            ["get-credentials", "--sts-endpoint", "http://sts.example.com/v1/token"],
            "must be an https:// URL",
        ),
        (["get-credentials", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_flag_validation(args: list[str], message: str) -> None:
    run = run_plugin(PLUGIN, request_bytes("gcr.io/p/a"), args)
    assert (run.code, run.stdout) == (1, b"")
    assert message in run.error_lines[0]


def test_identity_provider_with_another_flow_only_warns(
    metadata: tuple[FakeMetadata, FakeServer],
) -> None:
    fake, server = metadata
    fake.attributes["google-dockercfg"] = json.dumps({"r.io": {"username": "u", "password": "p"}})
    run = run_plugin(
        PLUGIN,
        request_bytes("r.io/a"),
        [
            "get-credentials",
            "--authFlow=dockercfg",
            "--identity-provider",
            IDP,
            "--project-id",
            "my-project",
        ],
        gcp_env(server),
    )
    assert run.code == 0
    assert "This flag only has effect when --authFlow=gcr." in run.stderr


@pytest.mark.parametrize(
    ("env", "duration", "key_type"),
    [
        ({"KUBE_SIDECAR_CACHE_DURATION": "1m"}, "1m0s", "Global"),
        ({"KUBE_SIDECAR_CACHE_TYPE": "image"}, "29m59s", "Image"),
        (
            {"KUBE_SIDECAR_CACHE_TYPE": "registry", "KUBE_SIDECAR_CACHE_DURATION": "0"},
            "0s",
            "Registry",
        ),
    ],
)
def test_upstream_cache_env_overrides(
    metadata: tuple[FakeMetadata, FakeServer], env: dict[str, str], duration: str, key_type: str
) -> None:
    _, server = metadata
    run = run_plugin(
        PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials"], gcp_env(server, **env)
    )
    assert (run.response["cacheDuration"], run.response["cacheKeyType"]) == (duration, key_type)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KUBE_SIDECAR_CACHE_TYPE": "Image"}, 'Unknown cache key "Image"'),
        ({"KUBE_SIDECAR_CACHE_DURATION": "1 hour"}, "KUBE_SIDECAR_CACHE_DURATION"),
    ],
)
def test_bad_cache_env_is_an_error_before_any_request(
    metadata: tuple[FakeMetadata, FakeServer], env: dict[str, str], message: str
) -> None:
    fake, server = metadata
    run = run_plugin(
        PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials"], gcp_env(server, **env)
    )
    assert run.code == 1 and message in run.stderr
    assert fake.paths == []


def _b64(text: str, pad: bool = True) -> str:
    encoded = base64.b64encode(text.encode()).decode()
    return encoded if pad else encoded.rstrip("=")


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"username": "user", "password": "pass", "email": "a@b.c"}, ("user", "pass")),
        ({"username": "ignored", "auth": _b64("from:auth")}, ("from", "auth")),
        ({"auth": _b64("unpadded:x", pad=False)}, ("unpadded", "x")),
        ({"auth": _b64("wrapped:line") + "\n"}, ("wrapped", "line")),
    ],
)
def test_dockercfg_flow(
    metadata: tuple[FakeMetadata, FakeServer], entry: dict[str, str], expected: tuple[str, str]
) -> None:
    fake, server = metadata
    fake.attributes["google-dockercfg"] = json.dumps({"private.example.com": entry})
    run = run_plugin(
        PLUGIN,
        request_bytes("private.example.com/app"),
        ["get-credentials", "--authFlow=dockercfg"],
        gcp_env(server),
    )
    assert run.response["auth"] == {
        "private.example.com": {"username": expected[0], "password": expected[1]}
    }
    assert run.response["cacheKeyType"] == "Global"
    # no expiry known, and it may rotate: a minute, not the config's defaultCacheDuration (hours)
    assert run.response["cacheDuration"] == "1m0s"


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        (
            json.dumps({"r.io": {"auth": "bm8gY29sb24="}}),
            "must be formatted as base64(username:password)",
        ),
        (json.dumps({"r.io": {"auth": "dXNlcjpwYXNz =="}}), "not valid base64"),
        (json.dumps({"r.io": {"auth": "!!!"}}), "not valid base64"),
        ("{not json", "not valid JSON"),
        (json.dumps(["r.io"]), "expected a JSON object"),
    ],
)
def test_dockercfg_errors(
    metadata: tuple[FakeMetadata, FakeServer], attribute: str, message: str
) -> None:
    fake, server = metadata
    fake.attributes["google-dockercfg"] = attribute
    run = run_plugin(
        PLUGIN,
        request_bytes("r.io/a"),
        ["get-credentials", "--authFlow=dockercfg"],
        gcp_env(server),
    )
    assert (run.code, run.stdout) == (1, b"")
    assert message in run.stderr


def test_dockercfg_attribute_missing_is_an_error(metadata: tuple[FakeMetadata, FakeServer]) -> None:
    _, server = metadata
    run = run_plugin(
        PLUGIN,
        request_bytes("r.io/a"),
        ["get-credentials", "--authFlow=dockercfg"],
        gcp_env(server),
    )
    assert run.code == 1
    assert "could not read instance attribute google-dockercfg" in run.stderr


def test_dockercfg_url_flow(metadata: tuple[FakeMetadata, FakeServer]) -> None:
    fake, server = metadata
    cfg = json.dumps({"r.io": {"username": "u", "password": "from-url-secret"}})
    with serve(lambda _: FakeResponse.text(cfg)) as cfg_server:
        fake.attributes["google-dockercfg-url"] = f"{cfg_server.url}/dockercfg.json"
        run = run_plugin(
            PLUGIN,
            request_bytes("r.io/a"),
            ["get-credentials", "--authFlow", "dockercfg-url"],
            gcp_env(server),
        )
        assert run.response["auth"] == {"r.io": {"username": "u", "password": "from-url-secret"}}
        assert (run.response["cacheKeyType"], run.response["cacheDuration"]) == ("Global", "1m0s")
        assert [r.path for r in cfg_server.requests] == ["/dockercfg.json"]
        assert "metadata-flavor" not in cfg_server.requests[0].headers


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("gs://bucket/cfg", "only http(s) URLs are supported"),
        ("http://127.0.0.1:9/cfg", "could not download the .dockercfg"),
    ],
)
def test_dockercfg_url_errors(
    metadata: tuple[FakeMetadata, FakeServer], url: str, message: str
) -> None:
    fake, server = metadata
    fake.attributes["google-dockercfg-url"] = url
    run = run_plugin(
        PLUGIN, request_bytes("r.io/a"), ["get-credentials", "-a", "dockercfg-url"], gcp_env(server)
    )
    assert run.code == 1 and message in run.stderr


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
    run = run_plugin(
        PLUGIN,
        request_bytes(
            "gcr.io/p/a", token=KSA_TOKEN, annotations={"iam.gke.io/enable-wi-image-pull": "true"}
        ),
        WI_ARGS,
        gcp_env(meta_server, test_ca, sts_server),
    )
    assert (run.code, run.stdout) == (1, b"")
    assert "no fallback to the node identity" in run.error_lines[0]
    assert "invalid_grant" in run.error_lines[0]
    assert meta.paths == []


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


def _service_account_key(path: Path, token_uri: str) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "my-project",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": "puller@my-project.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": token_uri,
            }
        )
    )
    return path


def test_service_account_key_file_off_gce(tmp_path: Path, use_bundle: bool) -> None:
    fake = FakeOAuth()
    with serve(fake) as oauth:
        key_file = _service_account_key(tmp_path / "key.json", f"{oauth.url}/token")
        run = run_plugin(
            PLUGIN,
            request_bytes("gcr.io/p/a"),
            ["get-credentials"],
            {"GOOGLE_APPLICATION_CREDENTIALS": str(key_file)},
            use_bundle=use_bundle,
        )
    assert run.response["auth"]["gcr.io"]["password"] == fake.access_token
    assert run.response["cacheDuration"] in ("29m59s", "29m58s")
    (form,) = fake.forms
    assert form["assertion"].count(".") == 2  # a signed JWT, made by google-auth with our key


def test_external_account_config_off_gce(
    tmp_path: Path, sts: tuple[FakeSts, FakeServer], test_ca: CertAuthority
) -> None:
    fake_sts, sts_server = sts
    subject = tmp_path / "oidc-token"
    subject.write_text(KSA_TOKEN)
    config = tmp_path / "wif.json"
    audience = (
        "//iam.googleapis.com/projects/123/locations/global/workloadIdentityPools/"
        "nodes/providers/onprem"
    )
    config.write_text(
        json.dumps(
            {
                "type": "external_account",
                "audience": audience,
                "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
                "token_url": "https://sts.googleapis.com/v1/token",
                "credential_source": {"file": str(subject)},
            }
        )
    )
    run = run_plugin(
        PLUGIN,
        request_bytes("gcr.io/p/a"),
        ["get-credentials"],
        {
            "GOOGLE_APPLICATION_CREDENTIALS": str(config),
            "REQUESTS_CA_BUNDLE": str(test_ca.bundle),
            "CREDPROVIDER_TEST_RESOLVE": f"sts.googleapis.com={sts_server.address}",
        },
    )
    assert run.response["auth"]["gcr.io"]["password"] == fake_sts.access_token
    (form,) = fake_sts.forms
    assert (form["audience"], form["subject_token"]) == (audience, KSA_TOKEN)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "GOOGLE_APPLICATION_CREDENTIALS="),
        ("{}", "GOOGLE_APPLICATION_CREDENTIALS="),
        ("not json", "GOOGLE_APPLICATION_CREDENTIALS="),
    ],
)
def test_bad_credentials_file_is_an_error(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "creds.json"
    if content is not None:
        path.write_text(content)
    run = run_plugin(
        PLUGIN,
        request_bytes("gcr.io/p/a"),
        ["get-credentials"],
        {"GOOGLE_APPLICATION_CREDENTIALS": str(path)},
    )
    assert (run.code, run.stdout) == (1, b"")
    assert message in run.error_lines[0]

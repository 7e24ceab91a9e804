"""The gcr flow with the node's metadata-server token: which registries get it, under which keys,
and what a failing metadata server says."""

from __future__ import annotations

import json
import os

import pytest

from credprovider.gcp.metadata import NOT_ON_GCE
from credprovider.runtime.matching import keyring_lookup
from emulators.gcp import FakeMetadata
from emulators.http import FakeResponse, FakeServer
from emulators.kubelet_exec import FIFO, request_bytes, run_plugin
from emulators.tls import CertAuthority
from tests.helpers import run_listing_imports
from tests.integration.gcp.common import FIXED_KEYS, PLUGIN, gcp_env


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
            "is larger than 1 MiB",
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


@pytest.mark.parametrize(
    ("host", "said"),
    [
        ("[::1", "usable"),
        ("metadata:99999", "usable"),
        ("h:" + "9" * 5000, "usable"),
        # a path, a query, a user and password, a space, a control byte: another URL than the root
        ("h/x?y", "'h/x?y' is not host[:port]"),
        ("user:metadata-secret@127.0.0.1:1", "'…@127.0.0.1:1' is not host[:port]"),
        (" ", "' ' is not host[:port]"),
        ("a\x1bb", "'a\\x1bb' is not host[:port]"),
    ],
)
def test_a_metadata_host_that_names_no_address_says_to_fix_it(host: str, said: str) -> None:
    """GCE_METADATA_HOST that no request can go to is the setting's fault: the line says to fix
    it, at once (not "check that it is reachable", after three attempts), a password in it
    never said."""
    run = run_plugin(PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials", "-v=2"],
                     {"GCE_METADATA_HOST": host})  # fmt: skip
    assert (run.code, run.stdout) == (1, b"")
    (line,) = [line for line in run.error_lines if ": error: " in line]
    assert line.endswith(
        "; fix GCE_METADATA_HOST (or GCE_METADATA_ROOT) in the provider's env: host[:port]"
    ), line
    assert said in line and len(line) < 600 and "attempt 2" not in run.stderr
    assert "metadata-secret" not in run.stderr


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


@pytest.mark.skipif(os.geteuid() != 0, reason="the mTLS files' fixed path needs an overlay of /run")
@pytest.mark.parametrize(
    ("root_crt", "says"),
    [
        (FIFO, "is a FIFO, not a regular file"),  # OpenSSL waited on it to the deadline
        (b"x" * (2 << 20), "is larger than 1 MiB"),
    ],
)
@pytest.mark.parametrize("mode", ["strict", "default"])
def test_an_mtls_file_that_is_no_file_is_one_line_at_once(
    metadata: tuple[FakeMetadata, FakeServer], root_crt: bytes, says: str, mode: str
) -> None:
    """The metadata server's mTLS files (google-auth loads them from /run/google-mds-mtls into
    OpenSSL) are checked first, as every file on the exec path: one line naming the file and the
    mode, never a wait, and the metadata server is never asked."""
    fake, server = metadata
    root = "/run/google-mds-mtls/root.crt"
    run = run_plugin(
        PLUGIN,
        request_bytes("gcr.io/p/a"),
        ["get-credentials", "--deadline=20s"],
        gcp_env(server, GCE_METADATA_MTLS_MODE=mode),
        node_files={root: root_crt, "/run/google-mds-mtls/client.key": b"not read"},
    )
    assert (run.code, run.stdout) == (1, b""), run.stderr
    assert run.error_lines == [
        f"{PLUGIN}: error: the metadata server's mTLS file {root} (GCE_METADATA_MTLS_MODE={mode}) "
        f"cannot be used: {says}; fix it (the guest agent writes it) or set "
        "GCE_METADATA_MTLS_MODE=none"
    ]
    assert run.seconds < 10
    assert fake.paths == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the mTLS files' fixed path needs an overlay of /run")
def test_an_mtls_mode_from_outside_is_quoted_short(
    metadata: tuple[FakeMetadata, FakeServer],
) -> None:
    """The mode is the env's: a 100 kB one (none of google-auth's modes) is cut in the line,
    whose fix still ends it."""
    _, server = metadata
    run = run_plugin(
        PLUGIN,
        request_bytes("gcr.io/p/a"),
        ["get-credentials"],
        gcp_env(server, GCE_METADATA_MTLS_MODE="x" * 100_000),
        node_files={"/run/google-mds-mtls/root.crt": FIFO, "/run/google-mds-mtls/client.key": b""},
    )
    (line,) = run.error_lines
    assert len(line) < 600 and "(100000 bytes)" in line, line
    assert line.endswith("or unset it (none: the metadata server over plain HTTP)"), line


@pytest.mark.parametrize("mode", ["always", "", "yes"])
def test_an_mtls_mode_google_auth_has_not_is_said_as_such(
    metadata: tuple[FakeMetadata, FakeServer], mode: str
) -> None:
    """A mode none of google-auth's (strict, none, default): google-auth's ValueError was said as
    a failure to read the token over mTLS, which was never tried. The metadata server is not
    asked."""
    fake, server = metadata
    run = run_plugin(PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials"],
                     gcp_env(server, GCE_METADATA_MTLS_MODE=mode))  # fmt: skip
    (line,) = run.error_lines
    assert line == (
        f"{PLUGIN}: error: GCE_METADATA_MTLS_MODE='{mode}' is none of strict, none, default; fix "
        "it in the provider's env, or unset it (none: the metadata server over plain HTTP)"
    )
    assert fake.paths == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the mTLS files' fixed path needs an overlay of /run")
def test_metadata_over_mtls_off_gce_says_what_to_do(
    test_ca: CertAuthority, use_bundle: bool
) -> None:
    """GCE_METADATA_MTLS_MODE=strict with the guest agent's files in place, but the metadata
    server's name does not resolve (a network namespace of its own: no DNS at all): the line says
    what the stdlib route says off GCE, not only that it was unreachable."""
    cert, key = test_ca.issue("gce-guest")
    run = run_plugin(
        PLUGIN,
        request_bytes("gcr.io/p/a"),
        ["get-credentials", "--deadline=20s"],
        {"GCE_METADATA_MTLS_MODE": "strict", "GCE_METADATA_HOST": None},
        node_files={
            "/run/google-mds-mtls/root.crt": test_ca.bundle.read_bytes(),
            "/run/google-mds-mtls/client.key": cert.read_bytes() + key.read_bytes(),
        },
        own_network=True,
        use_bundle=use_bundle,
    )
    assert (run.code, run.stdout) == (1, b""), run.stderr
    (line,) = run.error_lines
    assert line.startswith(
        f"{PLUGIN}: error: could not read the default service account's access token from the "
        "GCE metadata server over mTLS: "
    ), line
    assert line.endswith(NOT_ON_GCE), line

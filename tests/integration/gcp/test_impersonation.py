"""``--impersonate-service-account``: the plugin's usual token (metadata server, key file, Workload
Identity) exchanged at the IAM Credentials API emulator (TLS, test CA) for the target's, through
google-auth's impersonated credentials; each refusal is one line naming both identities and the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emulators.gcp import (
    NODE_ACCOUNT,
    FakeIamCredentials,
    FakeOAuth,
    google_error,
    write_service_account_key,
)
from emulators.harness import GCP_PULLER, Emulator
from emulators.http import FakeResponse, serve
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.integration.gcp.common import IDP, KSA_TOKEN, PLUGIN, POOL

FLAG = "--impersonate-service-account"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
HOP = "hop@broker-project.iam.gserviceaccount.com"
HOP2 = "hop2@broker-project.iam.gserviceaccount.com"
NOBODY = "nobody@registry-project.iam.gserviceaccount.com"
NODE = f"the VM's default service account {NODE_ACCOUNT}"
ROLE = "roles/iam.serviceAccountTokenCreator"
PREFIX = f"{PLUGIN}: error: "


def _iam(google: Emulator) -> FakeIamCredentials:
    fake: Any = google.fakes["iam"]
    return fake


def _pull(google: Emulator, flag: str, use_bundle: bool = False, **env: str) -> Any:
    return run_plugin(
        PLUGIN,
        request_bytes("europe-docker.pkg.dev/registry-project/repo/app"),
        ["get-credentials", "-v=1", f"{FLAG}={flag}"],
        {**google.env, **env},
        use_bundle=use_bundle,
    )


def test_the_node_account_pulls_as_the_target(google: Emulator, use_bundle: bool) -> None:
    iam = _iam(google)
    run = _pull(google, GCP_PULLER, use_bundle)
    ((token, account),) = iam.issued.items()
    assert account == GCP_PULLER
    auth = run.response["auth"]
    assert auth["europe-docker.pkg.dev"] == {"username": "_token", "password": token}
    assert auth["*.pkg.dev"]["password"] == token
    assert run.response["cacheDuration"] in ("30m0s", "29m59s")  # half the token's hour
    (call,) = iam.calls
    assert call == {
        "target": GCP_PULLER,
        "bearer": "ya29.node-access-token-0123456789",  # the metadata server's token
        "delegates": [],
        "scope": [CLOUD_PLATFORM],
        "lifetime": "3600s",
    }
    assert (
        f"{PLUGIN}: pulling as {GCP_PULLER}: the VM's default service account → {GCP_PULLER} "
        "(impersonated)"
    ) in run.stderr_lines
    assert token not in run.stderr and call["bearer"] not in run.stderr


def test_a_delegation_chain_is_walked_in_gclouds_order(google: Emulator, use_bundle: bool) -> None:
    iam = _iam(google)
    iam.allow(NODE_ACCOUNT, HOP, HOP2, GCP_PULLER)
    run = _pull(google, f"{HOP},{HOP2},{GCP_PULLER}", use_bundle)
    assert run.code == 0, run.stderr
    (call,) = iam.calls
    assert call["target"] == GCP_PULLER
    assert call["delegates"] == [
        f"projects/-/serviceAccounts/{HOP}",
        f"projects/-/serviceAccounts/{HOP2}",
    ]


def test_a_key_file_is_the_source_off_gce(google: Emulator, tmp_path: Path) -> None:
    iam, oauth = _iam(google), FakeOAuth()
    iam.allow("puller@my-project.iam.gserviceaccount.com", GCP_PULLER)
    iam.callers[oauth.access_token] = "puller@my-project.iam.gserviceaccount.com"
    with serve(oauth) as server:
        key = tmp_path / "key.json"
        write_service_account_key(key, f"{server.url}/token")
        run = _pull(google, GCP_PULLER, GOOGLE_APPLICATION_CREDENTIALS=str(key))
    assert run.response["auth"]["*.pkg.dev"]["password"].startswith("ya29.as-puller-")
    assert [call["bearer"] for call in iam.calls] == [oauth.access_token]
    assert google.fakes["metadata"].paths == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "federation",
    [["--identity-provider", IDP, "--project-id", "my-project"], ["--sts-audience", POOL]],
    ids=["gke", "pool"],
)
def test_workload_identity_is_the_source_for_an_opted_in_pod(
    google: Emulator, federation: list[str]
) -> None:
    """On GKE, or off it through a workload identity pool: the pod's own identity, federated,
    then impersonating the service account that may read the registry."""
    iam, sts = _iam(google), google.fakes["sts"]
    iam.callers[sts.access_token] = "principal://iam.googleapis.com/ns/dev/sa/puller"  # type: ignore[attr-defined]
    iam.allow("principal://iam.googleapis.com/ns/dev/sa/puller", GCP_PULLER)
    run = run_plugin(
        PLUGIN,
        request_bytes(
            "gcr.io/registry-project/app",
            token=KSA_TOKEN,
            annotations={"iam.gke.io/enable-wi-image-pull": "true"},
        ),
        ["get-credentials", *federation, FLAG, GCP_PULLER],
        google.env,
    )
    assert run.response["auth"]["gcr.io"]["password"].startswith("ya29.as-puller-")
    assert sts.forms[-1]["audience"] == (  # type: ignore[attr-defined]
        POOL
        if "--sts-audience" in federation
        else f"identitynamespace:my-project.svc.id.goog:{IDP}"
    )
    assert [call["bearer"] for call in iam.calls] == [sts.access_token]  # type: ignore[attr-defined]


def _no_grant(iam: FakeIamCredentials) -> None:
    iam.accounts.add(NOBODY)


def _broken_link(iam: FakeIamCredentials) -> None:
    iam.allow(NODE_ACCOUNT, HOP)  # the node may act as HOP, but HOP has no role on the target


def _disabled(iam: FakeIamCredentials) -> None:
    iam.disabled_project = "123456789012"


def _unknown_caller(iam: FakeIamCredentials) -> None:
    iam.callers.clear()


def _fault(response: FakeResponse) -> Any:
    def apply(iam: FakeIamCredentials) -> None:
        iam.fault = response

    return apply


REFUSALS = [
    (
        "no-role-on-the-target",
        _no_grant,
        NOBODY,
        f"cannot impersonate {NOBODY} as {NODE}: the IAM Credentials API refused (HTTP 403 "
        f"PERMISSION_DENIED); grant {NODE} {ROLE} on {NOBODY}",
    ),
    (
        "no-such-account",
        lambda iam: None,
        NOBODY,
        f"cannot impersonate {NOBODY} as {NODE}: the service account {NOBODY} does not exist "
        f"(HTTP 404 NOT_FOUND); check the emails in {FLAG}",
    ),
    (
        "no-such-delegate",
        lambda iam: None,
        f"{HOP},{GCP_PULLER}",
        f"cannot impersonate {GCP_PULLER} as {NODE} through {HOP}: the delegate {HOP} does not "
        f"exist (HTTP 404 NOT_FOUND); check the emails in {FLAG}",
    ),
    (
        "broken-chain",
        _broken_link,
        f"{HOP},{GCP_PULLER}",
        f"cannot impersonate {GCP_PULLER} as {NODE} through {HOP}: a link of the chain {NODE} → "
        f"{HOP} → {GCP_PULLER} is not granted (HTTP 403 PERMISSION_DENIED); each account in the "
        f"chain needs {ROLE} on the next one",
    ),
    (
        "api-disabled",
        _disabled,
        GCP_PULLER,
        f"cannot impersonate {GCP_PULLER} as {NODE}: the IAM Service Account Credentials API is "
        "disabled in project 123456789012 (HTTP 403 PERMISSION_DENIED SERVICE_DISABLED); enable "
        "iamcredentials.googleapis.com in project 123456789012, then retry",
    ),
    (
        "source-token-refused",
        _unknown_caller,
        GCP_PULLER,
        f"cannot impersonate {GCP_PULLER} as {NODE}: the IAM Credentials API did not accept the "
        "source's token (HTTP 401 UNAUTHENTICATED); the source credentials are not valid for "
        "Google APIs (expired, or of another audience)",
    ),
    (
        "unavailable",
        _fault(google_error(503, "UNAVAILABLE", "The service is currently unavailable.")),
        GCP_PULLER,
        f"cannot impersonate {GCP_PULLER} as {NODE}: the IAM Credentials API answered HTTP 503 "
        "UNAVAILABLE: The service is currently unavailable.; the service is failing or "
        "throttling; the kubelet retries on the next pull (if it persists, check the service's "
        "status)",
    ),
    (
        "a-proxy-page",
        _fault(FakeResponse.text("<html>Bad Gateway</html>", status=502)),
        GCP_PULLER,
        f"cannot impersonate {GCP_PULLER} as {NODE}: the IAM Credentials API answered HTTP 502: "
        "<html>Bad Gateway</html>; something other than the service may have answered: check "
        "HTTPS_PROXY, HTTP_PROXY and NO_PROXY in the provider's env",
    ),
    (
        "an-expiry-that-is-a-number",
        _fault(FakeResponse.json({"accessToken": "ya29.x", "expireTime": 12})),
        GCP_PULLER,
        f"cannot impersonate {GCP_PULLER} as the VM's default service account: the IAM "
        "Credentials API answered without a usable accessToken and expireTime; something other "
        "than the service may have answered: check HTTPS_PROXY, HTTP_PROXY and NO_PROXY in the "
        "provider's env",
    ),
    (
        "a-redirect-to-another-host",
        _fault(FakeResponse(302, headers={"Location": "https://127.0.0.1:9/mint?x=1"})),
        GCP_PULLER,
        f"cannot impersonate {GCP_PULLER} as the VM's default service account at the IAM "
        "Credentials API: the answer from https://iamcredentials.googleapis.com/v1/projects/-/"
        f"serviceAccounts/{GCP_PULLER}:generateAccessToken is a redirect (HTTP 302 to "
        "'https://127.0.0.1:9/mint'), which a token endpoint never sends: it is not followed; "
        "something other than the service may have answered: check HTTPS_PROXY, HTTP_PROXY and "
        "NO_PROXY in the provider's env",
    ),
    (
        "an-access-token-that-is-a-list",
        _fault(
            FakeResponse.json({"accessToken": ["a", "b"], "expireTime": "2030-01-01T00:00:00Z"})
        ),
        GCP_PULLER,
        f"cannot impersonate {GCP_PULLER} as the VM's default service account: the IAM "
        "Credentials API answered without a usable accessToken (a non-empty string); something "
        "other than the service may have answered: check HTTPS_PROXY, HTTP_PROXY and NO_PROXY in "
        "the provider's env",
    ),
    (
        "an-access-token-that-is-a-number",
        _fault(FakeResponse.json({"accessToken": 12345, "expireTime": "2030-01-01T00:00:00Z"})),
        GCP_PULLER,
        f"cannot impersonate {GCP_PULLER} as the VM's default service account: the IAM "
        "Credentials API answered without a usable accessToken (a non-empty string); something "
        "other than the service may have answered: check HTTPS_PROXY, HTTP_PROXY and NO_PROXY in "
        "the provider's env",
    ),
    (
        "no-token-in-the-answer",
        _fault(FakeResponse.json({"expireTime": "2030-01-01T00:00:00Z"})),
        GCP_PULLER,
        f"cannot impersonate {GCP_PULLER} as the VM's default service account: the IAM "
        "Credentials API answered without a usable accessToken and expireTime; something other "
        "than the service may have answered: check HTTPS_PROXY, HTTP_PROXY and NO_PROXY in the "
        "provider's env",
    ),
]


@pytest.mark.parametrize(
    ("seed", "flag", "line"), [case[1:] for case in REFUSALS], ids=[case[0] for case in REFUSALS]
)
def test_each_refusal_is_one_line_naming_both_identities(
    google: Emulator, seed: Any, flag: str, line: str, use_bundle: bool
) -> None:
    seed(_iam(google))
    run = _pull(google, flag, use_bundle)
    assert (run.code, run.stdout) == (1, b"")
    errors = [entry for entry in run.stderr_lines if ": error: " in entry]
    assert errors == [PREFIX + line]
    assert "ya29." not in run.stderr


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            [f"{FLAG}={GCP_PULLER},"],
            f"{FLAG} '{GCP_PULLER},' has an empty entry: give one or more service account emails "
            "separated by commas, the account to pull as last",
        ),
        (
            [FLAG, "puller"],
            f"{FLAG}: 'puller' is not a service account email "
            "(name@project.iam.gserviceaccount.com) or unique id",
        ),
        (
            [FLAG, GCP_PULLER, "--authFlow", "dockercfg"],
            f"{FLAG} needs --authFlow gcr: a .dockercfg holds its own credentials",
        ),
        ([FLAG], f"argument {FLAG}: expected one argument (see --help)"),
    ],
)
def test_a_mistyped_flag_is_refused_before_any_call(
    google: Emulator, args: list[str], line: str
) -> None:
    run = run_plugin(PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials", *args], google.env)
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines == [PREFIX + line]
    assert _iam(google).calls == []


def test_a_throttled_impersonation_waits_and_is_answered(
    google: Emulator, use_bundle: bool
) -> None:
    """The IAM Credentials API said 429 with Retry-After: the plugin waits that long (google-auth
    never sees the answer, so never retries it on its own), then gets its token: two calls."""
    iam = _iam(google)
    iam.faults = [google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded.")]
    iam.faults[0].headers["Retry-After"] = "1"
    run = _pull(google, GCP_PULLER, use_bundle)
    assert run.code == 0, run.stderr
    ((token, _),) = iam.issued.items()
    assert run.response["auth"]["*.pkg.dev"]["password"] == token
    assert len(iam.calls) == 2
    assert "generateAccessToken: throttled 1 time(s), waited " in run.stderr


def test_an_impersonation_throttled_to_the_end_is_one_line(google: Emulator) -> None:
    iam = _iam(google)
    iam.fault = google_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded.")
    run = run_plugin(
        PLUGIN,
        request_bytes("europe-docker.pkg.dev/registry-project/repo/app"),
        ["get-credentials", "--deadline=5s", f"{FLAG}={GCP_PULLER}"],
        google.env,
    )
    assert (run.code, run.stdout) == (1, b"")
    assert len(iam.calls) >= 3  # retried over the deadline, not given up at the first answer
    assert run.error_lines == [
        f"{PREFIX}cannot impersonate {GCP_PULLER} as the VM's default service account: HTTP 429 "
        "(throttled); still "
        "throttled when the plugin's time ran out, the kubelet retries on the next pull"
    ]

"""doctor's reading of what the kubelet says (its version, its config hash metric, its log lines)
and the identity probe, against real HTTP answers on loopback."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate

import pytest

from credprovider.cloud import IdentityProbe
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.doctor.identity import SKEW_FAIL_SECONDS, clock_skew, probe
from credprovider.tool.doctor.live import lookup_advice, lookup_failures
from credprovider.tool.node.kubelet_facts import config_hash, parse_version, stamped
from emulators.http import FakeRequest, FakeResponse, serve


def _absent(path: str) -> bool:
    """The node has no such path (doctor's ``exists``)."""
    return False


# Lines as the kubelet v1.36 writes them (klog text and --logging-format=json).
KLOG_LINE = (
    'E1124 10:41:07.512034    4242 plugin.go:418] "Failed to provide credentials for image" '
    'err="failed to get credential from external registry credential provider: error execing '
    "credential provider plugin ecr-credential-provider for image 1.dkr.ecr.us-west-2."
    'amazonaws.com/app: exit status 1: ecr-credential-provider: \\"no identity\\"" '
    'provider="ecr-credential-provider" image="1.dkr.ecr.us-west-2.amazonaws.com/app"'
)
JSON_LINE = (
    '{"ts":1764000000.5,"caller":"plugin/plugin.go:418","msg":"Failed to provide credentials for '
    'image","provider":"auth-provider-gcp","image":"gcr.io/p/a","err":"context deadline exceeded"}'
)


def test_the_kubelets_failed_lookups_are_read_from_both_log_formats() -> None:
    lines = [
        'I1124 10:41:07.000000    4242 kubelet.go:1] "Starting kubelet"',
        KLOG_LINE,
        JSON_LINE,
        '{"msg": "Failed to provide credentials for image" broken json',
        # anyone's line in the log: nested past Python's recursion (RecursionError once)
        '{"msg": "Failed to provide credentials for image", "x": ' + "[" * 200_000,
    ]
    first, second = lookup_failures(lines)
    assert (first.provider, first.when) == ("ecr-credential-provider", "1124 10:41:07")
    assert first.error.endswith('exit status 1: ecr-credential-provider: "no identity"')
    assert (second.provider, second.error) == ("auth-provider-gcp", "context deadline exceeded")


# The kubelet v1.36.4's line when the API server refuses the node a provider's audience (recorded
# in the control-plane e2e run).
AUDIENCE_REFUSED_LINE = (
    'E1125 12:13:31.009169      41 plugin.go:416] "Failed to provide credentials for image" '
    'err="failed to get service account token: failed to fetch token: serviceaccounts \\"gcp-wi\\" '
    'is forbidden: audience \\"ungranted-project.svc.id.goog\\" not found in pod spec volume, '
    'system:node:node-1 is not authorized to request tokens for this audience" '
    'provider="auth-provider-gcp-ungranted" image="europe-docker.pkg.dev/p/repo/app" '
    'pod="default/ungranted" serviceAccount="default/gcp-wi"'
)


@pytest.mark.parametrize(
    ("line", "advice"),
    [
        (
            AUDIENCE_REFUSED_LINE,
            "let the nodes request tokens for the audience ungranted-project.svc.id.goog: an RBAC "
            "rule with verb request-serviceaccounts-token-audience on resource "
            'ungranted-project.svc.id.goog (apiGroups [""]), bound to the group system:nodes '
            "(docs/operators.md)",
        ),
        (KLOG_LINE, "credprovider get IMAGE replays the lookup and says why"),
        (JSON_LINE, "credprovider get IMAGE replays the lookup and says why"),
    ],
)
def test_each_failed_lookup_gets_the_fix_for_its_cause(line: str, advice: str) -> None:
    (failure,) = lookup_failures([line])
    assert lookup_advice(failure.error) == advice


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Kubernetes v1.36.4\n", ("v1.36.4", (1, 36))),
        ("Kubernetes v1.33.0-eks-1a2b3c\n", ("v1.33.0-eks-1a2b3c", (1, 33))),
        ("Python 3.11.2\n", None),
        ("", None),
    ],
)
def test_the_version_the_kubelet_prints(text: str, expected: object) -> None:
    assert parse_version(text) == expected


def test_a_kubelet_without_a_version_stamp_gives_no_release() -> None:
    """A build of ``master`` says v0.0.0: no rule of a release follows from it (undo would
    otherwise take it for older than 1.31 and put an in-tree flag back without --force)."""
    assert stamped(parse_version("Kubernetes v0.0.0-master+$Format:%H$\n")) is None
    assert stamped(parse_version("Kubernetes v1.30.5\n")) == (1, 30)
    assert stamped(None) is None


def test_the_config_hash_frames_every_file_with_its_length() -> None:
    """Two files are not one file of both: each is framed by its 64-bit big-endian length."""
    one = config_hash([b"ab", b"c"])
    assert one == "sha256:" + hashlib.sha256(b"\0" * 7 + b"\2ab" + b"\0" * 7 + b"\1c").hexdigest()
    assert one != config_hash([b"abc"]) and one != config_hash([b"a", b"bc"])


def test_clock_skew_from_a_date_header() -> None:
    now = time.time()
    assert abs((clock_skew(formatdate(now + 600, usegmt=True), now) or 0) - 600) < 2
    assert clock_skew("not a date", now) is None and clock_skew("", now) is None


@pytest.fixture
def endpoint() -> Iterator[dict[str, object]]:
    """An endpoint whose answer each test sets."""
    settings: dict[str, object] = {"status": 200, "headers": {}, "body": "ok"}

    def handler(request: FakeRequest) -> FakeResponse:
        settings["seen"] = (request.method, request.path, request.header("metadata-flavor"))
        return FakeResponse.text(
            str(settings["body"]),
            status=int(str(settings["status"])),
            headers=dict(settings["headers"]),  # type: ignore[call-overload]
        )

    with serve(handler) as server:
        settings["url"] = server.url
        yield settings


def _probe(url: str, **fields: object) -> IdentityProbe:
    return IdentityProbe(what="the endpoint", method="GET", url=url, silence="the fix", **fields)  # type: ignore[arg-type]


def test_a_reachable_endpoint_passes_and_shows_only_what_it_may(
    endpoint: dict[str, object],
) -> None:
    endpoint["body"] = "123-compute@developer.gserviceaccount.com"
    [(status, message, _)] = probe(_probe(f"{endpoint['url']}/email", show_body=True), {})
    assert status == "pass" and message.endswith(": 123-compute@developer.gserviceaccount.com")
    endpoint["body"] = "AQAEAL-a-session-token"
    [(status, message, _)] = probe(_probe(f"{endpoint['url']}/token"), {})
    assert status == "pass" and "AQAEAL" not in message


def test_a_wrong_answer_or_a_missing_header_fails_with_the_fix(
    endpoint: dict[str, object],
) -> None:
    endpoint["status"] = 404
    [(status, message, fix)] = probe(_probe(f"{endpoint['url']}/"), {})
    assert (status, fix) == ("fail", "the fix") and "answered HTTP 404" in message
    endpoint["status"] = 200
    wants = _probe(f"{endpoint['url']}/", expect_header=("Metadata-Flavor", "Google"))
    [(status, message, _)] = probe(wants, {})
    assert status == "fail" and "without 'Metadata-Flavor: Google'" in message


@pytest.mark.parametrize(("offset", "status"), [(10, None), (90, "warn"), (-900, "fail")])
def test_a_skewed_clock_is_caught_by_the_endpoints_date(
    endpoint: dict[str, object], offset: int, status: str | None
) -> None:
    endpoint["headers"] = {"Date": formatdate(time.time() + offset, usegmt=True)}
    results = probe(_probe(f"{endpoint['url']}/"), {})
    assert results[0][0] == "pass"
    if status is None:
        assert len(results) == 1
    else:
        assert results[1][0] == status and ("ahead of" if offset < 0 else "behind") in results[1][1]
        assert (abs(offset) > SKEW_FAIL_SECONDS) == (status == "fail")


def test_an_endpoint_that_accepts_and_never_answers_is_cut_short() -> None:
    """IMDSv2 with hop limit 1, seen from one hop too far: the PUT is sent, its answer never
    arrives. The probe gives up after its short timeout and says what that means."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    thread.start()
    aws = PLUGINS["aws"].identity
    assert aws is not None
    found = aws(
        {"AWS_EC2_METADATA_SERVICE_ENDPOINT": f"http://127.0.0.1:{port}"},
        [],
        lambda p: None,
        _absent,
    )
    assert isinstance(found, IdentityProbe) and found.method == "PUT"
    started = time.monotonic()
    [(status, message, fix)] = probe(found, {})
    assert time.monotonic() - started < 10
    assert status == "fail" and "unreachable" in message and "hop-limit 2" in fix
    for sock in [*accepted, listener]:
        sock.close()


def test_test_mode_never_sends_a_probe_off_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite runs in loopback-only mode: a probe of the real metadata address is not sent
    (the connect guard would fail this test if it were)."""
    aws = PLUGINS["aws"].identity
    assert aws is not None
    found = aws({}, [], lambda p: None, _absent)
    assert isinstance(found, IdentityProbe) and "169.254.169.254" in found.url
    [(status, message, _)] = probe(found, {"CREDPROVIDER_TEST_LOOPBACK_ONLY": "1"})
    assert status == "info" and "not probed" in message and "loopback-only" in message


@pytest.mark.parametrize(
    ("key", "environ", "node_file", "expected"),
    [
        ("aws", {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s"}, None, "keys in the environment"),
        ("aws", {"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token"}, None, "web identity token"),
        ("aws", {"AWS_EC2_METADATA_DISABLED": "true"}, None, "AWS_EC2_METADATA_DISABLED"),
        ("gcp", {"GOOGLE_APPLICATION_CREDENTIALS": "/etc/key.json"}, None, "cannot read it"),
        ("azure", {}, None, "cannot be read"),
        ("azure", {}, '{"aadClientId": "app-1", "aadClientSecret": "s"}', "service principal app-1"),
        ("azure", {"IDENTITY_ENDPOINT": "http://x"}, '{"useManagedIdentityExtension": true}', "IDENTITY_ENDPOINT"),
        ("azure", {}, "{not json", "not probed"),
    ],
)  # fmt: skip
def test_identities_with_nothing_to_probe_say_why(
    key: str, environ: dict[str, str], node_file: str | None, expected: str
) -> None:
    plugin = PLUGINS[key]
    assert plugin.identity is not None
    found = plugin.identity(environ, list(plugin.args), lambda path: node_file, _absent)
    assert isinstance(found, str) and expected in found, found


def test_the_azure_arc_agent_is_probed_as_the_plugin_first_asks_it() -> None:
    """On an Arc-enabled server the plugin asks the agent (IDENTITY_ENDPOINT with IMDS_ENDPOINT),
    which answers 401 naming its key file: doctor sends that first request, reads no key and
    fetches no token. Something else at that address (IMDS, a proxy's 401) is said as such."""
    from emulators.azure import FakeArc, FakeImds

    azure = PLUGINS["azure"].identity
    assert azure is not None
    arc = FakeArc()
    with serve(arc) as server:
        environ = {
            "IDENTITY_ENDPOINT": f"{server.url}/metadata/identity/oauth2/token",
            "IMDS_ENDPOINT": server.url,
        }
        found = azure(environ, ["/etc/kubernetes/azure.json"], lambda path: _MANAGED, _absent)
        assert isinstance(found, IdentityProbe)
        [(status, message, _)] = probe(found, {})
    assert status == "pass", message
    assert message.startswith(f"the managed identity through the Azure Arc agent ({server.url}/")
    assert arc.queries == [
        {"api-version": "2020-06-01", "resource": "https://containerregistry.azure.net"}
    ]
    assert arc.keys_given == []  # no key read, no token asked for
    imds = FakeImds()
    with serve(imds) as server:
        elsewhere = dataclasses.replace(found, url=f"{server.url}/metadata/identity/oauth2/token")
        [(status, message, fix)] = probe(elsewhere, {})
    assert status == "fail" and "answered HTTP 200 (a working one answers 401)" in message
    assert imds.access_token not in message and "azcmagent show" in fix
    with serve(lambda _: FakeResponse(401, b"", {"WWW-Authenticate": "Bearer"})) as server:
        elsewhere = dataclasses.replace(found, url=f"{server.url}/metadata/identity/oauth2/token")
        [(status, message, _)] = probe(elsewhere, {})
    assert status == "fail" and "without 'WWW-Authenticate: Basic realm=...'" in message


def test_an_installed_arc_agent_is_probed_at_its_address_without_the_variables() -> None:
    """The agent installed (its binary on the node) and no IDENTITY_ENDPOINT in the kubelet's
    environment: the plugin asks the agent at its fixed address, and so does doctor; the
    variable, where set, is still the address."""
    from credprovider.azure.imds import ARC_DEFAULT_ENDPOINT, ARC_HIMDS

    azure = PLUGINS["azure"].identity
    assert azure is not None
    args = ["/etc/kubernetes/azure.json"]
    found = azure({}, args, lambda path: _MANAGED, lambda path: path == ARC_HIMDS)
    assert isinstance(found, IdentityProbe)
    assert found.url.startswith(f"{ARC_DEFAULT_ENDPOINT}?api-version=2020-06-01&")
    assert found.what.startswith("the managed identity through the Azure Arc agent")
    elsewhere = {"IDENTITY_ENDPOINT": "http://127.0.0.1:9/token"}
    moved = azure(elsewhere, args, lambda path: _MANAGED, lambda path: path == ARC_HIMDS)
    assert isinstance(moved, IdentityProbe) and moved.url.startswith("http://127.0.0.1:9/token?")
    imds = azure({}, args, lambda path: _MANAGED, _absent)
    assert isinstance(imds, IdentityProbe) and "through IMDS" in imds.what


_MANAGED = '{"cloud": "AzurePublicCloud", "useManagedIdentityExtension": true}'


def test_the_images_crictl_lists() -> None:
    """``crictl images -o json`` (cri-tools v1.34): tags, else the first repo@digest."""
    from credprovider.tool.doctor.live import images_from_crictl

    listing = {
        "images": [
            {
                "id": "sha256:1f9c",
                "repoTags": ["111122223333.dkr.ecr.us-west-2.amazonaws.com/team/app:v1"],
                "repoDigests": ["111122223333.dkr.ecr.us-west-2.amazonaws.com/team/app@sha256:ab"],
                "size": "7340032",
                "uid": None,
                "username": "",
                "spec": None,
                "pinned": False,
            },
            {"id": "sha256:2e", "repoTags": [], "repoDigests": ["gcr.io/p/a@sha256:cd"]},
            {"id": "sha256:3d", "repoTags": ["<none>:<none>"], "repoDigests": []},
            "not an image",
        ]
    }
    assert images_from_crictl(json.dumps(listing).encode()) == [
        "111122223333.dkr.ecr.us-west-2.amazonaws.com/team/app:v1",
        "gcr.io/p/a@sha256:cd",
    ]
    assert images_from_crictl(b"FATA[0000] validate service connection") == []
    assert images_from_crictl(b'{"images": {"a": 1}}') == []


@pytest.mark.parametrize(
    ("version", "on"), [((1, 33), False), ((1, 34), True), ((1, 36), True), (None, True)]
)
def test_the_service_account_gate_defaults_by_kubelet_version(
    version: tuple[int, int] | None, on: bool
) -> None:
    """KEP-4412's gate: alpha (off) in v1.33, beta (on) from v1.34 (kep.yaml)."""
    from credprovider.tool.node.kubelet_facts import sa_tokens_by_default

    assert sa_tokens_by_default(version) is on


def test_an_impersonating_provider_shows_source_then_target(endpoint: dict[str, object]) -> None:
    """doctor's identity line: the source the probe reached, then the accounts it pulls as."""
    plugin = PLUGINS["gcp"]
    assert plugin.identity is not None
    args = [
        "get-credentials",
        "--impersonate-service-account=hop@b.iam.gserviceaccount.com,p@r.iam.gserviceaccount.com",
    ]
    found = plugin.identity({"GCE_METADATA_HOST": "127.0.0.1:9"}, args, lambda path: None, _absent)
    assert isinstance(found, IdentityProbe)
    assert found.then == "hop@b.iam.gserviceaccount.com → p@r.iam.gserviceaccount.com"
    endpoint["body"] = "123-compute@developer.gserviceaccount.com"
    reached = dataclasses.replace(found, url=f"{endpoint['url']}/email", expect_header=None)
    [(status, message, _)] = probe(reached, {})
    assert status == "pass"
    assert message.endswith(
        "answers: 123-compute@developer.gserviceaccount.com → hop@b.iam.gserviceaccount.com → "
        "p@r.iam.gserviceaccount.com"
    )
    keyed = plugin.identity(
        {"GOOGLE_APPLICATION_CREDENTIALS": "/k.json"},
        [*args[:1], "--impersonate-service-account", "p@r.iam.gserviceaccount.com"],
        lambda path: "{}",
        _absent,
    )
    assert keyed == (
        "the credentials file /k.json (GOOGLE_APPLICATION_CREDENTIALS) → p@r.iam.gserviceaccount.com: "
        "not probed"
    )
    assert (
        plugin.identity(
            {}, [*args[:1], "--impersonate-service-account=,"], lambda p: None, _absent
        ).then
        == ""
    )  # type: ignore[union-attr]
    # a user and password in GCE_METADATA_HOST: never in what doctor prints
    secret = plugin.identity({"GCE_METADATA_HOST": "u:md-secret@127.0.0.1:9"}, args[:1],
                             lambda path: None, _absent)  # fmt: skip
    assert isinstance(secret, IdentityProbe) and "md-secret" not in secret.what, secret.what
    assert "(http://…@127.0.0.1:9/computeMetadata/v1/)" in secret.what

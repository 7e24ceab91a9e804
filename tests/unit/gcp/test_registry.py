from __future__ import annotations

import base64
import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credprovider.gcp.registry import (
    CacheOverrides,
    DockerCfgError,
    covered_by_fixed_keys,
    decode_docker_auth,
    is_google_registry_host,
    parse_cache_overrides,
    parse_dockercfg,
    registry_keys,
    wants_workload_identity,
    workload_identity_audience,
)
from credprovider.runtime.goformat import MINUTE, SECOND
from credprovider.runtime.imageref import parse_image
from credprovider.runtime.matching import keyring_lookup


@pytest.mark.parametrize(
    ("host", "google"),
    [
        ("gcr.io", True),
        ("us.gcr.io", True),
        ("EU.GCR.IO", True),
        ("k8s.gcr.io", True),
        ("us-central1-docker.pkg.dev", True),
        ("europe-docker.pkg.dev", True),
        ("container.cloud.google.com", True),
        ("gcr.io.evil.com", False),
        ("evil-gcr.io", False),
        ("evil-pkg.dev", False),
        ("pkg.dev", False),
        (".gcr.io", False),
        ("registry.k8s.io", False),
        ("cloud.google.com", False),
        ("xn--gcr-xxx.io", False),
    ],
)
def test_google_registry_hosts(host: str, google: bool) -> None:
    assert is_google_registry_host(host) is google


@pytest.mark.parametrize(
    "image",
    [
        "gcr.io/p/a",
        "us.gcr.io/p/a",
        "gcr.io:443/p/a",
        "asia-docker.pkg.dev/p/r/a",
        "us-docker.pkg.dev:443/p/r/a",
        "container.cloud.google.com/a/b",
        "eu.gcr.io:8443/p/a",
    ],
)
def test_every_google_image_is_served_by_the_keys(image: str) -> None:
    ref = parse_image(image)
    assert keyring_lookup(registry_keys(ref.registry, ref.host), image)


def test_keys_include_the_image_registry_once() -> None:
    assert registry_keys("us.gcr.io", "us.gcr.io")[-1] == "us.gcr.io"
    assert len(registry_keys("gcr.io", "gcr.io")) == 8
    assert registry_keys("eu.gcr.io:8443", "eu.gcr.io")[-1] == "eu.gcr.io:8443"


@pytest.mark.parametrize(
    ("registry", "covered"),
    [
        ("gcr.io", True),
        ("us.gcr.io:443", True),
        ("us-docker.pkg.dev", True),
        ("eu.gcr.io:8443", False),
        ("a.b.pkg.dev", False),
    ],
)
def test_what_a_global_answer_covers(registry: str, covered: bool) -> None:
    assert covered_by_fixed_keys(registry) is covered


def test_keys_never_include_a_foreign_registry() -> None:
    assert "evil.com" not in registry_keys("evil.com", "evil.com")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        (_b64("user:pass"), ("user", "pass")),
        (_b64("user:pass").rstrip("="), ("user", "pass")),
        (_b64("u:p:with:colons"), ("u", "p:with:colons")),
        (_b64("user:pass") + "\n", ("user", "pass")),
        (_b64("user:pass")[:4] + "\r\n" + _b64("user:pass")[4:], ("user", "pass")),
        (_b64("abc:"), ("abc", "")),
    ],
)
def test_decode_docker_auth_like_go(field: str, expected: tuple[str, str]) -> None:
    assert decode_docker_auth(field) == expected


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (_b64("nocolon"), "must be formatted as base64(username:password)"),
        (_b64("user:pass")[:-2] + " =", "not valid base64"),
        (" " + _b64("user:pass"), "not valid base64"),
        ("dXNlcjpwYXNz=", "bad padding"),
        ("dXNlcjpwYXN=z", "not valid base64"),
        ("d", "not valid base64"),
        ("dXNl-jpw", "not valid base64"),
        ("//79", "not valid base64"),
    ],
)
def test_decode_docker_auth_rejects_junk(field: str, message: str) -> None:
    with pytest.raises(DockerCfgError) as caught:
        decode_docker_auth(field)
    assert message in str(caught.value)


@given(st.text(max_size=40))
def test_decode_docker_auth_raises_only_its_own_error(field: str) -> None:
    with contextlib.suppress(DockerCfgError):
        decode_docker_auth(field)


@given(st.text(min_size=0, max_size=20).filter(lambda s: ":" not in s), st.text(max_size=20))
def test_decode_docker_auth_round_trips(user: str, password: str) -> None:
    encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
    assert decode_docker_auth(encoded) == (user, password)
    assert decode_docker_auth(encoded.rstrip("=")) == (user, password)


def test_parse_dockercfg_auth_overrides_username_and_password() -> None:
    text = (
        '{"a.io": {"username": "x", "password": "y", "auth": "' + _b64("u:p") + '"},'
        ' "b.io": {"username": "bu", "password": "bp", "email": "e@x"}}'
    )
    assert parse_dockercfg(text) == {"a.io": ("u", "p"), "b.io": ("bu", "bp")}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "expected a JSON object"),
        ('{"a": 1}', "is not an object"),
        ('{"a": {"username": 5}}', "non-string"),
        ("{", "not valid JSON"),
        ('{"a": {"auth": "!!"}}', "entry 'a': auth field is not valid base64"),
    ],
)
def test_parse_dockercfg_errors(text: str, message: str) -> None:
    with pytest.raises(DockerCfgError) as caught:
        parse_dockercfg(text)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, CacheOverrides(None, None)),
        ({"KUBE_SIDECAR_CACHE_DURATION": "1m"}, CacheOverrides(MINUTE, None)),
        ({"KUBE_SIDECAR_CACHE_DURATION": "0"}, CacheOverrides(0, None)),
        ({"KUBE_SIDECAR_CACHE_DURATION": "1.5s"}, CacheOverrides(1500 * SECOND // 1000, None)),
        ({"KUBE_SIDECAR_CACHE_TYPE": "image"}, CacheOverrides(None, "Image")),
        ({"KUBE_SIDECAR_CACHE_TYPE": "registry"}, CacheOverrides(None, "Registry")),
        ({"KUBE_SIDECAR_CACHE_TYPE": "global"}, CacheOverrides(None, "Global")),
    ],
)
def test_cache_overrides(env: dict[str, str], expected: CacheOverrides) -> None:
    assert parse_cache_overrides(env) == expected


@pytest.mark.parametrize(
    "env",
    [
        {"KUBE_SIDECAR_CACHE_TYPE": "Image"},
        {"KUBE_SIDECAR_CACHE_TYPE": "GLOBAL"},
        {"KUBE_SIDECAR_CACHE_DURATION": "10"},
        {"KUBE_SIDECAR_CACHE_DURATION": "1d"},
    ],
)
def test_bad_cache_overrides(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="KUBE_SIDECAR_CACHE_"):
        parse_cache_overrides(env)


def test_workload_identity_audience_and_opt_in() -> None:
    assert (
        workload_identity_audience("p", "https://idp")
        == "identitynamespace:p.svc.id.goog:https://idp"
    )
    assert wants_workload_identity({"iam.gke.io/enable-wi-image-pull": "true"})
    assert not wants_workload_identity({"iam.gke.io/enable-wi-image-pull": "TRUE"})
    assert not wants_workload_identity({})


_OPTED_IN = {"iam.gke.io/enable-wi-image-pull": "true"}
_IDP = "https://container.googleapis.com/v1/projects/p/locations/l/clusters/c"


@pytest.mark.parametrize(
    ("annotations", "token", "identity_provider", "credentials_file", "kind", "warned"),
    [
        ({}, False, "", "", "metadata server", False),
        ({}, False, "", "/etc/gcp/key.json", "credentials file", False),
        ({}, True, _IDP, "", "metadata server", False),  # a token alone does not opt in
        (_OPTED_IN, True, _IDP, "/etc/gcp/key.json", "workload identity", False),
        (_OPTED_IN, True, "", "", "metadata server", True),  # no --identity-provider: said
        ({"iam.gke.io/enable-wi-image-pull": "True"}, True, _IDP, "", "metadata server", False),
    ],
)  # fmt: skip
def test_the_token_source(
    annotations: dict[str, str],
    token: bool,
    identity_provider: str,
    credentials_file: str,
    kind: str,
    warned: bool,
) -> None:
    from credprovider.gcp.registry import choose_token_source

    source = choose_token_source(annotations, token, identity_provider, credentials_file)
    assert (source.kind, bool(source.warning)) == (kind, warned)


def test_an_opted_in_pod_without_a_token_never_gets_the_node_identity() -> None:
    from credprovider.gcp.registry import TokenSourceError, choose_token_source

    with pytest.raises(TokenSourceError, match="no fallback to the node identity"):
        choose_token_source(_OPTED_IN, False, _IDP, "/etc/gcp/key.json")

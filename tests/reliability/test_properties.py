"""Property-based tests: parsers raise only their own error type, returned keys always match the
image asked about, and look-alike hosts are never a cloud's registry."""

from __future__ import annotations

import contextlib
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credprovider.aws.registry import TokenError, classify_host, decode_authorization_token
from credprovider.azure.cloudconfig import parse_cloud_config
from credprovider.azure.registry import (
    CLOUDS,
    AzureConfigError,
    cloud_from_metadata,
    login_server_suffix,
    parse_registry_mirrors,
)
from credprovider.gcp.registry import (
    DockerCfgError,
    is_google_registry_host,
    parse_dockercfg,
    registry_keys,
)
from credprovider.runtime.answer import jwt_expiry
from credprovider.runtime.api import ResponseError, parse_response
from credprovider.runtime.goformat import DurationError, parse_go_duration
from credprovider.runtime.imageref import parse_image
from credprovider.runtime.matching import go_path_match, keyring_lookup, urls_match

PUBLIC = CLOUDS["azurepubliccloud"]
label = st.text(alphabet=string.ascii_lowercase + string.digits, min_size=1, max_size=12)
suffix_labels = st.lists(
    st.text(alphabet=string.ascii_lowercase + string.digits + "-", min_size=1, max_size=10).filter(
        lambda s: not s.startswith("-") and not s.endswith("-")
    ),
    min_size=1,
    max_size=3,
)
path = st.lists(label, min_size=1, max_size=3).map("/".join)
port = st.one_of(st.just(""), st.integers(min_value=1, max_value=65535).map(lambda p: f":{p}"))


@given(st.text(max_size=80))
def test_parsers_raise_only_their_own_errors(text: str) -> None:
    for parse, error in (
        (parse_go_duration, DurationError),
        (decode_authorization_token, TokenError),
        (lambda t: parse_cloud_config(t, "azure.json"), AzureConfigError),
        (lambda t: cloud_from_metadata(t, ""), AzureConfigError),
        (parse_registry_mirrors, ValueError),
        (parse_dockercfg, DockerCfgError),
    ):
        with contextlib.suppress(error):
            parse(text)


@given(st.binary(max_size=200))
def test_response_decoding_raises_only_response_error(data: bytes) -> None:
    with contextlib.suppress(ResponseError):
        parse_response(data, "credentialprovider.kubelet.k8s.io/v1")


@given(st.text(max_size=120))
def test_jwt_expiry_never_raises(token: str) -> None:
    assert jwt_expiry(token) is None or isinstance(jwt_expiry(token), float)


@settings(max_examples=200)
@given(
    st.from_regex(r"[0-9]{12}", fullmatch=True),
    st.sampled_from(["dkr.ecr", "dkr.ecr-fips", "dkr-ecr", "dkr-ecr-fips"]),
    st.from_regex(r"[a-z]{2}-[a-z]{4,9}-[1-9]", fullmatch=True),
    st.sampled_from(["amazonaws.com", "amazonaws.com.cn", "amazonaws.eu", "on.aws", "c2s.ic.gov"]),
    port,
    path,
)
def test_ecr_keys_always_match_the_image(
    account: str, form: str, region: str, suffix: str, port_: str, repo: str
) -> None:
    image = f"{account}.{form}.{region}.{suffix}{port_}/{repo}"
    ref = parse_image(image)
    assert classify_host(ref.host).region == region
    assert keyring_lookup([ref.registry], image) == [ref.registry]  # the plugin's one key


@settings(max_examples=200)
@given(
    label,
    st.one_of(st.just(""), label.map(lambda h: f"-{h}")),
    st.one_of(st.just(""), label.map(lambda r: f".{r}.geo")),
    st.sampled_from(["azurecr.io", "azurecr.cn", "azurecr.us", "azurecr.de"]),
    port,
    path,
)
def test_acr_login_servers_are_recognised_and_keyed_for_the_image(
    name: str, dnl: str, geo: str, suffix: str, port_: str, repo: str
) -> None:
    image = f"{name}{dnl}{geo}.{suffix}{port_}/{repo}"
    ref = parse_image(image)
    assert login_server_suffix(ref.host, PUBLIC) == suffix
    assert urls_match(ref.registry, image)


@settings(max_examples=200)
@given(
    st.sampled_from(
        [
            "gcr.io",
            "us.gcr.io",
            "eu.gcr.io",
            "us-docker.pkg.dev",
            "europe-west1-docker.pkg.dev",
            "container.cloud.google.com",
        ]
    ),
    st.sampled_from(["", ":443"]),
    path,
)
def test_google_keys_always_serve_the_image(host: str, port_: str, repo: str) -> None:
    image = f"{host}{port_}/{repo}"
    ref = parse_image(image)
    assert keyring_lookup(registry_keys(ref.registry, ref.host), image)


@given(suffix_labels)
def test_look_alike_hosts_are_never_a_cloud_registry(extra: list[str]) -> None:
    tail = ".".join(extra)
    assert classify_host(f"123456789012.dkr.ecr.us-east-1.amazonaws.com.{tail}").kind == "other"
    assert classify_host(f"public.ecr.aws.{tail}").kind == "other"
    assert login_server_suffix(f"foo.azurecr.io.{tail}", PUBLIC) is None
    assert not is_google_registry_host(f"gcr.io.{tail}")
    assert not is_google_registry_host(f"{tail}-pkg.dev")


def _reference_glob(pattern: str, name: str) -> bool:
    """Go's filepath.Match for patterns of ``*``, ``?`` and literals, by plain backtracking
    (exponential in the worst case, so only for the small inputs below)."""
    if not pattern:
        return name == ""
    if pattern[0] == "*":
        return any(
            _reference_glob(pattern[1:], name[cut:])
            for cut in range(len(name) + 1)
            if "/" not in name[:cut]
        )
    if not name or (pattern[0] == "?" and name[0] == "/"):
        return False
    return (pattern[0] in "?" or pattern[0] == name[0]) and _reference_glob(pattern[1:], name[1:])


glob_pattern = st.text(alphabet="ab*?/", max_size=10)
glob_name = st.text(alphabet="ab/", max_size=12)


@settings(max_examples=500)
@given(glob_pattern, glob_name)
def test_the_linear_glob_matcher_agrees_with_backtracking(pattern: str, name: str) -> None:
    assert go_path_match(pattern, name) == _reference_glob(pattern, name)


@pytest.mark.parametrize(
    ("pattern", "name"),
    [
        ("*a*a*a*a*a*a*a*a*a*a*a*a*b", "a" * 60),
        ("*a" * 2000 + "b", "a" * 20_000),
        ("*" * 10_000 + "b", "a" * 10_000),
        ("?*" * 1000 + "[^a]", "a" * 10_000),
    ],
    ids=["the red team's glob", "2,000 stars", "10,000 stars in a row", "classes"],
)
def test_catastrophic_globs_are_answered(pattern: str, name: str) -> None:
    """Exponential for a backtracking matcher; here each runs in well under a second."""
    assert go_path_match(pattern, name) is False
    assert go_path_match(pattern, name + "b") is True
    assert urls_match(pattern.replace("/", "") + ".com", name + ".com") is False

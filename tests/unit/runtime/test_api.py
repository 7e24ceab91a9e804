from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credprovider.runtime.api import (
    AuthConfig,
    CredentialProviderResponse,
    RequestError,
    encode_response,
    parse_request,
)
from credprovider.runtime.goformat import (
    HOUR,
    MICROSECOND,
    MILLISECOND,
    MINUTE,
    SECOND,
    DurationError,
    format_go_duration,
    parse_go_duration,
)
from emulators.kubelet_exec import request_bytes
from tests.helpers import API_VERSIONS

# Bytes the kubelet writes (kubelet-protocol.md §1.1, Test_encodeRequest).
KUBELET_REQUEST = (
    b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
    b'"image":"test.registry.io/foobar"}\n'
)
KUBELET_SA_REQUEST = (
    b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
    b'"image":"test.registry.io/foobar","serviceAccountToken":"service-account-token",'
    b'"serviceAccountAnnotations":{"domain.io/annotation1":"value1"}}\n'
)


def test_parses_the_kubelets_exact_request_bytes() -> None:
    request = parse_request(KUBELET_REQUEST)
    assert request.api_version == "credentialprovider.kubelet.k8s.io/v1"
    assert request.image == "test.registry.io/foobar"
    assert request.service_account_token == ""
    assert request.service_account_annotations == {}


def test_parses_service_account_fields_for_v1() -> None:
    request = parse_request(KUBELET_SA_REQUEST)
    assert request.service_account_token == "service-account-token"
    assert request.service_account_annotations == {"domain.io/annotation1": "value1"}


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha1"])
def test_service_account_fields_are_ignored_before_v1(version: str) -> None:
    data = KUBELET_SA_REQUEST.replace(b'/v1"', f'/{version}"'.encode())
    request = parse_request(data)
    assert request.api_version.endswith(version)
    assert request.service_account_token == ""
    assert request.service_account_annotations == {}


@pytest.mark.parametrize("api_version", API_VERSIONS)
def test_every_api_version_is_accepted(api_version: str) -> None:
    assert parse_request(request_bytes("r.io/x", api_version)).api_version == api_version


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "stdin was empty"),
        (b"  \n\t", "stdin was empty"),
        (b"not json", "not valid JSON"),
        (b'{"kind":', "not valid JSON"),
        (b"[]", "got a JSON array"),
        (b'"image"', "got a JSON string"),
        (b"42", "got a JSON number"),
        (b"null", "got a JSON null"),
        (b"\xff\xfe{}", "not valid UTF-8"),
        (b'\xef\xbb\xbf{"kind":"CredentialProviderRequest"}', "starts with a byte-order mark"),
        (b'{"kind":"CredentialProviderRequest","image":"a/b"}', "no apiVersion"),
        (b'{"kind":"CredentialProviderRequest","apiVersion":7,"image":"a/b"}', "no apiVersion"),
        (
            b'{"kind":"CredentialProviderRequest","apiVersion":"v1","image":"a/b"}',
            "the group must be credentialprovider.kubelet.k8s.io",
        ),
        (
            b'{"kind":"CredentialProviderRequest","apiVersion":"kubelet.config.k8s.io/v1",'
            b'"image":"a/b"}',
            "the group must be",
        ),
        (
            b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v2",'
            b'"image":"a/b"}',
            "supported versions are v1, v1beta1, v1alpha1",
        ),
        (
            b'{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
            b'"image":"a/b"}',
            "request kind is 'CredentialProviderResponse'",
        ),
        (
            b'{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":"a/b"}',
            "request kind is None",
        ),
        (
            b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1"}',
            "no image field",
        ),
        (
            b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
            b'"image":""}',
            "image in plugin request was empty",
        ),
        (
            b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
            b'"image":["a"]}',
            "image must be a string",
        ),
        (
            b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
            b'"image":"a/b c"}',
            "whitespace or control characters",
        ),
        (
            b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
            b'"image":"a/b\\u0000"}',
            "whitespace or control characters",
        ),
        (
            b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
            b'"image":"a/b","image":"c/d"}',
            "duplicate key 'image'",
        ),
        (
            b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
            b'"image":"a/b","x":NaN}',
            "NaN",
        ),
        (
            b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
            b'"image":"a/b","serviceAccountToken":5}',
            "serviceAccountToken must be a string",
        ),
        (
            b'{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
            b'"image":"a/b","serviceAccountAnnotations":{"k":1}}',
            "serviceAccountAnnotations must be an object of strings",
        ),
    ],
)
def test_bad_requests_are_refused_with_a_clear_message(data: bytes, message: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_request(data)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_unknown_request_fields_are_ignored_for_forward_compatibility() -> None:
    data = KUBELET_REQUEST.replace(b'"image"', b'"futureField":{"a":1},"image"')
    assert parse_request(data).image == "test.registry.io/foobar"


# Bytes upstream's plugin_test.go expects (aws-ecr.md §3.3 / azure-acr.md §2.3).
def test_response_bytes_match_the_upstream_encoder() -> None:
    response = CredentialProviderResponse(
        api_version="credentialprovider.kubelet.k8s.io/v1",
        cache_key_type="Registry",
        cache_duration=10 * MINUTE,
        auth={"*.registry.io": AuthConfig("user", "password")},
    )
    assert encode_response(response) == (
        b'{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
        b'"cacheKeyType":"Registry","cacheDuration":"10m0s","auth":{"*.registry.io":'
        b'{"username":"user","password":"password"}}}\n'
    )


def test_response_omits_unset_duration_and_empty_auth() -> None:
    response = CredentialProviderResponse("credentialprovider.kubelet.k8s.io/v1beta1", "Image")
    assert encode_response(response) == (
        b'{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/'
        b'v1beta1","cacheKeyType":"Image"}\n'
    )


def test_response_auth_keys_are_sorted_like_gos_map_encoder() -> None:
    response = CredentialProviderResponse(
        "credentialprovider.kubelet.k8s.io/v1",
        "Global",
        0,
        {"b.io": AuthConfig("", ""), "a.io": AuthConfig("u", "p"), "*.c.io": AuthConfig("", "")},
    )
    auth = json.loads(encode_response(response))["auth"]
    assert list(auth) == ["*.c.io", "a.io", "b.io"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("api_version", "credentialprovider.kubelet.k8s.io/v9"), ("cache_key_type", "registry")],
)
def test_response_refuses_values_the_kubelet_would_reject(field: str, value: str) -> None:
    kwargs = {"api_version": "credentialprovider.kubelet.k8s.io/v1", "cache_key_type": "Registry"}
    kwargs[field] = value
    with pytest.raises(ValueError):
        encode_response(CredentialProviderResponse(**kwargs))  # type: ignore[arg-type]


# Expected strings are what Go's time.Duration.String() prints.
GO_DURATIONS = [
    (0, "0s"),
    (1, "1ns"),
    (1100, "1.1µs"),
    (2200 * MICROSECOND, "2.2ms"),
    (3300 * MILLISECOND, "3.3s"),
    (-4 * MINUTE - 5 * SECOND, "-4m5s"),
    (4 * MINUTE + 5001 * MILLISECOND, "4m5.001s"),
    (5 * HOUR + 6 * MINUTE + 7001 * MILLISECOND, "5h6m7.001s"),
    (8 * MINUTE + 1, "8m0.000000001s"),
    ((1 << 63) - 1, "2562047h47m16.854775807s"),
    (-(1 << 63), "-2562047h47m16.854775808s"),
    (6 * HOUR, "6h0m0s"),
    (59 * MINUTE + 59 * SECOND, "59m59s"),
    (MINUTE, "1m0s"),
    (SECOND, "1s"),
    (HOUR, "1h0m0s"),
    (999 * MILLISECOND, "999ms"),
]


@pytest.mark.parametrize(("nanoseconds", "text"), GO_DURATIONS)
def test_format_go_duration(nanoseconds: int, text: str) -> None:
    assert format_go_duration(nanoseconds) == text


@pytest.mark.parametrize(
    ("text", "nanoseconds"),
    [
        ("0", 0),
        ("5s", 5 * SECOND),
        ("30s", 30 * SECOND),
        ("1478s", 1478 * SECOND),
        ("-5s", -5 * SECOND),
        ("+5s", 5 * SECOND),
        ("-0", 0),
        ("+0", 0),
        ("5.0s", 5 * SECOND),
        ("5.6s", 5600 * MILLISECOND),
        ("5.s", 5 * SECOND),
        (".5s", 500 * MILLISECOND),
        ("1.0s", SECOND),
        ("1.00s", SECOND),
        ("1.004s", 1004 * MILLISECOND),
        ("100.00100s", 100001 * MILLISECOND),
        ("10ns", 10),
        ("11us", 11 * MICROSECOND),
        ("12µs", 12 * MICROSECOND),
        ("12μs", 12 * MICROSECOND),
        ("13ms", 13 * MILLISECOND),
        ("14s", 14 * SECOND),
        ("15m", 15 * MINUTE),
        ("16h", 16 * HOUR),
        ("3h30m", 210 * MINUTE),
        ("10.5s4m", 4 * MINUTE + 10500 * MILLISECOND),
        ("-2m3.4s", -(2 * MINUTE + 3400 * MILLISECOND)),
        ("1h2m3s4ms5us6ns", HOUR + 2 * MINUTE + 3 * SECOND + 4 * MILLISECOND + 5 * MICROSECOND + 6),
        ("39h9m14.425s", 39 * HOUR + 9 * MINUTE + 14425 * MILLISECOND),
        ("52763797000ns", 52763797000),
        ("0.3333333333333333333h", 20 * MINUTE),
        ("9007199254740993ns", (1 << 53) + 1),
        ("9223372036854775807ns", (1 << 63) - 1),
        ("9223372036.854775807s", (1 << 63) - 1),
        ("-9223372036854775808ns", -(1 << 63)),
        ("12h0m0s", 12 * HOUR),
        ("6h0m0s", 6 * HOUR),
    ],
)
def test_parse_go_duration(text: str, nanoseconds: int) -> None:
    assert parse_go_duration(text) == nanoseconds


@pytest.mark.parametrize(
    "text",
    [
        "",
        "3",
        "-",
        "s",
        ".",
        "-.",
        ".s",
        "+.s",
        "1d",
        "1hour",
        "\x85\x85",
        "\xffff",
        "hello \xffff world",
        "9223372036854775808ns",
        "9223372036854775.808us",
        "5",
        "1m5",
        "1.5",
        " 1s",
        "1s ",
    ],
)
def test_parse_go_duration_rejects_what_go_rejects(text: str) -> None:
    with pytest.raises(DurationError):
        parse_go_duration(text)


@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1))
def test_duration_format_then_parse_round_trips(nanoseconds: int) -> None:
    assert parse_go_duration(format_go_duration(nanoseconds)) == nanoseconds


@given(st.binary(max_size=300))
def test_parse_request_raises_only_request_error(data: bytes) -> None:
    with contextlib.suppress(RequestError):
        parse_request(data)

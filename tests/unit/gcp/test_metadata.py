"""The stdlib GCE metadata client's decisions (host, mTLS hand-off, body decoding) and URL split."""

from __future__ import annotations

import pytest

from credprovider.gcp.metadata import decode_answer, metadata_root, wants_mtls
from credprovider.runtime.http import HttpError, HttpResponse, split_http_url


@pytest.mark.parametrize(
    ("environ", "root"),
    [
        ({}, "http://metadata.google.internal/computeMetadata/v1/"),
        ({"GCE_METADATA_HOST": "127.0.0.1:8080"}, "http://127.0.0.1:8080/computeMetadata/v1/"),
        ({"GCE_METADATA_ROOT": "169.254.169.254"}, "http://169.254.169.254/computeMetadata/v1/"),
        (
            {"GCE_METADATA_HOST": "10.0.0.1", "GCE_METADATA_ROOT": "10.0.0.2"},
            "http://10.0.0.1/computeMetadata/v1/",
        ),
        (
            {"GCE_METADATA_HOST": "", "GCE_METADATA_ROOT": "10.0.0.2"},
            "http://10.0.0.2/computeMetadata/v1/",
        ),
    ],
)
def test_metadata_root_follows_google_auth(environ: dict[str, str], root: str) -> None:
    assert metadata_root(environ) == root


@pytest.mark.parametrize(
    ("mode", "certificates_installed", "mtls"),
    [
        (None, True, False),  # google-auth's default mode is "none"
        ("none", True, False),
        ("NONE", True, False),
        ("default", False, False),
        ("default", True, True),
        ("strict", False, True),  # google-auth then fails with its own message
        ("bogus", False, True),  # ... and so does an unknown mode
    ],
)
def test_mtls_is_handed_to_google_auth_only_when_asked(
    mode: str | None, certificates_installed: bool, mtls: bool
) -> None:
    environ = {} if mode is None else {"GCE_METADATA_MTLS_MODE": mode}
    seen: list[str] = []

    def exists(path: str) -> bool:
        seen.append(path)
        return certificates_installed

    assert wants_mtls(environ, exists) is mtls
    # Only the "default" mode looks at the certificates Google installs on mTLS-enabled VMs.
    assert bool(seen) is (mode == "default")
    assert set(seen) <= {"/run/google-mds-mtls/root.crt", "/run/google-mds-mtls/client.key"}


@pytest.mark.parametrize(
    ("content_type", "body", "answer"),
    [
        (
            "application/json",
            b'{"access_token": "t", "expires_in": 5}',
            {"access_token": "t", "expires_in": 5},
        ),
        ("application/json; charset=utf-8", b"[1]", [1]),
        ("text/plain", b'{"a": 1}', '{"a": 1}'),  # google-auth returns non-JSON types as text
        ("", b"plain", "plain"),
        ("text/html", b"\xff<html>", "\ufffd<html>"),
    ],
)
def test_answers_decode_like_google_auth(content_type: str, body: bytes, answer: object) -> None:
    headers = {"content-type": content_type} if content_type else {}
    assert decode_answer(HttpResponse(200, headers, body)) == answer


def test_invalid_json_is_named() -> None:
    with pytest.raises(ValueError, match=r"^invalid JSON$"):
        decode_answer(
            HttpResponse(200, {"content-type": "application/json"}, b'{"access_token": "ya29')
        )


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        (
            "http://metadata.google.internal/computeMetadata/v1/x",
            ("http", "metadata.google.internal", "/computeMetadata/v1/x"),
        ),
        ("http://127.0.0.1:8080/a?b=c", ("http", "127.0.0.1:8080", "/a?b=c")),
        ("HTTP://[::1]:80/", ("http", "[::1]:80", "/")),
        ("http://host", ("http", "host", "")),
    ],
)
def test_http_urls_split(url: str, parts: tuple[str, str, str]) -> None:
    assert split_http_url(url) == parts
    assert split_http_url(url, allow_https=True) == parts


def test_https_only_where_the_caller_brings_tls() -> None:
    url = "https://api.ecr.us-east-1.amazonaws.com/"
    assert split_http_url(url, allow_https=True) == (
        "https",
        "api.ecr.us-east-1.amazonaws.com",
        "/",
    )
    with pytest.raises(HttpError, match="only http:// URLs"):
        split_http_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://metadata.google.internal/",
        "metadata.google.internal/x",
        "http:///x",
        "http://user@host/x",
    ],
)
def test_only_plain_http_urls_with_a_host_are_accepted(url: str) -> None:
    with pytest.raises(HttpError):
        split_http_url(url)

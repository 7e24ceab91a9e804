"""Hostile input: every request in the corpus gets the correct refusal or the correct answer.

The plugin is ecr-credential-provider with AWS_REGION set, so any host it is asked about gets an
answer keyed by that host (its documented pull-through mode): the answer key shows exactly how the
image was understood.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from emulators.aws import FakeEcr, ecr_env
from emulators.http import FakeServer, serve
from emulators.kubelet_exec import run_plugin
from tests.reliability.checks import Figures, Outcome, answer_violations

V1 = "credentialprovider.kubelet.k8s.io/v1"
DIGEST = "sha256:" + "ab" * 32


def req(image: object, **extra: object) -> bytes:
    body = {"kind": "CredentialProviderRequest", "apiVersion": V1, "image": image, **extra}
    return json.dumps(body).encode()


def raw(text: str) -> bytes:
    return text.encode()


# (name, stdin, expected): expected is ("refuse", substring of the error) or ("answer", auth key).
CORPUS: list[tuple[str, bytes, tuple[str, str]]] = [
    ("empty stdin", b"", ("refuse", "stdin was empty")),
    ("whitespace only", b" \t\r\n ", ("refuse", "stdin was empty")),
    ("newline only", b"\n", ("refuse", "stdin was empty")),
    ("plain text", b"give me credentials", ("refuse", "not valid JSON")),
    ("JSON array", b'[{"image":"a/b"}]', ("refuse", "got a JSON array")),
    ("JSON number", b"42", ("refuse", "got a JSON number")),
    ("JSON string", b'"registry.io/app"', ("refuse", "got a JSON string")),
    ("JSON null", b"null", ("refuse", "got a JSON null")),
    ("JSON true", b"true", ("refuse", "got a JSON bool")),
    ("image is an object", req({"registry": "r.io"}), ("refuse", "image must be a string")),
    ("image is a number", req(5), ("refuse", "image must be a string")),
    ("image is null", req(None), ("refuse", "no image field")),
    ("image is a list", req(["r.io/app"]), ("refuse", "image must be a string")),
    (
        "image missing",
        raw(f'{{"kind":"CredentialProviderRequest","apiVersion":"{V1}"}}'),
        ("refuse", "no image field"),
    ),
    ("image empty", req(""), ("refuse", "image in plugin request was empty")),
    (
        "huge image string",
        req("r.io/" + "a" * 200_000),
        ("refuse", "must not be more than 255 characters"),
    ),
    ("10 MB stdin", b"{" + b" " * (10 << 20) + b"}", ("refuse", "larger than 1 MiB")),
    ("invalid UTF-8", b'{"image": "\xff\xfe"}', ("refuse", "not valid UTF-8")),
    ("raw NUL byte", b'{"kind":\x00}', ("refuse", "not valid JSON")),
    ("escaped NUL in image", req("r.io/app\u0000"), ("refuse", "whitespace or control characters")),
    (
        "duplicate image key",
        raw(
            f'{{"kind":"CredentialProviderRequest","apiVersion":"{V1}","image":"a.io/x","image":"b.io/y"}}'
        ),
        ("refuse", "duplicate key 'image'"),
    ),
    ("deeply nested JSON", b"[" * 100_000 + b"]" * 100_000, ("refuse", "nested too deeply")),
    ("trailing garbage", req("r.io/app") + b" and more", ("refuse", "not valid JSON")),
    ("UTF-8 BOM", b"\xef\xbb\xbf" + req("r.io/app"), ("refuse", "byte-order mark")),
    (
        "NaN value",
        raw(f'{{"kind":"CredentialProviderRequest","apiVersion":"{V1}","image":"r.io/a","x":NaN}}'),
        ("refuse", "NaN"),
    ),
    (
        "wrong kind",
        raw(f'{{"kind":"CredentialProviderResponse","apiVersion":"{V1}","image":"r.io/a"}}'),
        ("refuse", "request kind is"),
    ),
    (
        "kind missing",
        raw(f'{{"apiVersion":"{V1}","image":"r.io/a"}}'),
        ("refuse", "request kind is None"),
    ),
    (
        "kind lowercase",
        raw(f'{{"kind":"credentialproviderrequest","apiVersion":"{V1}","image":"r.io/a"}}'),
        ("refuse", "request kind is"),
    ),
    (
        "apiVersion missing",
        raw('{"kind":"CredentialProviderRequest","image":"r.io/a"}'),
        ("refuse", "no apiVersion"),
    ),
    (
        "apiVersion other group",
        raw('{"kind":"CredentialProviderRequest","apiVersion":"example.com/v1","image":"r.io/a"}'),
        ("refuse", "the group must be"),
    ),
    (
        "apiVersion v2",
        raw(
            '{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v2","image":"r.io/a"}'
        ),
        ("refuse", "supported versions"),
    ),
    (
        "apiVersion without group",
        raw('{"kind":"CredentialProviderRequest","apiVersion":"v1","image":"r.io/a"}'),
        ("refuse", "the group must be"),
    ),
    (
        "apiVersion trailing slash",
        raw(
            '{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1/","image":"r.io/a"}'
        ),
        ("refuse", "unsupported apiVersion"),
    ),
    (
        "token not a string",
        req("r.io/a", serviceAccountToken=7),
        ("refuse", "serviceAccountToken must be a string"),
    ),
    (
        "annotations not strings",
        req("r.io/a", serviceAccountAnnotations={"a": 1}),
        ("refuse", "object of strings"),
    ),
    ("unknown fields are ignored", req("r.io/app", futureField={"x": 1}), ("answer", "r.io")),
    ("space in image", req("r.io/my app"), ("refuse", "whitespace or control characters")),
    ("tab in image", req("r.io/app\tx"), ("refuse", "whitespace or control characters")),
    ("newline in image", req("r.io/app\nx"), ("refuse", "whitespace or control characters")),
    ("DEL in image", req("r.io/app\x7f"), ("refuse", "whitespace or control characters")),
    ("fullwidth look-alike host", req("ｒegistry.io/app"), ("refuse", "non-ASCII")),
    (
        "cyrillic look-alike host",
        req("123456789012.dkr.еcr.us-east-1.amazonaws.com/app"),
        ("refuse", "non-ASCII"),
    ),
    ("IPv6 literal with port", req("[::1]:5000/app"), ("answer", "[::1]:5000")),
    ("IPv6 literal without brackets", req("::1/app"), ("refuse", "not a valid host name")),
    ("port out of range", req("r.io:70000/app"), ("refuse", "port '70000'")),
    ("port zero", req("r.io:0/app"), ("refuse", "port '0'")),
    ("port not a number", req("r.io:https/app"), ("refuse", "port 'https'")),
    ("uppercase host", req("REGISTRY.EXAMPLE.COM/app"), ("answer", "REGISTRY.EXAMPLE.COM")),
    ("uppercase path", req("r.io/App"), ("refuse", "path component 'App'")),
    ("http:// prefix", req("http://r.io/app"), ("refuse", "URL scheme")),
    ("https:// prefix", req("https://r.io/app"), ("refuse", "URL scheme")),
    ("tag form", req("r.io/app:v1.2"), ("answer", "r.io")),
    ("digest form", req(f"r.io/app@{DIGEST}"), ("answer", "r.io")),
    ("tag and digest", req(f"r.io:443/app:v1@{DIGEST}"), ("answer", "r.io:443")),
    ("bad digest", req("r.io/app@sha256:xyz"), ("refuse", "invalid digest")),
    ("Docker Hub short name", req("nginx"), ("answer", "docker.io")),
    ("Docker Hub library path", req("library/nginx:1.25"), ("answer", "docker.io")),
    ("Docker Hub user image", req("someone/app:tag"), ("answer", "docker.io")),
    ("index.docker.io", req("index.docker.io/library/nginx"), ("answer", "docker.io")),
    ("localhost with port", req("localhost:5000/app"), ("answer", "localhost:5000")),
    ("trailing slash", req("r.io/app/"), ("refuse", "path component ''")),
    ("double slash", req("r.io//app"), ("refuse", "path component ''")),
    ("registry only", req("r.io/"), ("refuse", "path component ''")),
    ("userinfo", req("user@r.io/app"), ("refuse", "invalid digest")),
    ("percent escape in host", req("r%2eio.com/app"), ("refuse", "not a valid host name")),
    ("query string", req("r.io/app?x=1"), ("refuse", "invalid")),
    ("fragment", req("r.io/app#x"), ("refuse", "invalid")),
]


@pytest.fixture(scope="module")
def ecr() -> Iterator[tuple[FakeEcr, FakeServer]]:
    fake = FakeEcr()
    with serve(fake) as server:
        yield fake, server


def test_the_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 60


@pytest.mark.parametrize(("name", "stdin", "expected"), CORPUS, ids=[c[0] for c in CORPUS])
def test_hostile_request(
    ecr: tuple[FakeEcr, FakeServer],
    figures: Figures,
    name: str,
    stdin: bytes,
    expected: tuple[str, str],
) -> None:
    _fake, server = ecr
    env = ecr_env(server.url, AWS_REGION="us-east-1")
    run = run_plugin("ecr-credential-provider", stdin, ["--deadline=10s"], env)
    problems = answer_violations(run, 10)
    kind, value = expected
    if kind == "refuse":
        if run.code != 1 or not any(value in line for line in run.error_lines):
            problems.append(
                f"expected a refusal mentioning {value!r}, got {run.code}: {run.stderr[-300:]}"
            )
    elif run.code != 0 or list(json.loads(run.stdout).get("auth", {})) != [value]:
        problems.append(
            f"expected an answer keyed {value!r}, got {run.code}: {run.stdout[:200]!r} {run.stderr[-200:]}"
        )
    figures.record(
        Outcome("hostile", name, run.code, run.seconds, 10, not problems, "; ".join(problems))
    )
    assert not problems

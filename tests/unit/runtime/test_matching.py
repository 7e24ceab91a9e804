from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credprovider.runtime.imageref import ImageError, parse_image
from credprovider.runtime.matching import go_path_match, keyring_key, keyring_lookup, urls_match

# (pattern, image, match) — kubelet keyring_test.go TestURLsMatch plus reference §5.1 cases.
URL_MATCH_CASES = [
    ("*.kubernetes.io", "prefix.kubernetes.io", True),
    ("prefix.*.io", "prefix.kubernetes.io", True),
    ("prefix.kubernetes.*", "prefix.kubernetes.io", True),
    ("*-good.kubernetes.io", "prefix-good.kubernetes.io", True),
    ("*.kubernetes.io/blah", "prefix.kubernetes.io/blah", True),
    ("prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", True),
    ("*.*.io", "prefix.kubernetes.io", True),
    ("*.*.*", "prefix.kubernetes.io", True),
    ("*.kubernetes.io", "kubernetes.io", False),
    ("*.foo.kubernetes.io", "prefix.kubernetes.io", False),
    ("*.kubernetes.io", "prefix.foo.kubernetes.io", False),
    ("*.io", "prefix.kubernetes.io", False),
    ("*kubernetes.io", "kubernetes.io", True),
    ("*kubernetes.io", "prefix.kubernetes.io", False),
    ("prefix.kubernetes.io:1111", "prefix.kubernetes.io:1111", True),
    ("*.kubernetes.io:1111", "prefix.kubernetes.io:1112", False),
    ("prefix.kubernetes.io", "prefix.kubernetes.io:8080", False),
    ("prefix.kubernetes.io:8080", "prefix.kubernetes.io", False),
    ("bar.example.com/pong", "bar.example.com/pongz", True),
    ("bar.example.com/pong/", "bar.example.com/pong", False),
    ("registry.io/*", "registry.io/app", False),
    ("registry.io", "REGISTRY.io/app", False),
    # '?' starts a URL query and a leading '[' an IPv6 literal in Go's url.Parse: such patterns
    # never match anything in the kubelet, even though filepath.Match would accept them.
    ("reg?stry.io", "registry.io/app", False),
    ("[a-r]egistry.io", "registry.io/x", False),
    ("r[e]gistry.io", "registry.io/x", True),
    ("reg*y.io", "registry.io/x", True),
    ("[^r]egistry.io", "registry.io/x", False),
    ("[", "[/x", False),
    ("*.dkr.ecr.*.amazonaws.com", "123456789012.dkr.ecr.us-east-1.amazonaws.com/app", True),
    ("*.dkr.ecr.*.amazonaws.com", "123456789012.dkr.ecr.us-east-1.amazonaws.com.cn/app", False),
    ("*.dkr.ecr.*.amazonaws.com", "123456789012.dkr.ecr.us-east-1.amazonaws.com:443/app", False),
    ("*.azurecr.io", "foo.azurecr.io.evil.net/x", False),
    ("*.pkg.dev", "us-central1-docker.pkg.dev/p/r/i", True),
    ("[::1]:5000", "[::1]:5000/app", True),
    ("a b.io", "a b.io/x", False),
    ("a%zz.io", "a%zz.io/x", False),
]


@pytest.mark.parametrize(("pattern", "image", "expected"), URL_MATCH_CASES)
def test_urls_match_like_the_kubelet(pattern: str, image: str, expected: bool) -> None:
    assert urls_match(pattern, image) is expected


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("abc", "abc", True),
        ("*", "abc", True),
        ("*c", "abc", True),
        ("a*", "a", True),
        ("a*", "abc", True),
        ("a*", "ab/c", False),
        ("a*/b", "abc/b", True),
        ("a*b?c*x", "abxbbxdbxebxczzx", True),
        ("a*b?c*x", "abxbbxdbxebxczzy", False),
        ("ab[c]", "abc", True),
        ("ab[b-d]", "abc", True),
        ("ab[e-g]", "abc", False),
        ("ab[^c]", "abc", False),
        ("ab[^b-d]", "abc", False),
        ("ab[^e-g]", "abc", True),
        ("a\\*b", "a*b", True),
        ("a\\*b", "ab", False),
        ("a?b", "a☺b", True),
        ("a[^a]b", "a☺b", True),
        ("a???b", "a☺b", False),
        ("*x", "xxx", True),
        ("[\\]a]", "]", True),
        ("[\\-]", "-", True),
        ("[x\\-]", "z", False),
        ("[]a]", "]", False),
        ("[-]", "-", False),
        ("[x-]", "x", False),
        ("[a-b-c]", "a", False),
        ("[", "a", False),
        ("[^", "a", False),
        ("[^bc", "a", False),
        ("a[", "a", False),
        ("a[", "ab", False),
        ("*x[", "xxx", False),
        ("\\", "a", False),
    ],
)
def test_go_filepath_match(pattern: str, name: str, expected: bool) -> None:
    # Go's path/filepath match_test.go vectors; a malformed pattern never matches.
    assert go_path_match(pattern, name) is expected


@pytest.mark.parametrize(
    ("key", "index_key"),
    [
        ("registry.io", "registry.io"),
        ("https://registry.io", "registry.io"),
        ("http://registry.io:5000/", "registry.io:5000"),
        ("https://index.docker.io/v1/", "index.docker.io"),
        ("registry.io/v2/team", "registry.io/team"),
        ("registry.io/team/app", "registry.io/team/app"),
        ("*.azurecr.io", "*.azurecr.io"),
        ("bad host.io", None),
        ("reg.io:port", None),
    ],
)
def test_keyring_key_normalization(key: str, index_key: str | None) -> None:
    assert keyring_key(key) == index_key


def test_keyring_lookup_orders_and_filters_like_the_kubelet() -> None:
    keys = ["*.azurecr.*", "myreg.azurecr.io", "*.azurecr.io", "other.azurecr.io"]
    assert keyring_lookup(keys, "myreg.azurecr.io/app") == [
        "myreg.azurecr.io",
        "*.azurecr.io",
        "*.azurecr.*",
    ]


def test_keyring_lookup_docker_hub_fallback() -> None:
    assert keyring_lookup(["https://index.docker.io/v1/"], "docker.io/library/nginx") == [
        "https://index.docker.io/v1/"
    ]
    assert keyring_lookup(["https://index.docker.io/v1/"], "quay.io/org/app") == []


@pytest.mark.parametrize(
    ("reference", "name"),
    [
        ("nginx", "docker.io/library/nginx"),
        ("nginx:1.25", "docker.io/library/nginx"),
        ("library/nginx", "docker.io/library/nginx"),
        ("user/app:tag", "docker.io/user/app"),
        ("docker.io/nginx", "docker.io/library/nginx"),
        ("index.docker.io/library/nginx", "docker.io/library/nginx"),
        ("localhost/app", "localhost/app"),
        ("localhost:5000/app:1", "localhost:5000/app"),
        ("registry.io:5000/a/b@sha256:" + "a" * 64, "registry.io:5000/a/b"),
        ("registry.io/a/b:v1@sha256:" + "b" * 64, "registry.io/a/b"),
        (
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/app:v1",
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/app",
        ),
        ("[::1]:5000/app", "[::1]:5000/app"),
        ("Registry.IO/app", "Registry.IO/app"),
        ("us-central1-docker.pkg.dev/proj/repo/img", "us-central1-docker.pkg.dev/proj/repo/img"),
    ],
)
def test_parse_image_normalizes_like_the_kubelet(reference: str, name: str) -> None:
    assert parse_image(reference).name == name


def test_parse_image_parts() -> None:
    ref = parse_image("registry.io:5000/team/app:v2")
    assert (ref.registry, ref.host, ref.port, ref.repository) == (
        "registry.io:5000",
        "registry.io",
        "5000",
        "team/app",
    )


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("", "empty"),
        ("https://registry.io/app", "URL scheme"),
        ("registry.io/app name", "whitespace"),
        ("registry.io/app\x00", "control"),
        ("ｒegistry.io/app", "non-ASCII"),
        ("registry.io/App", "repository path component 'App'"),
        ("registry.io:99999/app", "port '99999'"),
        ("registry.io:0/app", "port '0'"),
        ("registry.io:ab/app", "port 'ab'"),
        ("registry.io:" + "9" * 5000 + "/app", "is not a number"),  # int() refuses 4,300 digits
        ("foo.azurecr.io@evil.net/x", "invalid digest"),
        ("registry.io/app@sha256:zz", "invalid digest"),
        ("r%2e.io/x", "not a valid host name"),
        ("-bad.io/x", "not a valid host name"),
        ("registry.io/app:", "invalid tag"),
        ("[::1/app", "unclosed"),
    ],
)
def test_parse_image_refuses_what_is_not_a_reference(reference: str, message: str) -> None:
    with pytest.raises(ImageError) as caught:
        parse_image(reference)
    assert message in str(caught.value)


@given(st.text(max_size=80))
def test_parse_image_raises_only_image_error(reference: str) -> None:
    with contextlib.suppress(ImageError):
        parse_image(reference)


@given(st.text(max_size=40), st.text(max_size=40))
def test_urls_match_never_raises(pattern: str, image: str) -> None:
    assert urls_match(pattern, image) in (True, False)


@given(
    st.from_regex(
        r"[a-z0-9]{1,10}(\.[a-z0-9]{1,10}){1,3}(:[1-9][0-9]{0,3})?/[a-z0-9]{1,8}", fullmatch=True
    )
)
def test_the_registry_of_an_image_always_matches_it(image: str) -> None:
    registry = parse_image(image).registry
    assert urls_match(registry, image)
    assert keyring_lookup([registry], image) == [registry]


@pytest.mark.parametrize(
    ("reference", "host"),
    [
        ("123456789012.dkr.ecr.us-west-2.amazonaws.com", "123456789012.dkr.ecr.us-west-2.amazonaws.com"),
        ("myreg.azurecr.io:443", "myreg.azurecr.io:443"),
        ("GCR.IO", "gcr.io"),
        ("nginx", None),
        ("nginx:1.27", None),
        ("library/nginx", None),
        ("gcr.io/project/app", None),
        ("my.image:latest", None),  # name:tag (a tag is not a port)
        ("host.example.com@sha256:" + "a" * 64, None),
        ("a..b", None),
        ("under_score.example.com", None),
    ],
)  # fmt: skip
def test_bare_registry_host(reference: str, host: str | None) -> None:
    from credprovider.runtime.imageref import bare_registry_host

    assert bare_registry_host(reference) == host


_CHECKERS = {
    "domain label": ("_DOMAIN_LABEL_PATTERN", "is_domain_label"),
    "tag": ("_TAG_PATTERN", "is_tag"),
    "path component": ("_PATH_COMPONENT_PATTERN", "is_path_component"),
    "digest": ("_DIGEST_PATTERN", "is_digest"),
}
_GRAMMAR_ALPHABET = "aAzZ09_.-+:/@ \u00e9"


@pytest.mark.parametrize("what", sorted(_CHECKERS))
@given(text=st.text(alphabet=_GRAMMAR_ALPHABET, max_size=12) | st.from_regex(r"[a-z0-9._-]{1,12}"))
def test_hand_checkers_agree_with_the_grammar(what: str, text: str) -> None:
    """The image grammar is checked without re (a cache hit would pay for importing it): each
    checker accepts exactly what its docker/distribution pattern matches."""
    import re

    from credprovider.runtime import imageref

    pattern_name, checker_name = _CHECKERS[what]
    pattern = re.compile(getattr(imageref, pattern_name), re.ASCII)
    assert getattr(imageref, checker_name)(text) == bool(pattern.fullmatch(text)), text


@pytest.mark.parametrize(
    ("what", "text"),
    [
        ("digest", "sha256:" + "a" * 64),
        ("digest", "sha256+b64.x_y-z:" + "A" * 32),
        ("digest", "sha256:" + "a" * 31),
        ("digest", "2sha:" + "a" * 32),
        ("digest", "sha256::" + "a" * 32),
        ("tag", "v" + "1" * 127),
        ("tag", "v" + "1" * 128),
        ("tag", "_x"),
        ("tag", ".x"),
        ("path component", "a__b"),
        ("path component", "a___b"),
        ("path component", "a---b"),
        ("path component", "a._b"),
        ("path component", "a-"),
        ("domain label", "a-b"),
        ("domain label", "-a"),
    ],
)
def test_hand_checkers_on_the_edges(what: str, text: str) -> None:
    import re

    from credprovider.runtime import imageref

    pattern_name, checker_name = _CHECKERS[what]
    pattern = re.compile(getattr(imageref, pattern_name), re.ASCII)
    assert getattr(imageref, checker_name)(text) == bool(pattern.fullmatch(text))

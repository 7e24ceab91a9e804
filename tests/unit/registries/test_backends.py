"""registry-credential-provider's pure parts: the settings each backend takes, the hosts its
credential may go to, each backend's call, and reading what each answers (including the answers
it must refuse)."""

from __future__ import annotations

import base64
import json
import time

import pytest

from credprovider.registries.backends import Backend, parse_settings, serves
from credprovider.registries.descriptor import annotation_lints, lints
from credprovider.registries.wire import (
    read_issued,
    read_pull_secret,
    read_vault_secret,
    secret_name,
    token_call,
    token_namespace,
)
from emulators.federation import Issuer, dockerconfigjson

QUAY = {"backend": "quay", "url": "https://quay.example.test/", "robot": "team+puller"}


def test_quays_registry_is_its_url_host_with_and_without_the_port() -> None:
    settings = parse_settings({**QUAY, "url": "https://quay.example.test:443"})
    assert settings.url == "https://quay.example.test:443"
    assert serves(settings, "quay.example.test") and serves(settings, "quay.example.test:443")
    assert not serves(settings, "quay.example.test.evil.test")
    assert not serves(settings, "other.example.test")


def test_cloudsmith_defaults_to_its_api_and_its_registry() -> None:
    settings = parse_settings({"backend": "cloudsmith", "org": "acme", "service_slug": "ci"})
    assert settings.url == "https://api.cloudsmith.io"
    assert settings.registries == ("docker.cloudsmith.io",)


def test_the_secret_backend_serves_any_host_its_secret_names() -> None:
    settings = parse_settings({"backend": "secret", "url": "https://10.0.0.1:6443"})
    assert serves(settings, "anything.example.test")


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({**QUAY, "url": "https://user@quay.example.test"}, "is not a URL"),
        ({**QUAY, "url": "https://quay.example.test/?x=1"}, "is not a URL"),
        ({**QUAY, "url": "https://quay.example.test#x"}, "is not a URL"),
        ({**QUAY, "url": "https://quay.example.test:https"}, "is not a URL"),
        ({**QUAY, "url": "ftp://quay.example.test"}, "must be an https:// URL"),
        ({**QUAY, "url": "http://127.0.0.1:8080"}, ""),  # loopback http is allowed
        ({**QUAY, "robot": "puller"}, "is not a robot account"),
        ({**QUAY, "registries": "a b"}, "is not a registry host"),
        ({"backend": "secret", "url": "https://h", "annotation": "bad key!"}, "annotation key"),
        ({"backend": "vault", "url": "https://v", "role": "r", "secret_path": "/abs",
          "registries": "h"}, "is not a secret path"),
        ({"backend": "artifactory", "url": "https://a", "provider_name": "p\x1b[0m"},
         "is not a name"),
    ],
)  # fmt: skip
def test_settings_refused_with_the_flag_named(values: dict[str, str], said: str) -> None:
    if not said:
        parse_settings(values)
        return
    with pytest.raises(ValueError, match=said.replace("(", r"\(")):
        parse_settings(values)


def test_each_call_is_the_documented_one() -> None:
    token = "header.payload.signature"
    quay = token_call(parse_settings(QUAY), token, {})
    assert (quay.method, quay.url) == (
        "GET",
        "https://quay.example.test/oauth2/federation/robot/token",
    )
    assert (
        base64.b64decode(quay.headers["Authorization"].split()[1])
        == f"team+puller:{token}".encode()
    )
    sts = token_call(parse_settings({**QUAY, "backend": "quay-sts"}), token, {})
    assert (sts.method, sts.url) == ("POST", "https://quay.example.test/sts/token")
    assert b"resource=urn%3Aquay%3Arobot%3Ateam%2Bpuller" in (sts.body or b"")
    vault = token_call(parse_settings({"backend": "vault", "url": "https://v:8200", "role": "r",
                                       "secret_path": "a/b", "registries": "h",
                                       "vault_namespace": "ns1", "auth_mount": "jwt"}), token, {})  # fmt: skip
    assert vault.url == "https://v:8200/v1/auth/jwt/login"
    assert vault.headers["X-Vault-Namespace"] == "ns1"
    assert json.loads(vault.body or b"") == {"role": "r", "jwt": token}


def test_the_secret_call_takes_its_namespace_from_the_token_and_its_name_from_the_annotation() -> (
    None
):
    issuer = Issuer(url="https://issuer.example.test")
    settings = parse_settings({"backend": "secret", "url": "https://api:6443"})
    token = issuer.token(namespace="team-a")
    call = token_call(settings, token, {"registry.credprovider.io/pull-secret": "pull.creds"})
    assert call.url == "https://api:6443/api/v1/namespaces/team-a/secrets/pull.creds"
    assert call.headers["Authorization"] == f"Bearer {token}"
    for name in ("../x", "a/b", "A", "", "x" * 254, "stra\u00dfe", "pull.\u0663"):
        with pytest.raises(ValueError):
            secret_name(settings, {"registry.credprovider.io/pull-secret": name})
    for namespace in ("team-\u00e9", "Team", "-a", "a/../b"):
        with pytest.raises(ValueError, match="names no namespace"):
            token_namespace(issuer.token(namespace=namespace))
    with pytest.raises(ValueError, match="names no namespace"):
        token_namespace("not.a.jwt")


def test_reading_what_each_backend_answers() -> None:
    now = time.time()
    quay = parse_settings(QUAY)
    jwt = Issuer(url="https://i").token(expires_in=900)
    issued = read_issued(quay, {"token": jwt}, now)
    assert issued.username == "team+puller" and issued.password == jwt
    # the token's exp is whole seconds from when it is made, a moment after now: up to 1 s more
    assert issued.expires_at is not None and 890 <= issued.expires_at - now <= 901
    sts = read_issued(parse_settings({**QUAY, "backend": "quay-sts"}),
                      {"access_token": "t", "expires_in": 3600}, now)  # fmt: skip
    assert sts.expires_at == now + 3600
    for said, ends in (("1800", now + 1800), (0, now), (-5, now), ("soon", now), (True, now),
                       ("9" * 5000, now), (None, None)):  # fmt: skip
        answer = {"access_token": "t", "expires_in": said}
        assert read_issued(parse_settings({**QUAY, "backend": "quay-sts"}), answer, now) == (
            "team+puller", "t", ends), said  # fmt: skip
    jfrog = parse_settings({"backend": "artifactory", "url": "https://a", "provider_name": "p"})
    assert read_issued(jfrog, {"access_token": "t", "username": "u"}, now).expires_at is None
    for bad in ({}, {"token": ""}, {"token": 5}, [], "x"):
        with pytest.raises(ValueError):
            read_issued(quay, bad, now)
    vault = parse_settings({"backend": "vault", "url": "https://v", "role": "r",
                            "secret_path": "p", "registries": "h"})  # fmt: skip
    assert read_vault_secret(vault, {"data": {"data": {"username": "u", "password": "p"}}}) == (
        "u", "p", None)  # fmt: skip
    with pytest.raises(ValueError, match="not a KV version 2 secret"):
        read_vault_secret(vault, {"data": {"username": "u", "password": "p"}})  # KV v1's shape


def test_a_pull_secret_is_read_for_the_images_host_only() -> None:
    secret = dockerconfigjson({"https://index.docker.io/v1/": ("hub", "hub-pass"),
                               "reg.example.test:443": ("reg", "reg-pass")})  # fmt: skip
    assert read_pull_secret(secret, "docker.io")[:2] == ("hub", "hub-pass")
    assert read_pull_secret(secret, "reg.example.test")[:2] == ("reg", "reg-pass")
    with pytest.raises(ValueError, match=r"no auths entry for other\.example\.test"):
        read_pull_secret(secret, "other.example.test")
    with pytest.raises(ValueError, match="not of type"):
        read_pull_secret({**secret, "type": "Opaque"}, "docker.io")
    broken = {**secret, "data": {".dockerconfigjson": "%%%"}}
    with pytest.raises(ValueError, match="not base64 JSON"):
        read_pull_secret(broken, "docker.io")


ARGS = ["--backend", "secret", "--url", "https://api:6443"]


def test_validate_names_what_the_kubelet_would_silently_skip() -> None:
    said = annotation_lints(ARGS, [])
    assert len(said) == 1 and "optionalServiceAccountAnnotationKeys" in said[0]
    assert annotation_lints(ARGS, ["registry.credprovider.io/pull-secret"]) == []
    custom = [*ARGS, "--annotation", "example.com/secret"]
    assert annotation_lints(custom, ["example.com/secret"]) == []
    assert (
        "is not read by the quay backend"
        in annotation_lints(["--backend", "quay", "--url", "https://q", "--robot", "a+b"], ["x/y"])[
            0
        ]
    )
    assert "refuses these args" in lints(["quay.example.test"], ["--backend", "quay"], [])[0]
    assert "matchImages is empty" in lints([], ARGS, [])[0]
    assert (
        lints(["*.example.test"], ["--backend", "quay", "--url", "https://q", "--robot", "a+b"], [])
        == []
    )


def test_backend_titles_name_each_backend() -> None:
    assert {b.title for b in Backend} and len({b.title for b in Backend}) == len(Backend)


@pytest.mark.parametrize(
    "args", [["--backend", "quay", "--bogus", "x"], ["--backend", "quay", "stray"], ["--url"]]
)
def test_args_the_plugin_refuses_are_a_warning_never_an_escaping_error(args: list[str]) -> None:
    """validate, explain and doctor read the args as the plugin does, and say what it refuses."""
    from credprovider.registries.descriptor import explain, identity

    (said,) = lints(["quay.example.test"], args, [])
    assert said.startswith("every pull through it fails: the plugin refuses these args: ")
    assert annotation_lints(args, ["x/y"]) == []  # said once, by lints
    assert not explain("quay.example.test", "quay.example.test", args).recognized
    assert "not probed" in str(identity({}, args, lambda path: None, lambda path: False))

"""The dockercfg and dockercfg-url flows: registry credentials from instance metadata."""

from __future__ import annotations

import base64
import json

import pytest

from emulators.gcp import FakeMetadata
from emulators.http import FakeResponse, FakeServer, serve
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.integration.gcp.common import PLUGIN, gcp_env


def _b64(text: str, pad: bool = True) -> str:
    encoded = base64.b64encode(text.encode()).decode()
    return encoded if pad else encoded.rstrip("=")


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"username": "user", "password": "pass", "email": "a@b.c"}, ("user", "pass")),
        ({"username": "ignored", "auth": _b64("from:auth")}, ("from", "auth")),
        ({"auth": _b64("unpadded:x", pad=False)}, ("unpadded", "x")),
        ({"auth": _b64("wrapped:line") + "\n"}, ("wrapped", "line")),
    ],
)
def test_dockercfg_flow(
    metadata: tuple[FakeMetadata, FakeServer], entry: dict[str, str], expected: tuple[str, str]
) -> None:
    fake, server = metadata
    fake.attributes["google-dockercfg"] = json.dumps({"private.example.com": entry})
    run = run_plugin(
        PLUGIN,
        request_bytes("private.example.com/app"),
        ["get-credentials", "--authFlow=dockercfg"],
        gcp_env(server),
    )
    assert run.response["auth"] == {
        "private.example.com": {"username": expected[0], "password": expected[1]}
    }
    assert run.response["cacheKeyType"] == "Global"
    # no expiry known, and it may rotate: a minute, not the config's defaultCacheDuration (hours)
    assert run.response["cacheDuration"] == "1m0s"


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        (
            json.dumps({"r.io": {"auth": "bm8gY29sb24="}}),
            "must be formatted as base64(username:password)",
        ),
        (json.dumps({"r.io": {"auth": "dXNlcjpwYXNz =="}}), "not valid base64"),
        (json.dumps({"r.io": {"auth": "!!!"}}), "not valid base64"),
        ("{not json", "not valid JSON"),
        (json.dumps(["r.io"]), "expected a JSON object"),
    ],
)
def test_dockercfg_errors(
    metadata: tuple[FakeMetadata, FakeServer], attribute: str, message: str
) -> None:
    fake, server = metadata
    fake.attributes["google-dockercfg"] = attribute
    run = run_plugin(
        PLUGIN,
        request_bytes("r.io/a"),
        ["get-credentials", "--authFlow=dockercfg"],
        gcp_env(server),
    )
    assert (run.code, run.stdout) == (1, b"")
    assert message in run.stderr


def test_dockercfg_attribute_missing_is_an_error(metadata: tuple[FakeMetadata, FakeServer]) -> None:
    _, server = metadata
    run = run_plugin(
        PLUGIN,
        request_bytes("r.io/a"),
        ["get-credentials", "--authFlow=dockercfg"],
        gcp_env(server),
    )
    assert run.code == 1
    assert "could not read instance attribute google-dockercfg" in run.stderr


def test_dockercfg_url_flow(metadata: tuple[FakeMetadata, FakeServer]) -> None:
    fake, server = metadata
    cfg = json.dumps({"r.io": {"username": "u", "password": "from-url-secret"}})
    with serve(lambda _: FakeResponse.text(cfg)) as cfg_server:
        fake.attributes["google-dockercfg-url"] = f"{cfg_server.url}/dockercfg.json"
        run = run_plugin(
            PLUGIN,
            request_bytes("r.io/a"),
            ["get-credentials", "--authFlow", "dockercfg-url"],
            gcp_env(server),
        )
        assert run.response["auth"] == {"r.io": {"username": "u", "password": "from-url-secret"}}
        assert (run.response["cacheKeyType"], run.response["cacheDuration"]) == ("Global", "1m0s")
        assert [r.path for r in cfg_server.requests] == ["/dockercfg.json"]
        assert "metadata-flavor" not in cfg_server.requests[0].headers


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("gs://bucket/cfg", "only http(s) URLs are supported"),
        (
            "http://127.0.0.1:9/cfg",
            "could not download the .dockercfg from http://127.0.0.1:9/cfg: ",
        ),
    ],
)
def test_dockercfg_url_errors(
    metadata: tuple[FakeMetadata, FakeServer], url: str, message: str
) -> None:
    fake, server = metadata
    fake.attributes["google-dockercfg-url"] = url
    run = run_plugin(
        PLUGIN, request_bytes("r.io/a"), ["get-credentials", "-a", "dockercfg-url"], gcp_env(server)
    )
    assert run.code == 1 and message in run.stderr
    if url.startswith("http"):  # what to check, as every unreachable service's line says
        assert "check that 127.0.0.1:9 is reachable from this node" in run.stderr

"""Upstream's flags and cache environment variables, checked as upstream does before any request."""

from __future__ import annotations

import json

import pytest

from emulators.gcp import FakeMetadata
from emulators.http import FakeServer
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.integration.gcp.common import IDP, PLUGIN, POOL, gcp_env


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["get-credentials", "--authFlow", "GCR"],
            'invalid value "GCR" for authFlow (must be one of "gcr", "dockercfg", or "dockercfg-url")',
        ),
        (["get-credentials", "-a", "dockerConfig"], 'invalid value "dockerConfig" for authFlow'),
        (
            ["get-credentials", "--identity-provider", IDP],
            "--project-id is required when --identity-provider is set",
        ),
        (
            ["get-credentials", "--authFlow=dockercfg", "--identity-provider", IDP],
            "--project-id is required when --identity-provider is set",
        ),
        (["fetch"], "unknown command 'fetch'"),
        (
            ["get-credentials", "--sts-endpoint", "http://sts.example.com/v1/token"],
            "must be an https:// URL",
        ),
        (  # the runtime's one rule (runtime.http.credential_endpoint), as the registry plugin's
            ["get-credentials", "--sts-endpoint", "https://user@sts.example.com/v1/token"],
            "is not a URL like https://host[:port][/path]",
        ),
        (["get-credentials", "--bogus"], "unrecognized arguments: --bogus"),
        (
            ["get-credentials", "--sts-audience", POOL, "--identity-provider", IDP],
            "give --sts-audience (Workload Identity Federation) or --identity-provider with "
            "--project-id (GKE Workload Identity), not both",
        ),
        (
            ["get-credentials", "--sts-audience", f"https:{POOL}"],
            "is not a workload identity pool provider: give //iam.googleapis.com/projects/<project "
            "number>/locations/global/workloadIdentityPools/<pool>/providers/<provider> (the "
            "project's number, not its ID; no https:)",
        ),
        (
            ["get-credentials", "--sts-audience", POOL.replace("123456789012", "my-project")],
            "is not a workload identity pool provider",
        ),
    ],
)
def test_flag_validation(args: list[str], message: str) -> None:
    run = run_plugin(PLUGIN, request_bytes("gcr.io/p/a"), args)
    assert (run.code, run.stdout) == (1, b"")
    assert message in run.error_lines[0]


def test_identity_provider_with_another_flow_only_warns(
    metadata: tuple[FakeMetadata, FakeServer],
) -> None:
    fake, server = metadata
    fake.attributes["google-dockercfg"] = json.dumps({"r.io": {"username": "u", "password": "p"}})
    run = run_plugin(
        PLUGIN,
        request_bytes("r.io/a"),
        [
            "get-credentials",
            "--authFlow=dockercfg",
            "--identity-provider",
            IDP,
            "--project-id",
            "my-project",
        ],
        gcp_env(server),
    )
    assert run.code == 0
    assert "This flag only has effect when --authFlow=gcr." in run.stderr


@pytest.mark.parametrize(
    ("env", "duration", "key_type"),
    [
        ({"KUBE_SIDECAR_CACHE_DURATION": "1m"}, "1m0s", "Global"),
        ({"KUBE_SIDECAR_CACHE_TYPE": "image"}, "29m59s", "Image"),
        (
            {"KUBE_SIDECAR_CACHE_TYPE": "registry", "KUBE_SIDECAR_CACHE_DURATION": "0"},
            "0s",
            "Registry",
        ),
    ],
)
def test_upstream_cache_env_overrides(
    metadata: tuple[FakeMetadata, FakeServer], env: dict[str, str], duration: str, key_type: str
) -> None:
    _, server = metadata
    run = run_plugin(
        PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials"], gcp_env(server, **env)
    )
    assert (run.response["cacheDuration"], run.response["cacheKeyType"]) == (duration, key_type)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KUBE_SIDECAR_CACHE_TYPE": "Image"}, 'Unknown cache key "Image"'),
        ({"KUBE_SIDECAR_CACHE_DURATION": "1 hour"}, "KUBE_SIDECAR_CACHE_DURATION"),
    ],
)
def test_bad_cache_env_is_an_error_before_any_request(
    metadata: tuple[FakeMetadata, FakeServer], env: dict[str, str], message: str
) -> None:
    fake, server = metadata
    run = run_plugin(
        PLUGIN, request_bytes("gcr.io/p/a"), ["get-credentials"], gcp_env(server, **env)
    )
    assert run.code == 1 and message in run.stderr
    assert fake.paths == []

"""The runtime contract every plugin keeps, written once: a cloud's test module subclasses
:class:`ProviderContract` and supplies only its emulator (as keyring's backend suite is subclassed
by every backend's tests).

A subclass provides ``plugin``, ``image`` and the ``cloud`` fixture: a :class:`Cloud` whose env
points the plugin at running emulators, with the credential they issue and a switch that makes
them refuse.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from credprovider.api import API_VERSIONS
from tests.helpers import PluginRun, request_bytes, run_plugin


@dataclass
class Cloud:
    env: dict[str, str]
    username: str
    password: Callable[[], set[str]]  # every password the emulators have issued so far
    calls: Callable[[], int]  # how many credential calls the emulators have answered
    refuse: Callable[[], None]  # from now on, the emulators refuse with an error
    args: list[str] = field(default_factory=list)


class ProviderContract:
    plugin: str
    image: str  # an image of the cloud's own registries

    def run(self, cloud: Cloud, stdin: bytes, *extra: str, **env: str) -> PluginRun:
        return run_plugin(self.plugin, stdin, [*cloud.args, *extra], {**cloud.env, **env})

    @pytest.mark.parametrize("api_version", API_VERSIONS)
    def test_one_response_in_the_requests_api_version(self, cloud: Cloud, api_version: str) -> None:
        run = self.run(cloud, request_bytes(self.image, api_version))
        response = run.response
        assert run.stdout.count(b"\n") == 1 and run.stdout.endswith(b"\n")
        assert response["kind"] == "CredentialProviderResponse"
        assert response["apiVersion"] == api_version
        assert response["cacheKeyType"] in ("Image", "Registry", "Global")
        assert response["auth"], response
        for entry in response["auth"].values():
            assert entry["username"] == cloud.username
            assert entry["password"] in cloud.password()

    def test_a_refusal_is_one_line_and_nothing_on_stdout(self, cloud: Cloud) -> None:
        cloud.refuse()
        run = self.run(cloud, request_bytes(self.image))
        assert (run.code, run.stdout) == (1, b"")
        lines = run.error_lines
        assert len(lines) == 1 and lines[0].startswith(f"{self.plugin}: error: "), run.stderr
        assert "Traceback" not in run.stderr

    @pytest.mark.parametrize("stdin", [b"", b"{", b'{"kind":"CredentialProviderRequest"}', b"\xff"])
    def test_a_bad_request_is_one_line(self, cloud: Cloud, stdin: bytes) -> None:
        run = self.run(cloud, stdin)
        assert (run.code, run.stdout) == (1, b"")
        assert len(run.error_lines) == 1, run.stderr
        assert cloud.calls() == 0

    def test_no_secret_reaches_stderr_at_any_verbosity(self, cloud: Cloud) -> None:
        run = self.run(cloud, request_bytes(self.image), "-v=10")
        assert run.code == 0, run.stderr
        issued = cloud.password()
        assert issued and not any(secret in run.stderr for secret in issued)

    def test_the_cache_serves_the_second_exec(self, cloud: Cloud, tmp_path: Path) -> None:
        cache = str(tmp_path / "cache")
        first = self.run(cloud, request_bytes(self.image), CREDPROVIDER_CACHE_DIR=cache)
        calls = cloud.calls()
        second = self.run(cloud, request_bytes(self.image), CREDPROVIDER_CACHE_DIR=cache)
        assert first.code == second.code == 0, second.stderr
        assert cloud.calls() == calls >= 1
        assert json.loads(second.stdout)["auth"] == json.loads(first.stdout)["auth"]

    def test_version_and_help_need_no_request(self, cloud: Cloud) -> None:
        version = self.run(cloud, b"", "--version")
        assert version.code == 0 and self.plugin.encode() in version.stdout
        shown = self.run(cloud, b"", "--help")
        assert shown.code == 0 and "usage:" in shown.stderr and shown.stdout == b""

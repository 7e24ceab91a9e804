"""The runtime contract every plugin keeps, written once: a cloud's test module subclasses
:class:`ProviderContract` and supplies only its emulator (as keyring's backend suite is subclassed
by every backend's tests).

A subclass provides ``plugin``, ``image`` and the ``cloud`` fixture: a :class:`Cloud` whose env
points the plugin at running emulators, with the credential they issue and a switch that makes
them refuse.

The contract is checked twice over: through an exec of the plugin (what the kubelet sees), and
in this process through the plugin's own spec and the seams of :mod:`tests.contract.in_process`
(the provider, its cache scope and the caching decorator, with the errors they raise).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from credprovider.errors import CredproviderError
from credprovider.runtime.api import API_V1, API_VERSIONS, CACHE_KEY_TYPES, parse_request
from credprovider.runtime.caching import with_cache
from credprovider.runtime.imageref import parse_image
from credprovider.runtime.provider import Credentials, Provider
from emulators.kubelet_exec import PluginRun, request_bytes, run_plugin
from tests.contract.in_process import InProcess, in_process


@dataclass
class Cloud:
    env: dict[str, str]
    username: str
    password: Callable[[], set[str]]  # every password the emulators have issued so far
    calls: Callable[[], int]  # how many credential calls the emulators have answered
    refuse: Callable[[], None]  # from now on, the emulators refuse with an error
    args: list[str] = field(default_factory=list)
    # A plugin answering only with the pod's identity: the kubelet's service-account token (and
    # the annotations its tokenAttributes pass) in every request. The plugin's own cache is not
    # used for such requests (the kubelet caches them): each exec asks the backend.
    token: str = ""
    annotations: dict[str, str] = field(default_factory=dict)


class ProviderContract:
    plugin: str
    image: str  # an image of the cloud's own registries

    def run(self, cloud: Cloud, stdin: bytes, *extra: str, **env: str) -> PluginRun:
        return run_plugin(self.plugin, stdin, [*cloud.args, *extra], {**cloud.env, **env})

    def request(self, cloud: Cloud, api_version: str = API_V1) -> bytes:
        """The kubelet's request for this contract's image (with the cloud's token, if any)."""
        return request_bytes(self.image, api_version, cloud.token or None, cloud.annotations)

    @pytest.mark.parametrize("api_version", API_VERSIONS)
    def test_one_response_in_the_requests_api_version(self, cloud: Cloud, api_version: str) -> None:
        run = self.run(cloud, self.request(cloud, api_version))
        if cloud.token and api_version != API_V1:  # no token fields before v1: one line, no answer
            assert (run.code, run.stdout, len(run.error_lines)) == (1, b"", 1), run.stderr
            assert "no service account token" in run.stderr
            return
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
        run = self.run(cloud, self.request(cloud))
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
        run = self.run(cloud, self.request(cloud), "-v=10")
        assert run.code == 0, run.stderr
        issued = cloud.password()
        assert issued and not any(secret in run.stderr for secret in issued)

    def test_the_cache_serves_the_second_exec(self, cloud: Cloud, tmp_path: Path) -> None:
        cache = str(tmp_path / "cache")
        first = self.run(cloud, self.request(cloud), CREDPROVIDER_CACHE_DIR=cache)
        calls = cloud.calls()
        second = self.run(cloud, self.request(cloud), CREDPROVIDER_CACHE_DIR=cache)
        assert first.code == second.code == 0, second.stderr
        if cloud.token:  # the kubelet caches token requests, keyed by the token: never this cache
            assert cloud.calls() > calls >= 1
            return
        assert cloud.calls() == calls >= 1
        assert json.loads(second.stdout)["auth"] == json.loads(first.stdout)["auth"]

    @pytest.mark.parametrize("flag", ["--version", "-v"])
    def test_version_needs_no_request(self, flag: str, use_bundle: bool) -> None:
        version = run_plugin(self.plugin, b"", [flag], use_bundle=use_bundle)
        assert version.code == 0, version.stderr
        assert version.stdout.startswith(f"{self.plugin} version ".encode())

    def test_help_needs_no_request(self, cloud: Cloud) -> None:
        shown = self.run(cloud, b"", "--help")
        assert shown.code == 0 and "usage:" in shown.stderr and shown.stdout == b""

    # The same contract in this process: the provider seam itself, against the same emulators.

    @pytest.fixture
    def node(self, cloud: Cloud) -> Iterator[InProcess]:
        with in_process(self.plugin, cloud.env, cloud.args) as node:
            yield node

    def answer(
        self, node: InProcess, cloud: Cloud, provider: Provider | None = None
    ) -> Credentials:
        """The provider's answer to this contract's image, planned then fulfilled as serve does."""
        request = parse_request(self.request(cloud))
        chosen = provider or node.provider
        return chosen.fulfil(
            chosen.plan(parse_image(self.image), request, node.ctx), request, node.ctx
        )

    def test_in_process_the_provider_returns_what_the_emulators_issued(
        self, cloud: Cloud, node: InProcess
    ) -> None:
        creds = self.answer(node, cloud)
        assert cloud.calls() >= 1
        assert creds.auth and creds.cache_key_type in CACHE_KEY_TYPES
        for entry in creds.auth.values():
            assert entry.username == cloud.username
            assert entry.password in cloud.password()
        assert creds.expires_at is None or creds.expires_at > time.time()
        assert creds.cache_duration is None or creds.cache_duration > 0

    def test_in_process_the_plan_names_the_answer_and_no_secret(
        self, cloud: Cloud, node: InProcess
    ) -> None:
        """The plan fetches nothing, its keys are the answer's, and its scope holds no secret."""
        request = parse_request(self.request(cloud))
        plan = node.provider.plan(parse_image(self.image), request, node.ctx)
        assert cloud.calls() == 0  # planning fetches nothing
        creds = node.provider.fulfil(plan, request, node.ctx)
        scope = plan.cache_scope(self.plugin)
        assert scope is not None and scope.provider == self.plugin
        assert scope.registry == parse_image(self.image).registry
        assert plan.keys and sorted(plan.keys) == sorted(creds.auth)
        issued = cloud.password()
        assert issued and not any(secret in repr(plan) for secret in issued)

    def test_in_process_a_refusal_is_one_line_under_the_error_root(
        self, cloud: Cloud, node: InProcess
    ) -> None:
        cloud.refuse()
        with pytest.raises(CredproviderError) as raised:
            self.answer(node, cloud)
        message = str(raised.value)
        assert message.strip() and "\n" not in message
        assert cloud.calls() >= 1  # the emulators were reached, and refused

    def test_in_process_no_secret_is_logged_at_any_verbosity(
        self, cloud: Cloud, node: InProcess
    ) -> None:
        self.answer(node, cloud)
        issued, logged = cloud.password(), node.log.getvalue()
        assert logged and issued and not any(secret in logged for secret in issued)

    def test_in_process_the_caching_decorator_serves_the_second_ask(
        self, cloud: Cloud, node: InProcess, tmp_path: Path
    ) -> None:
        assert with_cache(node.provider, self.plugin, None) is node.provider  # off: no wrapper
        cached = with_cache(node.provider, self.plugin, str(tmp_path / "cache"))
        first = self.answer(node, cloud, cached)
        calls = cloud.calls()
        second = self.answer(node, cloud, cached)
        if cloud.token:  # token requests always reach the provider (runtime/caching.py)
            assert cloud.calls() > calls >= 1
            return
        assert cloud.calls() == calls >= 1
        assert second.auth == first.auth

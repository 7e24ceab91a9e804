"""``credprovider doctor`` on a live node: the identity endpoints the plugins will use (through the
emulators the kubelet's environment names), what the kubelet's read-only port says (the config
it loaded, the pods it runs) and its recent credential errors (its log file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from credprovider.tool.node.kubelet_facts import config_hash
from emulators.aws import ecr_env
from emulators.gcp import FakeMetadata
from emulators.http import FakeRequest, FakeResponse, FakeServer, serve
from release.bundle import REPO
from tests.helpers import FakeKubelet, fake_kubelet, private, provider_entry
from tests.integration.cli.conftest import doctor
from tests.unit.tool.test_doctor_live import JSON_LINE, KLOG_LINE

GCR_IMAGE = "gcr.io/team-project/app:v1"


@dataclass
class ReadOnlyApi:
    """The kubelet's read-only port (/metrics, /pods) as the test sets it."""

    config_hash: str = ""
    pods: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, request: FakeRequest) -> FakeResponse:
        if request.path == "/metrics":
            return FakeResponse.text(
                "# TYPE kubelet_credential_provider_config_info gauge\n"
                f'kubelet_credential_provider_config_info{{hash="{self.config_hash}"}} 1\n'
            )
        if request.path == "/pods":
            return FakeResponse.json({"kind": "PodList", "items": self.pods})
        return FakeResponse.text("404 page not found", status=404)


@dataclass
class LiveNode:
    root: Path
    config: Path
    api: ReadOnlyApi
    log: Path
    env: dict[str, str]

    def start(self, **env: str) -> FakeKubelet:
        kubelet_config = self.root / "kubelet.yaml"
        kubelet_config.write_text(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            f"readOnlyPort: {self.port}\naddress: 127.0.0.1\n"
        )
        return fake_kubelet(
            [
                f"--config={kubelet_config}",
                f"--image-credential-provider-config={self.config}",
                f"--image-credential-provider-bin-dir={self.root / 'bin'}",
            ],
            {**os.environ, **self.env, **env},
            stderr=self.log,
        )

    port: int = 0


def checks(report: dict[str, Any], area: str, provider: str | None = None) -> list[tuple[str, str]]:
    return [
        (c["status"], c["message"])
        for c in report["checks"]
        if c["area"] == area and (provider is None or c["provider"] == provider)
    ]


@pytest.fixture
def live(
    tmp_path: Path, metadata: tuple[FakeMetadata, FakeServer], azure: Any
) -> Iterator[LiveNode]:
    """Three providers; the kubelet's environment names ECR keys, the metadata server and IMDS."""
    (tmp_path / "bin").mkdir()
    azure_json = tmp_path / "azure.json"
    azure_json.write_text(json.dumps({"useManagedIdentityExtension": True}))
    config = tmp_path / "providers.json"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "kubelet.config.k8s.io/v1",
                "kind": "CredentialProviderConfig",
                "providers": [
                    provider_entry(),
                    provider_entry(
                        name="auth-provider-gcp", matchImages=["gcr.io"], args=["get-credentials"]
                    ),
                    provider_entry(
                        name="acr-credential-provider",
                        matchImages=["*.azurecr.io"],
                        args=[str(azure_json)],
                    ),
                ],
            }
        )
    )
    api = ReadOnlyApi(config_hash=config_hash([config.read_bytes()]))
    env = {
        **ecr_env("http://127.0.0.1:9"),
        "GCE_METADATA_HOST": metadata[1].address,
        "AZURE_POD_IDENTITY_AUTHORITY_HOST": azure.env["AZURE_POD_IDENTITY_AUTHORITY_HOST"],
    }
    with serve(api) as server:
        node = LiveNode(tmp_path, config, api, tmp_path / "kubelet.log", env)
        node.port = int(server.address.rsplit(":", 1)[1])
        yield node


def test_each_plugins_identity_is_probed_where_the_kubelets_environment_points(
    live: LiveNode, metadata: tuple[FakeMetadata, FakeServer]
) -> None:
    kubelet = live.start()
    try:
        _, report = doctor()
    finally:
        kubelet.kill()
    assert checks(report, "identity", "ecr-credential-provider") == [
        ("info", "keys in the environment (AWS_ACCESS_KEY_ID): no endpoint to reach before ECR")
    ]
    [(status, message)] = checks(report, "identity", "auth-provider-gcp")
    assert status == "pass" and message.endswith(f"answers: {metadata[0].email}")
    [(status, message)] = checks(report, "identity", "acr-credential-provider")
    assert status == "pass" and message.startswith("the managed identity through IMDS")
    _, offline = doctor("--offline")
    assert checks(offline, "identity") == []


def test_an_arc_enabled_servers_agent_is_probed_where_the_kubelets_environment_points(
    live: LiveNode,
) -> None:
    """The kubelet's environment names the Azure Arc agent (IDENTITY_ENDPOINT, IMDS_ENDPOINT):
    doctor asks it as the plugin first does, and reads no key."""
    from emulators.azure import FakeArc

    arc = FakeArc()
    with serve(arc) as agent:
        kubelet = live.start(
            IDENTITY_ENDPOINT=f"{agent.url}/metadata/identity/oauth2/token",
            IMDS_ENDPOINT=agent.url,
        )
        try:
            _, report = doctor()
        finally:
            kubelet.kill()
    [(status, message)] = checks(report, "identity", "acr-credential-provider")
    assert status == "pass", message
    assert message.startswith(f"the managed identity through the Azure Arc agent ({agent.url}/")
    assert len(arc.queries) == 1 and arc.keys_given == []


def test_an_unreachable_identity_endpoint_fails_with_its_fix(live: LiveNode) -> None:
    kubelet = live.start(GCE_METADATA_HOST="127.0.0.1:9")
    try:
        code, report = doctor()
    finally:
        kubelet.kill()
    assert code == 1
    [failed] = [c for c in report["checks"] if c["area"] == "identity" and c["status"] == "fail"]
    assert failed["provider"] == "auth-provider-gcp"
    assert "http://127.0.0.1:9/computeMetadata/v1/" in failed["message"]
    assert "unreachable" in failed["message"] and "GOOGLE_APPLICATION_CREDENTIALS" in failed["fix"]


def test_the_config_the_kubelet_loaded_and_the_pods_it_runs(live: LiveNode) -> None:
    live.api.pods = [{"metadata": {"name": "app"}, "spec": {"containers": [{"image": GCR_IMAGE}]}}]
    kubelet = live.start()
    try:
        _, report = doctor()
        assert ("pass", "the kubelet runs the config that is on disk (same hash)") in checks(
            report, "config"
        )
        # the pod's image is the node's (its bin dir holds no plugin, so it gets no credentials)
        assert any(message.endswith(f": {GCR_IMAGE}") for _, message in checks(report, "image"))
        live.config.write_text(live.config.read_text().replace("gcr.io", "us.gcr.io"))
        code, report = doctor()
    finally:
        kubelet.kill()
    assert code == 1
    assert any(
        status == "fail"
        and message.startswith("the kubelet runs another config than the one on disk")
        for status, message in checks(report, "config")
    )


def test_recent_credential_errors_come_from_the_kubelets_log(live: LiveNode) -> None:
    live.log.write_text(f"{KLOG_LINE}\n{KLOG_LINE}\n{JSON_LINE}\n")
    kubelet = live.start()
    try:
        _, report = doctor("--offline")
        unprivileged = subprocess.run(
            private([
                "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                sys.executable, "-m", "credprovider", "credprovider", "doctor", "--json", "--offline",
            ]),
            capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": "/"},
        )  # fmt: skip
    finally:
        kubelet.kill()
    [(status, message)] = checks(report, "kubelet", "ecr-credential-provider")
    assert status == "warn" and message.startswith("2 failed credential lookup(s)")
    assert str(live.log) in message and message.endswith('ecr-credential-provider: "no identity"')
    [(status, message)] = checks(report, "kubelet", "auth-provider-gcp")
    assert "context deadline exceeded" in message
    assert "Traceback" not in unprivileged.stderr and unprivileged.returncode in (0, 1)
    as_nobody = json.loads(unprivileged.stdout)
    assert any(
        "recent errors not read" in message and "as uid 65534" in message
        for _, message in checks(as_nobody, "kubelet")
    )


@pytest.mark.parametrize("stream", ["socket", "pipe"])
def test_a_kubelet_logging_to_the_journal_or_a_pipe(live: LiveNode, stream: str) -> None:
    """stderr a socket (systemd's journal stream): the journal is asked for that pid's lines;
    a pipe (a supervisor reading it) is named, not read (reading would steal its lines)."""
    import socket

    ours, theirs = socket.socketpair() if stream == "socket" else os.pipe()
    kubelet = fake_kubelet(
        [], os.environ, theirs.fileno() if isinstance(theirs, socket.socket) else theirs
    )
    try:
        _, report = doctor("--offline")
    finally:
        kubelet.kill()
        kubelet.wait()
        for end in (ours, theirs):
            end.close() if isinstance(end, socket.socket) else os.close(end)
    [message] = [m for _, m in checks(report, "kubelet") if "log" in m or "journal" in m]
    if stream == "socket":
        assert "journal" in message and f"_PID={kubelet.pid}" in message
    else:
        assert message.startswith("recent errors not read: its log goes to pipe:[")


# A tmpfs on /opt in the test kubelet's mount namespace (never the host's), holding the agent's
# binary, before the command in "$@".
_WITH_HIMDS = 'mount -t tmpfs opt /opt && mkdir -p "${0%/*}" && : > "$0" && exec "$@"'


def test_an_installed_arc_agent_is_probed_at_its_address(live: LiveNode, tmp_path: Path) -> None:
    """The kubelet's environment names no IDENTITY_ENDPOINT, but the Arc agent's binary is on the
    node (/opt/azcmagent/bin/himds): the plugin asks the agent at its fixed address (as upstream's
    does, through MSAL Go), so doctor probes that address, not IMDS, and reads no key. The agent
    listens there in a network namespace of the run's own."""
    from credprovider.azure.imds import ARC_DEFAULT_ENDPOINT, ARC_HIMDS
    from emulators.azure import ArcAtItsAddress

    beside = ArcAtItsAddress(tmp_path / "agent.json")
    command = [sys.executable, "-m", "credprovider", "credprovider", "doctor", "--json"]
    kubelet = live.start()
    try:
        done = subprocess.run(
            private(
                [
                    *("sh", "-c", _WITH_HIMDS, ARC_HIMDS),
                    "unshare",
                    "--net",
                    *beside.wrapper(),
                    *command,
                ]
            ),
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(REPO), **beside.env()},
            check=False,
        )
    finally:
        kubelet.kill()
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    [(status, message)] = checks(json.loads(done.stdout), "identity", "acr-credential-provider")
    assert status == "pass", message
    assert (
        message
        == f"the managed identity through the Azure Arc agent ({ARC_DEFAULT_ENDPOINT}) answers"
    )
    asked = beside.asked()
    assert [q["resource"] for q in asked["queries"]] == ["https://containerregistry.azure.net"]
    assert asked["keys"] == []

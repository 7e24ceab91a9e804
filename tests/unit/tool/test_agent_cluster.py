"""The node agent's decisions about the cluster (is a restart slot free, what a node's annotations
say) and its check that a restarted kubelet came back, asked over HTTP of loopback servers that
answer as the kubelet's /healthz and /metrics do. The API calls themselves run against a real
kube-apiserver in tests/e2e/test_fleet_agents.py."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from credprovider.tool.agent.cluster import NodeStatus, slot_free, slot_names
from credprovider.tool.agent.daemon import config_hash
from credprovider.tool.agent.health import KubeletHealth, reported_hashes
from credprovider.tool.commands.fleet import detail_of, rows
from credprovider.tool.node.root import NodeRoot
from emulators.http import FakeRequest, FakeResponse, serve

T0 = datetime.datetime(2026, 11, 26, 12, 0, 0, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("holder", "renewed", "duration", "moment", "free"),
    [
        (None, None, None, T0, True),  # never taken
        ("", T0, 120, T0, True),  # released
        ("node-a", T0, 120, T0, True),  # already mine
        ("node-b", T0, 120, T0 + datetime.timedelta(seconds=119), False),  # held, renewed
        ("node-b", T0, 120, T0 + datetime.timedelta(seconds=120), False),  # the last second
        ("node-b", T0, 120, T0 + datetime.timedelta(seconds=121), True),  # its node died
        ("node-b", None, 120, T0, True),  # a holder that never renewed
    ],
)  # fmt: skip
def test_a_restart_slot_is_free_when_released_mine_or_abandoned(
    holder: str | None,
    renewed: datetime.datetime | None,
    duration: int | None,
    moment: datetime.datetime,
    free: bool,
) -> None:
    assert slot_free(holder, renewed, duration, "node-a", moment) is free


def test_slots_are_numbered_leases() -> None:
    assert slot_names(3) == [
        "credprovider-restart-0", "credprovider-restart-1", "credprovider-restart-2",
    ]  # fmt: skip


def test_the_node_status_reads_back_from_its_annotations() -> None:
    status = NodeStatus(
        "0.2.0", "sha256:" + "ab" * 32, "installed", "x" * 2000, "2026-11-26T12:00:00Z"
    )
    annotations = status.annotations()
    assert sorted(annotations) == [
        "credprovider.io/config-hash", "credprovider.io/detail", "credprovider.io/result",
        "credprovider.io/time", "credprovider.io/version",
    ]  # fmt: skip
    assert len(annotations["credprovider.io/detail"]) == 1000  # an annotation stays small
    back = NodeStatus.from_annotations({**annotations, "other.io/x": "y"})
    assert back is not None and (back.version, back.result) == ("0.2.0", "installed")
    assert NodeStatus.from_annotations({"other.io/x": "y"}) is None
    assert NodeStatus.from_annotations(None) is None


def test_the_platforms_rewrite_is_an_annotation_only_when_found() -> None:
    """Set only when a run found the platform wrote again what the agent wrote: a merge patch
    without it leaves the node's earlier finding; fleet status says it beside the detail."""
    plain = NodeStatus("0.2.0", "", "installed", "d", "t")
    assert "credprovider.io/rewritten" not in plain.annotations()
    found = NodeStatus("0.2.0", "", "installed", "d", "t", "2026-11-28T03:00:00Z /etc/x.yaml")
    back = NodeStatus.from_annotations(found.annotations())
    assert back is not None and back.rewritten == "2026-11-28T03:00:00Z /etc/x.yaml"
    [row] = rows([("a", back, True)])
    assert detail_of(row) == "d (the platform rewrote /etc/x.yaml at 2026-11-28T03:00:00Z)"


def test_fleet_rows_say_which_nodes_never_reported() -> None:
    status = NodeStatus("0.2.0", "sha256:1", "rolled back", "the kubelet was not healthy", "t")
    table = rows([("a", status, True), ("b", None, False)])
    assert table[0] == {
        "node": "a", "ready": True, "version": "0.2.0", "result": "rolled back",
        "configHash": "sha256:1", "time": "t", "detail": "the kubelet was not healthy",
        "rewritten": "",
    }  # fmt: skip
    assert (table[1]["result"], table[1]["detail"]) == ("", "no agent has reported on this node")


METRICS = (
    "# HELP kubelet_credential_provider_config_info [ALPHA] Information about the last applied "
    "credential provider configuration with hash as label\n"
    "# TYPE kubelet_credential_provider_config_info gauge\n"
    'kubelet_credential_provider_config_info{hash="sha256:%s"} 1\n'
    "kubelet_running_pods 3\n"
)


@pytest.mark.parametrize(
    ("page", "found"),
    [
        (METRICS % ("1" * 64), ["sha256:" + "1" * 64]),
        ("kubelet_running_pods 3\n", None),  # a kubelet before 1.34
        ("# TYPE kubelet_credential_provider_config_info gauge\n", []),
    ],
)
def test_the_config_hash_the_kubelet_reports(page: str, found: list[str] | None) -> None:
    assert reported_hashes(page) == found


def _node_config(tmp_path: Path) -> tuple[str, str]:
    config = tmp_path / "etc" / "kubernetes" / "providers.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        "- name: ecr-credential-provider\n  matchImages: ['*.dkr.ecr.*.amazonaws.com']\n"
        "  defaultCacheDuration: 12h\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
    )
    return str(tmp_path), "/etc/kubernetes/providers.yaml"


def test_the_hash_is_the_kubelets_of_the_file_written(tmp_path: Path) -> None:
    import hashlib

    root, path = _node_config(tmp_path)
    data = (tmp_path / path.lstrip("/")).read_bytes()
    expected = hashlib.sha256(len(data).to_bytes(8, "big") + data).hexdigest()
    assert config_hash(NodeRoot.at(root), path) == f"sha256:{expected}"
    assert config_hash(NodeRoot.at(root), "/etc/kubernetes/missing.yaml") == ""


def test_back_means_healthz_then_the_hash_of_the_config_written(tmp_path: Path) -> None:
    root, path = _node_config(tmp_path)
    written = config_hash(NodeRoot.at(root), path)
    answers = {
        "/healthz": FakeResponse.text("ok"),
        "/metrics": FakeResponse.text(METRICS % ("0" * 64)),
    }

    def kubelet(request: FakeRequest) -> FakeResponse:
        return answers[request.path]

    with serve(kubelet) as server:
        health = KubeletHealth(f"{server.url}/healthz", 1, f"{server.url}/metrics", token="t0ken")
        assert health.problem(T0, written) == (
            f"the kubelet runs config sha256:{'0' * 64}, not the one written ({written})"
        )
        assert server.requests[-1].header("Authorization") == "Bearer t0ken"
        answers["/metrics"] = FakeResponse.text(METRICS % written.removeprefix("sha256:"))
        assert health.problem(T0, written) is None
        answers["/metrics"] = FakeResponse.text("kubelet_running_pods 3\n")
        assert health.problem(T0, written) is None  # before 1.34: not reported, not checked
        answers["/metrics"] = FakeResponse.text("forbidden", status=403)
        assert health.problem(T0, written) == (
            f"{server.url}/metrics answered 403 (the config hash cannot be checked)"
        )
        answers["/healthz"] = FakeResponse.text("not ok", status=500)
        slept: list[float] = []
        assert health.check(T0, written, sleep=slept.append) == (
            f"{server.url}/healthz answered 500 for 1s"
        )
        assert slept  # it asked again until the timeout
        # a wait shorter than the second between asks ends at its own time, not a second later
        slept.clear()
        short = KubeletHealth(f"{server.url}/healthz", 0.25)
        assert short.check(T0, written, sleep=slept.append) == (
            f"{server.url}/healthz answered 500 for 0.25s"
        )
        assert slept and max(slept) <= 0.25


def test_a_dry_run_image_is_the_operators_and_must_be_one_the_provider_takes(
    tmp_path: Path,
) -> None:
    from credprovider.tool.agent.health import dry_run
    from credprovider.tool.change.settings import dry_run_images, parse
    from credprovider.tool.kubeconfig.model import read_config

    settings = parse(
        '{"azure": {"dryRunImage": "docker.io/library/app"}, "aws": {"matchImages": ["x.example"]}}',
        ["aws", "azure"],
    )
    assert dry_run_images(settings, {"aws": "ecr-credential-provider", "azure": "acr"}) == {
        "acr": "docker.io/library/app"
    }
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        "- name: acr-credential-provider\n  matchImages: ['*.azurecr.io']\n"
        "  defaultCacheDuration: 10m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
    )
    loaded = read_config(str(config))
    # no image named: ACR trades its token at the registry, so no sample stands in (nothing runs)
    assert dry_run(loaded, str(tmp_path / "no-bin")) == []
    named = {"acr-credential-provider": "docker.io/library/app"}
    assert dry_run(loaded, str(tmp_path / "no-bin"), images=named) == [
        ("acr-credential-provider",
         "its dry-run image docker.io/library/app is not one its matchImages take"),
    ]  # fmt: skip


def test_the_dry_run_of_a_provider_beside_the_platforms_runs_the_bundles_plugin(
    tmp_path: Path,
) -> None:
    """flags.beside names ours <plugin>-credprovider; the bundle holds each plugin by its own
    name: the dry run (no launcher) runs that plugin, and says the provider's name."""
    from credprovider.tool.agent.health import dry_run
    from credprovider.tool.kubeconfig.model import read_config

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    ran = tmp_path / "ran"
    plugin = bundle / "ecr-credential-provider"
    plugin.write_text(f'#!/bin/sh\necho "$0" > {ran}\nexit 3\n')
    plugin.chmod(0o755)
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        "- name: ecr-credential-provider-credprovider\n"
        "  matchImages: ['*.dkr.ecr.*.amazonaws.com']\n"
        "  defaultCacheDuration: 12h\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
    )
    [(name, problem)] = dry_run(read_config(str(config)), str(bundle))
    assert name == "ecr-credential-provider-credprovider"
    assert "exit status 3" in problem, problem
    assert ran.read_text().strip() == str(plugin)


def test_a_kubelet_that_does_not_answer_is_named_once() -> None:
    """No answer on /healthz: what is wrong names the URL once, then why (it was said twice)."""
    import socket

    with socket.socket() as closed:  # a loopback port nothing listens on
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/healthz"
        problem = KubeletHealth(url, 1).problem(T0, "")
    assert problem is not None and problem.startswith(f"{url}: ")
    assert problem.count(url) == 1, problem


def test_the_kubelets_https_port_is_asked_without_loading_any_trust(tmp_path: Path) -> None:
    """The kubelet's serving certificate is not verified (node/kubelet_http.py), so no trust is
    loaded for it: a default context had OpenSSL open SSL_CERT_FILE blocking (a FIFO there held
    the agent's health check and doctor until killed). Asked in a child under a timeout."""
    import os
    import subprocess
    import sys

    from emulators.tls import make_test_ca

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    tls = make_test_ca(tmp_path / "ca").server_context("127.0.0.1")
    with serve(lambda _: FakeResponse.text("kubelet_running_pods 3\n"), tls=tls) as server:
        assert server.url.startswith("https://")
        asked = subprocess.run(
            [sys.executable, "-c",
             "import sys; from credprovider.tool.node.kubelet_http import kubelet_get; "
             "print(kubelet_get(sys.argv[1], 5, 1 << 20, 't0ken'))", f"{server.url}/metrics"],
            capture_output=True, text=True, timeout=30, check=False,
            env={**os.environ, "SSL_CERT_FILE": str(fifo), "SSL_CERT_DIR": str(tmp_path)},
        )  # fmt: skip
        assert asked.returncode == 0, asked.stderr[-1000:]
        assert asked.stdout.strip() == "(200, b'kubelet_running_pods 3\\n')"
        assert server.requests[-1].header("Authorization") == "Bearer t0ken"

"""``credprovider fleet uninstall`` (the chart's pre-delete hook) through the real client library
against a stand-in API server: the agent DaemonSet is told to uninstall (one JSON patch of its
arguments, which a second run does not repeat), each node's outcome is printed as its agent
reports it, and the exit status says whether every node was restored in time. The fleet's own
run of it, on a real cluster with helm, is tests/e2e/test_fleet_cluster.py."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from credprovider.tool.agent.removal import NodeOutcome, outcomes, with_uninstall
from emulators.http import FakeRequest, FakeResponse, serve
from emulators.tls import CertAuthority
from tests.helpers import run_cli

DS_PATH = "/apis/apps/v1/namespaces/kube-system/daemonsets/credprovider-agent"
ARGS = ["agent", "run", "--root=/host", "--providers=aws"]


def annotated(result: str, detail: str = "") -> dict[str, str]:
    return {
        "credprovider.io/version": "0.1.0",
        "credprovider.io/result": result,
        "credprovider.io/detail": detail,
        "credprovider.io/time": "2026-11-27T03:00:00Z",
    }


@dataclass
class FakeApi:
    """The agent DaemonSet, and the nodes whose annotations ``after_patch`` turns to (each node
    at its own poll after the patch)."""

    args: list[str] = field(default_factory=lambda: list(ARGS))
    nodes: dict[str, dict[str, str] | None] = field(default_factory=dict)
    after_patch: dict[str, dict[str, str]] = field(default_factory=dict)
    patches: list[Any] = field(default_factory=list)
    lists: int = 0  # polls since the patch
    limits: list[str] = field(default_factory=list)  # each list request's limit ("": none)

    def daemonset(self) -> dict[str, Any]:
        return {
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "credprovider-agent", "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"spec": {
                "containers": [{"name": "agent", "image": "r/c:0.1.0", "args": self.args}]}}},
        }  # fmt: skip

    def __call__(self, request: FakeRequest) -> FakeResponse:
        if request.path == DS_PATH and request.method == "GET":
            return FakeResponse.json(self.daemonset())
        if request.path == DS_PATH and request.method == "PATCH":
            assert request.header("content-type") == "application/json-patch+json"
            patch = json.loads(request.body)
            self.patches.append(patch)
            self.args = patch[0]["value"]
            return FakeResponse.json(self.daemonset())
        if request.path == "/api/v1/nodes" and request.method == "GET":
            if self.patches:
                self.lists += 1
            if self.lists > 1 and self.after_patch:  # from the second poll, a node a poll
                name, found = self.after_patch.popitem()
                self.nodes[name] = found
            items = [
                {"metadata": {"name": name, **({"annotations": notes} if notes else {})},
                 "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
                for name, notes in self.nodes.items()
            ]  # fmt: skip
            # pages as an API server gives them: ``limit`` items, ``continue`` for the next
            limit = request.query.get("limit", [""])[0]
            self.limits.append(limit)
            start = int(request.query.get("continue", ["0"])[0] or 0)
            end = start + int(limit) if limit else len(items)
            more = {"continue": str(end)} if end < len(items) else {}
            return FakeResponse.json({"kind": "NodeList", "apiVersion": "v1", "metadata": more,
                                      "items": items[start:end]})  # fmt: skip
        return FakeResponse.json({"kind": "Status", "code": 404}, status=404)


def kubeconfig_of(directory: Path, server: str, ca: Path | None = None) -> Path:
    kubeconfig = directory / "kubeconfig"
    cluster = {"server": server, **({"certificate-authority": str(ca)} if ca else {})}
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }))  # fmt: skip
    return kubeconfig


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[FakeApi, Path]]:
    fake = FakeApi()
    with serve(fake) as server:
        yield fake, kubeconfig_of(tmp_path, server.url)


def uninstall(
    kubeconfig: Path, timeout: str = "60", **run: Any
) -> subprocess.CompletedProcess[str]:
    """The hook as the chart runs it; ``run``: run_cli's own options (env, use_bundle)."""
    return run_cli(
        "fleet", "uninstall", "--namespace=kube-system", "--daemonset=credprovider-agent",
        f"--timeout={timeout}", f"--kubeconfig={kubeconfig}", **run,
    )  # fmt: skip


def test_every_node_is_told_and_waited_for(api: tuple[FakeApi, Path]) -> None:
    fake, kubeconfig = api
    fake.nodes = {"node-a": annotated("installed"), "node-b": annotated("unchanged"),
                  "no-agent": None}  # fmt: skip
    fake.after_patch = {"node-a": annotated("uninstalled"), "node-b": annotated("uninstalled")}
    done = uninstall(kubeconfig)
    assert done.returncode == 0, done.stderr
    assert fake.patches == [[{
        "op": "replace", "path": "/spec/template/spec/containers/0/args",
        "value": ["agent", "run", "--uninstall", "--root=/host", "--providers=aws"],
    }]]  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0].startswith("told the agents of kube-system/credprovider-agent to uninstall")
    assert "node-a: installed" in lines and "node-b: unchanged" in lines
    assert "node-a: uninstalled" in lines and "node-b: uninstalled" in lines
    assert lines[-1] == "every node restored (2)"
    assert not any("no-agent" in line for line in lines)  # no agent ever reported there
    again = uninstall(kubeconfig)
    assert again.returncode == 0 and len(fake.patches) == 1  # told once: the args say so
    assert "already told to uninstall" in again.stdout


def test_the_nodes_are_listed_in_pages(api: tuple[FakeApi, Path]) -> None:
    """One answer listing every Node of a large cluster (thousands, each with its images) is past
    the bound the client holds an answer to (64 MiB): the nodes are asked for in pages of 500, as
    kubectl asks, each page within it, and every node of every page is counted."""
    fake, kubeconfig = api
    fake.args = ["agent", "run", "--uninstall", "--root=/host", "--providers=aws"]
    fake.nodes = {f"node-{n:04}": annotated("uninstalled") for n in range(1203)}
    done = uninstall(kubeconfig)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "every node restored (1203)"
    assert fake.limits == ["500", "500", "500"]


def test_no_tls_session_key_is_written_where_sslkeylogfile_names(
    tmp_path: Path, test_ca: CertAuthority
) -> None:
    """Python's ssl writes every TLS session's keys to SSLKEYLOGFILE: a capture of the hook's
    exchange (the service account's token in it) could then be read. The tool drops it as it
    starts, as the plugins do; through the bundle, over TLS to a server the kubeconfig's CA
    verifies."""
    fake = FakeApi()
    fake.nodes = {"node-a": annotated("installed")}
    fake.after_patch = {"node-a": annotated("uninstalled")}
    keys = tmp_path / "keys"
    with serve(fake, tls=test_ca.server_context("127.0.0.1")) as server:
        assert server.url.startswith("https://")
        kubeconfig = kubeconfig_of(tmp_path, server.url, test_ca.bundle)
        done = uninstall(kubeconfig, env={"SSLKEYLOGFILE": str(keys)}, use_bundle=True)
    assert done.returncode == 0, done.stderr
    assert len(fake.patches) == 1 and done.stdout.splitlines()[-1] == "every node restored (1)"
    assert not keys.exists()


def test_a_node_not_restored_in_time_fails_with_its_outcome(api: tuple[FakeApi, Path]) -> None:
    """node-b's agent refused: nothing is deleted (helm uninstall fails), and the one line says
    which node, why, and the two ways on."""
    fake, kubeconfig = api
    fake.nodes = {"node-a": annotated("installed"), "node-b": annotated("installed")}
    fake.after_patch = {
        "node-a": annotated("uninstalled"),
        "node-b": annotated("refused", "the kubelet's flags name this config: it would not start"),
    }
    done = uninstall(kubeconfig, timeout="8")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("credprovider fleet uninstall: 1 of 2 node(s) not restored within 8s: ")
    assert "node-b: refused (the kubelet's flags name this config: it would not start)" in line
    assert "helm uninstall --no-hooks" in line
    assert "Traceback" not in done.stderr


def test_a_daemonset_that_is_not_the_agents_is_refused(api: tuple[FakeApi, Path]) -> None:
    fake, kubeconfig = api
    fake.args = ["serve", "--port=80"]
    done = uninstall(kubeconfig)
    assert done.returncode == 1 and fake.patches == []
    assert "does not run `agent run`" in done.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["agent", "run", "--root=/host"], ["agent", "run", "--uninstall", "--root=/host"]),
        (["agent", "run", "--uninstall", "--root=/host"], None),
    ],
)
def test_the_flag_goes_where_the_chart_renders_it(
    args: list[str], expected: list[str] | None
) -> None:
    assert with_uninstall(args) == expected


def test_outcomes_are_of_the_nodes_an_agent_reported_on() -> None:
    from credprovider.tool.agent.cluster import NodeStatus

    status = NodeStatus("0.1.0", "", "uninstalled", "", "t")
    found = outcomes([("a", status, True), ("b", None, True)])
    assert found == [NodeOutcome("a", "uninstalled", "")] and found[0].done

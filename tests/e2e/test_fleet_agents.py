"""The chart's node agents in mode flags, through the bundle, against a real kube-apiserver with the
chart's own RBAC and admission policy (tests/e2e/fleetagents.py runs them in private namespaces).

Four nodes start their agents at once with one restart slot: two kubeadm nodes install and restart
their (stand-in) kubelets one after the other; one whose kubelet does not come back is rolled back;
one whose platform config the kubelet would refuse once merged is left untouched. Each says so in its
annotations and Events, the agents that installed pass their dry-run credential request (the
emulated ECR) and turn ready, ``credprovider fleet status`` tabulates it, an agent's token cannot
touch another node, an upgrade with the same config restarts nothing, and uninstall puts every
node's files back byte for byte, again one restart at a time.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from release.bundle import BUNDLE_DIR, REPO
from tests.chart.helm import helm_binary, render
from tests.e2e.sandbox import host_state, left_running, run_sandboxed

RESTART_EVENTS = ("KubeletRestarted",)


@pytest.fixture(scope="module")
def fleet_run(
    control_plane_binaries: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    tmp_path = tmp_path_factory.mktemp("fleet")
    rendered = render(
        helm_binary(),
        "image.repository=r/c",
        "mode=flags",
        "flags.platform=kubeadm",
        namespace="credprovider",
    )
    assert rendered.returncode == 0, rendered.stderr
    # what helm install applies (a pre-delete hook is helm uninstall's: test_fleet_cluster.py)
    chart = [
        doc
        for doc in yaml.safe_load_all(rendered.stdout)
        if doc
        and doc["kind"] not in ("DaemonSet",)
        and "helm.sh/hook" not in (doc["metadata"].get("annotations") or {})
    ]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    etcd, apiserver = control_plane_binaries
    spec = {
        "run_dir": str(run_dir), "etcd": str(etcd), "apiserver": str(apiserver),
        "credprovider": str(BUNDLE_DIR.resolve() / "credprovider"),
        "bundle": str(BUNDLE_DIR.resolve()), "repo": str(REPO), "chart": chart,
        "result": str(tmp_path / "result.json"),
    }  # fmt: skip
    before = host_state()
    result = run_sandboxed("tests.e2e.fleetagents", spec, tmp_path, 900)
    result["host_changed"] = host_state() != before
    result["left_running"] = left_running(etcd, apiserver)
    return result


def _said(result: dict[str, Any]) -> str:
    return json.dumps({"error": result.get("error"), "logs": result["logs"]}, indent=1)[-6000:]


def _events(result: dict[str, Any], node: str) -> list[tuple[str, str]]:
    return [(e["reason"], e["type"]) for e in result["events"] if e["node"] == node]


def test_the_agents_install_one_node_at_a_time(fleet_run: dict[str, Any]) -> None:
    result = fleet_run
    assert "error" not in result, _said(result)
    nodes = result["nodes"]
    assert nodes["node-a"]["installed"]["credprovider.io/result"] == "installed", _said(result)
    assert nodes["node-b"]["installed"]["credprovider.io/result"] == "installed"
    # every restart of every node, install and uninstall: never two at once
    spans = sorted(
        (start, end, name) for name, node in nodes.items() for start, end, _ in node["restarts"]
    )
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        assert end <= start, f"{first} and {second} restarted at once"
    # the kubelet came back with the config the agent wrote: the hash it reports is the annotation
    for name in ("node-a", "node-b"):
        installed = nodes[name]["installed"]
        assert nodes[name]["restarts"][0][2] == installed["credprovider.io/config-hash"]
        assert installed["credprovider.io/version"] == "0.1.0"
        assert nodes[name]["ready"], result["logs"]  # the dry run against the emulated ECR passed
        assert ("CredentialProviderInstalled", "Normal") in _events(result, name)
        assert ("KubeletRestarted", "Normal") in _events(result, name)
    ours = [e for e in result["events"] if e["source"] == "credprovider-agent"]
    assert ours and all(e["uid"] == e["node"] for e in ours), result["events"]
    leases = result["leases"]["items"]
    assert [lease["metadata"]["name"] for lease in leases] == ["credprovider-restart-0"]
    assert not leases[0]["spec"].get("holderIdentity")  # released


def test_a_kubelet_that_does_not_come_back_is_rolled_back(fleet_run: dict[str, Any]) -> None:
    node = fleet_run["nodes"]["node-c"]
    assert node["installed"]["credprovider.io/result"] == "rolled back", _said(fleet_run)
    assert (
        "the kubelet was not healthy after the restart"
        in node["installed"]["credprovider.io/detail"]
    )
    assert ("CredentialProviderRolledBack", "Warning") in _events(fleet_run, "node-c")
    assert len(node["restarts"]) == 2  # the change, then the rollback
    assert not node["ready"]
    # the flags file is as before the install (the rollback), the node no longer names the config
    assert "image-credential-provider" not in node["during"]["/etc/default/kubelet"][1]


def test_a_config_the_kubelet_would_refuse_changes_nothing(fleet_run: dict[str, Any]) -> None:
    node = fleet_run["nodes"]["node-d"]
    installed = node["installed"]
    assert installed["credprovider.io/result"] == "refused", _said(fleet_run)
    assert installed["credprovider.io/detail"].startswith(
        "the kubelet would refuse the config: failed to validate credential provider config"
    )
    assert ("CredentialProviderRefused", "Warning") in _events(fleet_run, "node-d")
    assert node["restarts"] == [] and not node["ready"]


def test_values_the_kubelet_would_refuse_change_nothing(fleet_run: dict[str, Any]) -> None:
    node = fleet_run["nodes"]["node-b"]
    refused = node["refused"]
    assert refused["credprovider.io/result"] == "refused", _said(fleet_run)
    assert refused["credprovider.io/detail"].startswith(
        "the kubelet would refuse the config: failed to validate credential provider config"
    )
    assert "tokenAttributes" in refused["credprovider.io/detail"]
    assert node["unchanged"]  # every file as the install left it
    assert ("CredentialProviderRefused", "Warning") in _events(fleet_run, "node-b")
    assert len(node["restarts"]) == 2  # the install's and the uninstall's: none for the refusal


def test_fleet_status_tabulates_the_nodes(fleet_run: dict[str, Any]) -> None:
    done = fleet_run["fleet"]
    assert done["returncode"] == 1, done  # node-c and node-d need a look
    table = json.loads(done["stdout"])
    assert table["allGood"] is False
    assert {row["node"]: row["result"] for row in table["nodes"]} == {
        "node-a": "installed", "node-b": "installed", "node-c": "rolled back", "node-d": "refused",
    }  # fmt: skip


def test_an_agent_may_change_only_its_own_node(fleet_run: dict[str, Any]) -> None:
    assert fleet_run["own_node"]["status"] == 200, fleet_run["own_node"]
    other = fleet_run["other_node"]
    assert other["status"] in (403, 422), other
    assert "the credprovider agent may change only the node its pod runs on" in other["message"]


def test_an_upgrade_with_the_same_config_restarts_nothing(fleet_run: dict[str, Any]) -> None:
    node = fleet_run["nodes"]["node-a"]
    upgraded = node["upgraded"]
    assert (upgraded["credprovider.io/version"], upgraded["credprovider.io/result"]) == (
        "0.2.0", "installed",
    ), _said(fleet_run)  # fmt: skip
    assert (
        upgraded["credprovider.io/config-hash"] == node["installed"]["credprovider.io/config-hash"]
    )
    # one restart at install: none for the upgrade
    assert node["restarts_upgraded"] == 1


def test_a_config_the_platform_wrote_again_at_boot_is_said_and_written_again(
    fleet_run: dict[str, Any],
) -> None:
    """node-a "reboots" and its platform writes its own config over the agent's (GKE, nodeadm
    and the MCO do so at every boot): the agent's pod, started again, records when and which
    file on the Node, warns in an Event, and merges its providers again; fleet status says so."""
    node = fleet_run["nodes"]["node-a"]
    path = fleet_run["rewrite"]["path"]
    said = node["rewritten"]
    assert said["credprovider.io/result"] == "installed", _said(fleet_run)
    at, _, paths = said["credprovider.io/rewritten"].partition(" ")
    assert paths == path and at.endswith("Z") and at >= node["installed"]["credprovider.io/time"]
    assert ("CredentialProviderRewrittenByPlatform", "Warning") in _events(fleet_run, "node-a")
    assert "name: ecr-credential-provider" in fleet_run["rewrite"]["again"]
    assert fleet_run["rewrite"]["again"].startswith("# Written by credprovider agent")
    # its kubelet restarted with our config again: one more restart than the upgrade left
    assert len(node["restarts"]) == node["restarts_upgraded"] + 2  # and the uninstall's
    done = fleet_run["fleet_rewritten"]
    rows = {row["node"]: row for row in json.loads(done["stdout"])["nodes"]}
    assert rows["node-a"]["rewritten"] == said["credprovider.io/rewritten"], done


def test_uninstall_puts_every_node_back(fleet_run: dict[str, Any]) -> None:
    for name, node in fleet_run["nodes"].items():
        assert node["uninstalled"]["credprovider.io/result"] == "uninstalled", (
            name,
            _said(fleet_run),
        )
        assert node["same_as_before"], name
        assert ("CredentialProviderUninstalled", "Normal") in _events(fleet_run, name)
    assert fleet_run["host_changed"] is False
    assert fleet_run["left_running"] == []

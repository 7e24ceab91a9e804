"""The fleet chart on a two-node cluster (tests/e2e/fleetcluster.py): ``helm install`` (mode flags)
onto two kubeadm-style nodes, each its own real kubelet, containerd and root, with the DaemonSet
controller making the agents' pods. The agents restart their kubelets one at a time through each
node's systemd (a stand-in on its private socket), and containerd then pulls a private image from
the emulated ECR, ACR and Google registries with the plugins' credentials. A new image version restarts nothing; values the
kubelet would refuse change no node and stop the rollout; a kubelet that does not come back is
rolled back; uninstall leaves every node's files as they were before the install.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from credprovider.paths import AGENT_CONFIG
from release import gobuild, image
from release.bundle import REPO, project_version
from release.package import artifact_name
from tests.chart.helm import CHART, helm_binary
from tests.e2e import runtime
from tests.e2e.sandbox import host_state, left_running, run_sandboxed
from tests.helpers import unavailable


@pytest.fixture(scope="module")
def cluster_run(
    binaries: tuple[Path, Path],
    control_plane_binaries: tuple[Path, Path],
    runtime_tools: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    version = project_version()
    release = REPO / "dist" / "release"
    archive = release / image.archive_name(version)
    tarball = release / f"{artifact_name(version, runtime_tools['arch'])}.tar.gz"
    if not archive.exists() or not tarball.exists():
        unavailable(f"{archive} is not built: make release")
    try:
        manager = gobuild.binary(gobuild.KUBE_CONTROLLER_MANAGER, "kube-controller-manager")
        scheduler = gobuild.binary(gobuild.KUBE_SCHEDULER, "kube-scheduler")
    except gobuild.GoBuildError as exc:
        unavailable(str(exc))
    tmp_path = tmp_path_factory.mktemp("fleet-cluster")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    etcd, apiserver = control_plane_binaries
    spec = {
        "run_dir": str(run_dir), "result": str(tmp_path / "result.json"), "repo": str(REPO),
        "etcd": str(etcd), "apiserver": str(apiserver), "controller_manager": str(manager),
        "scheduler": str(scheduler),
        "kubelet": str(binaries[0]), "helm": str(helm_binary()), "chart": str(CHART),
        "image_archive": str(archive), "tarball": str(tarball),
        "image_name": f"docker.io/library/credprovider:{version}", **runtime_tools,
    }  # fmt: skip
    before = host_state()
    result = run_sandboxed("tests.e2e.fleetcluster", spec, tmp_path, 1500)
    result["host_changed"] = host_state() != before
    result["left_running"] = left_running(
        binaries[0], etcd, apiserver, manager, scheduler, Path(runtime_tools["containerd"])
    )
    result["subtree"] = runtime.subtree_name(run_dir)
    return result


def _said(result: dict[str, Any]) -> str:
    shown = {key: result.get(key) for key in ("error", "diagnosis", "agent_logs", "events")}
    return json.dumps(shown, indent=1)[-8000:]


def _events(result: dict[str, Any], node: str) -> list[tuple[str, str]]:
    return [(e["reason"], e["type"]) for e in result["events"] if e["node"] == node]


def test_helm_install_puts_the_plugins_on_every_node_one_restart_at_a_time(
    cluster_run: dict[str, Any],
) -> None:
    result = cluster_run
    assert "error" not in result, _said(result)
    install = result["phases"]["install"]
    for node in ("node-a", "node-b"):
        assert install["annotations"][node]["credprovider.io/result"] == "installed"
        assert install["restarts"][node] == 1  # the flags were set: one restart
        assert ("CredentialProviderInstalled", "Normal") in _events(result, node)
        # flags.platform=kubeadm: the config in the agent's own directory, never /etc/kubernetes
        assert AGENT_CONFIG in install["files"][node]
    assert install["daemonset"]["numberReady"] == 2  # both passed their dry run
    spans = sorted(
        (restart["start"], restart["end"], node)
        for node, restarts in result["restarts"].items()
        for restart in restarts
    )
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        assert end <= start, f"{first} and {second} restarted their kubelets at once"
    # the kubelet runs with the flags the agent wrote, and pulls with the plugin's credentials
    first = result["restarts"]["node-a"][0]["argv"]
    assert f"--image-credential-provider-config={AGENT_CONFIG}" in first
    assert sorted(result["pulls"]) == [
        f"{node}/{cloud}" for node in ("node-a", "node-b") for cloud in ("acr", "ecr", "gcr")
    ]
    for pulled, pull in result["pulls"].items():
        assert pull["phase"] == "Succeeded", (pulled, pull)


def test_a_new_image_with_the_same_config_restarts_no_kubelet(cluster_run: dict[str, Any]) -> None:
    upgrade = cluster_run["phases"].get("upgrade")
    assert upgrade is not None, _said(cluster_run)
    for node in ("node-a", "node-b"):
        assert upgrade["annotations"][node]["credprovider.io/version"] == "0.2.0"
        assert upgrade["restarts"][node] == 1
        current = upgrade["files"][node]["/var/lib/credprovider/agent/current"]
        assert current == "link:versions/0.2.0"


def test_values_the_kubelet_would_refuse_stop_at_the_first_node(
    cluster_run: dict[str, Any],
) -> None:
    refused = cluster_run["phases"].get("refused")
    assert refused is not None, _said(cluster_run)
    results = {
        node: found["credprovider.io/result"] for node, found in refused["annotations"].items()
    }
    assert sorted(results.values()) == ["installed", "refused"], results  # the rollout stopped
    [node] = [node for node, said in results.items() if said == "refused"]
    assert "tokenAttributes" in refused["annotations"][node]["credprovider.io/detail"]
    assert ("CredentialProviderRefused", "Warning") in _events(cluster_run, node)
    assert refused["files"] == cluster_run["phases"]["upgrade"]["files"]  # no node changed
    assert refused["restarts"] == cluster_run["phases"]["upgrade"]["restarts"]


def test_a_kubelet_that_does_not_come_back_is_rolled_back(cluster_run: dict[str, Any]) -> None:
    rolled = cluster_run["phases"].get("rolled back")
    assert rolled is not None, _said(cluster_run)
    assert rolled["annotations"]["node-b"]["credprovider.io/result"] == "rolled back"
    assert ("CredentialProviderRolledBack", "Warning") in _events(cluster_run, "node-b")
    restarts = cluster_run["restarts"]["node-b"]
    # the change (its kubelet exits at once); its agent killed in the health wait; the node's own
    # rollback (it starts again) with no agent; the agent back: the change again, its rollback
    killed = cluster_run["killed_agent"]
    broken, healed = restarts[killed["restarts"] - 1], restarts[killed["restarts"]]
    assert broken["exited"] is not None and healed["exited"] is None
    assert healed["start"] > killed["at"]
    assert ("CredentialProviderRolledBackByNode", "Warning") in _events(cluster_run, "node-b")
    again, back = restarts[killed["restarts"] + 1], restarts[killed["restarts"] + 2]
    assert again["exited"] is not None and back["exited"] is None
    config = AGENT_CONFIG
    upgrade = cluster_run["phases"]["upgrade"]["files"]["node-b"]
    assert rolled["files"]["node-b"][config] == upgrade[config]  # the config put back


def test_helm_uninstall_alone_puts_every_node_back(cluster_run: dict[str, Any]) -> None:
    """helm uninstall, with no action=uninstall first: the chart's pre-delete hook (a Job the
    scheduler put on a node) told the agents to uninstall and waited for both nodes before helm
    deleted the DaemonSet; the Job is gone with it once it succeeded. (What the hook prints, node
    by node, is tests/integration/cli/test_fleet_uninstall.py's: this sandbox's kubelets serve no
    logs to the API server.)"""
    assert "after" in cluster_run, _said(cluster_run)
    assert cluster_run["helm_uninstall"].strip() == 'release "credprovider" uninstalled'
    assert len(cluster_run["hook_ran_on"]) == 1, cluster_run["hook_ran_on"]
    assert cluster_run["release_left"] == {"daemonset": None, "hook_job": None}
    for node in ("node-a", "node-b"):
        assert (
            cluster_run["phases"]["uninstalled"]["annotations"][node]["credprovider.io/result"]
            == "uninstalled"
        )
        assert cluster_run["after"][node] == cluster_run["before"][node], (
            node, cluster_run.get("journals", {}).get(node, "")[-2000:],
        )  # fmt: skip
        assert ("CredentialProviderUninstalled", "Normal") in _events(cluster_run, node)
    assert cluster_run["cgroups_left"] == []
    assert cluster_run["host_changed"] is False
    assert cluster_run["left_running"] == []

"""Commit-confirmed kubelet restarts (issue #46, ``credprovider/tool/agent/watchdog.py``): the
agent arms the node's own rollback before it restarts the kubelet, and disarms it once the kubelet
is confirmed healthy. A node whose agent was killed during the health wait, onto a config its
kubelet does not come back from, is back on its previous config and healthy with no agent, and
the agent's next start says so. Driven through the built bundle on a node of its own
(tests/reliability/watchdognode.py); its systemd is the stand-in private socket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from release.bundle import BUNDLE_DIR
from tests.helpers import REPO, private

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="a node of its own needs mount namespaces"),
    pytest.mark.skipif(
        not (BUNDLE_DIR / "credprovider").exists(), reason="no bundle built (make build)"
    ),
]
HEALTH_TIMEOUT = 4
CONFIG = "/etc/kubernetes/image-credential-provider-config.yaml"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = tmp_path_factory.mktemp("watchdog")
    spec = {
        "run_dir": str(run), "tool": str(BUNDLE_DIR / "credprovider"), "bundle": str(BUNDLE_DIR),
        "health_timeout": HEALTH_TIMEOUT, "result": str(run / "result.json"),
    }  # fmt: skip
    (run / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run(
        private([sys.executable, "-m", "tests.reliability.watchdognode", str(run / "spec.json")]),
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads((run / "result.json").read_text())
    return result


def test_a_confirmed_restart_disarms_the_rollback(node: dict[str, Any]) -> None:
    assert node["install"]["rc"] == 0, node["install"]
    assert node["install"]["out"].startswith("installed")
    [unit] = node["units_after_install"]
    assert unit.startswith("credprovider-rollback-") and unit.endswith(".service")
    assert node["live_after_install"] == []  # stopped once the kubelet was confirmed healthy
    # and it never put anything back: the first restart is the only one of the install
    assert [r["healthy"] for r in node["restarts"][:1]] == [True]
    assert "--image-credential-provider-config=" in node["installed"]["/etc/default/kubelet"]


def test_a_node_whose_agent_died_in_the_wait_heals_itself(node: dict[str, Any]) -> None:
    broken = node["broken_restart"]
    assert broken is not None and not broken["healthy"]  # the kubelet did not come back
    assert "BROKEN" in node["broken_files"][CONFIG]
    # no agent: the armed rollback put the config and flags back and restarted the kubelet
    assert node["healed_files"] == node["installed"]
    assert node["healed_restart"]["healthy"] is True
    assert node["healed_restart"]["args"] == node["restarts"][0]["args"]
    # within the health wait, its grace and a few seconds
    assert node["healed_after"] is not None and node["healed_after"] < HEALTH_TIMEOUT + 5 + 15
    assert "healed" in node["state"] and "restart_due" not in node["state"]
    assert "watchdog" not in node["state"]
    journal = node["journal"]
    assert (
        "credprovider agent rollback: the agent did not confirm the kubelet's restart: " in journal
    )
    assert "its config and flags were put back as the change found them and kubelet restarted" in (
        journal
    )
    assert "Traceback" not in journal


def test_the_next_start_reports_it_once(node: dict[str, Any]) -> None:
    told = json.loads(node["next start"]["out"])
    assert told["result"] == "unchanged", told
    assert told["healed"].startswith("the node rolled the change back by itself at ")
    assert "put back as the change found them and kubelet restarted" in told["healed"]
    assert "note: the node rolled" not in node["after"]["out"]  # said once
    assert node["after"]["out"].startswith("unchanged")


def test_uninstall_after_it_all_restores_the_node(node: dict[str, Any]) -> None:
    assert node["uninstall"]["rc"] == 0, node["uninstall"]
    assert node["uninstalled"] == node["before"]
    assert node["home_left"] is False
    # every armed rollback was a unit of its own, each stopped or ended; after the uninstall,
    # one that removes the agent's empty directory (here the agent had made it and removed it)
    names = [unit for unit, _ in node["units"]]
    assert len(names) == len(set(names)) >= 4
    tidy = [argv for unit, argv in node["units"] if unit.startswith("credprovider-tidy-")]
    assert [argv[3:] for argv in tidy] == [["credprovider-tidy", "/var/lib/credprovider"]]
    assert all(
        argv[1:3] == ["agent", "rollback"]
        for unit, argv in node["units"]
        if unit.startswith("credprovider-rollback-")
    )
    assert len(names) == len(tidy) + sum(n.startswith("credprovider-rollback-") for n in names)

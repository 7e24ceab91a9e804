"""A node provisioned exactly as docs/fleet.md says for the chart's mode files starts its kubelet
before the agent ever ran; then the agent installs, and its kubelet loads the agent's config; then
uninstall, and it still starts. The real kubelet (k8s.io/kubernetes v1.36.4) decides each time, in
private namespaces (tests/e2e/lifecycle.py); the flags alone, without the bootstrap, are the
control: that kubelet does not start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from credprovider.paths import AGENT_CONFIG
from release.bundle import BUNDLE_DIR
from tests.e2e.sandbox import run_kubelet
from tests.unit.test_docs import bootstrap_script_in_the_docs


def _started(step: dict[str, Any]) -> bool:
    kubelet = step["kubelet"]
    return kubelet["exit"] is None and kubelet["loaded"] == kubelet["expected"] is not None


def test_a_documented_node_starts_before_the_agent_and_after_its_uninstall(
    binaries: tuple[Path, Path], tmp_path: Path
) -> None:
    life = run_kubelet(
        binaries,
        Path(AGENT_CONFIG),  # the lifecycle's stages give the kubelet the documented paths
        tmp_path,
        module="tests.e2e.lifecycle",
        bundle=str(BUNDLE_DIR.resolve()),
        bootstrap=bootstrap_script_in_the_docs(),
    )

    control = life["flags alone"]["kubelet"]
    assert control["exit"] not in (None, 0), control  # the docs before the bootstrap: no start
    # the kubelet's own words: it cannot register the plugins whose directory is missing
    assert any("Failed to register CRI auth plugins" in line for line in control["log"]), control

    booted = life["bootstrap"]
    assert booted["provisioned"]["exit"] == 0, booted
    assert _started(booted), booted["kubelet"]

    installed = life["agent installed"]
    assert installed["agent"]["exit"] == 0, installed["agent"]
    assert _started(installed), installed["kubelet"]
    # the kubelet loaded the agent's config, not the bootstrap's
    assert installed["kubelet"]["loaded"] != booted["kubelet"]["loaded"]

    uninstalled = life["agent uninstalled"]
    assert uninstalled["agent"]["exit"] == 0, uninstalled["agent"]
    assert _started(uninstalled), uninstalled["kubelet"]
    # provisioning's bootstrap back, byte for byte (the same hash)
    assert uninstalled["kubelet"]["loaded"] == booted["kubelet"]["loaded"]

    bare = life["uninstalled without a bootstrap"]
    assert [step["exit"] for step in bare["agent"]] == [0, 0], bare["agent"]
    assert _started(bare), bare["kubelet"]
    assert "left as the bootstrap" in bare["agent"][1]["said"]
    # what uninstall leaves is the docs' bootstrap, byte for byte (the same hash)
    assert bare["kubelet"]["loaded"] == booted["kubelet"]["loaded"]

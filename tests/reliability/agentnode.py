"""A kubeadm node for the agent run through the CLI (the red team's and the flush suite's)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from emulators.http import FakeResponse, serve
from tests.integration.cli.conftest import fake_bundle
from tests.unit.tool.test_agent_apply import kubeadm


@contextlib.contextmanager
def agent_node(tmp_path: Path) -> Iterator[tuple[Path, Path, list[str]]]:
    """A kubeadm node with a flags file, nothing of the agent's on it yet: its root, a bundle to
    place, and the options every agent command there takes (a stand-in kubelet answering its
    /healthz while this lasts)."""
    root = Path(kubeadm(tmp_path / "node"))
    (root / "etc/default").mkdir(parents=True, exist_ok=True)
    (root / "etc/default/kubelet").write_text("KUBELET_EXTRA_ARGS=--v=2\n")
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    with serve(lambda request: FakeResponse.text("ok")) as kubelet:
        yield root, bundle, [
            "--root", str(root), "--restart-command", "true {unit}",
            "--healthz", f"{kubelet.url}/healthz", "--health-timeout", "5",
        ]  # fmt: skip

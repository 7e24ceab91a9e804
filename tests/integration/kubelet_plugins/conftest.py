"""The built plugins driven by the real kubelet code (matchImages, exec, strict decoding, cache,
keyring, service-account mode), through the Go harness in emulators/kubelet.

Each plugin name in the bin dir is a wrapper that records the exec and runs the bundle, so the tests
can count how often the kubelet really execs a plugin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from release.bundle import BUNDLE_DIR
from tests.helpers import require_bundle
from tests.integration.kubelet_plugins.common import Node


@pytest.fixture
def node(tmp_path: Path) -> Node:
    require_bundle()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "execs.log"
    for name in ("ecr-credential-provider", "acr-credential-provider", "auth-provider-gcp"):
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\nexec {BUNDLE_DIR / name} "$@"\n')
        wrapper.chmod(0o755)
    return Node(bin_dir, log, tmp_path)

"""SDK log routing (credprovider/runtime/log.py): applied when an SDK first imports logging, so the
stdlib paths never load it, and no record ever reaches Python's unscrubbed last-resort handler."""

from __future__ import annotations

import subprocess
import sys

import pytest

from release.bundle import REPO

_PROBE = """
import io, sys
sys.path.insert(0, sys.argv[1])
from credprovider.runtime.log import Logger, route_sdk_logging
from credprovider.runtime.redact import register_secret
stream = io.StringIO()
log = Logger("probe", int(sys.argv[2]), stream)
if sys.argv[3] == "already":
    import logging
route_sdk_logging(log)
route_sdk_logging(log)  # a second fetch in one process: still one hook, one handler
print("loaded-before-sdk", "logging" in sys.modules)
register_secret("s3cr3t-token-value-123456")
import logging, logging.handlers  # what an SDK does
logging.getLogger("botocore.endpoint").warning("sent %s", "s3cr3t-token-value-123456")
logging.getLogger("urllib3").debug("debug detail")
print("spec", logging.__spec__.origin.endswith("__init__.py"), type(logging.__loader__).__name__)
print("handlers", len(logging.getLogger().handlers))
print("hooks", sum(type(f).__name__ == "_AfterImport" for f in sys.meta_path))
sys.stdout.write("STDERR " + stream.getvalue().replace("\\n", "|"))
"""


@pytest.mark.parametrize("when", ["on-import", "already"])
@pytest.mark.parametrize("verbosity", [0, 2, 6])
def test_sdk_records_are_routed_scrubbed_and_leveled(when: str, verbosity: int) -> None:
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _PROBE, str(REPO), str(verbosity), when],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stderr == ""  # nothing through the last-resort handler
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert lines["loaded-before-sdk"] == ("True" if when == "already" else "False")
    assert lines["spec"] == "True SourceFileLoader"
    assert lines["handlers"] == "1"
    assert lines["hooks"] == "0"
    routed = lines.get("STDERR", "")
    assert "s3cr3t-token-value-123456" not in routed
    assert ("[botocore.endpoint] sent s3c" in routed) == (verbosity >= 2)
    assert ("[urllib3] debug detail" in routed) == (verbosity >= 6)

"""--restart-command, run as every program from an operator's config is (runtime/child.py): its
output bounded, its failure one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from credprovider.tool.agent.restart import by_command
from credprovider.tool.errors import NodeChangeError


def _command(tmp_path: Path, body: str) -> str:
    script = tmp_path / "restart"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return f"{script} {{unit}}"


def test_the_unit_is_given_quoted(tmp_path: Path) -> None:
    by_command(_command(tmp_path, f'echo "$1" > {tmp_path / "unit"}'), "kubelet.service")
    assert (tmp_path / "unit").read_text() == "kubelet.service\n"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (
            "echo 'Job for kubelet.service failed.' >&2; exit 1",
            "(1): Job for kubelet.service failed.",
        ),
        ("exit 5", "(5): no output"),
        # 8 MiB on stderr, then a failure: kept to the cap, never all of it in memory or the line
        ("head -c 8388608 /dev/zero | tr '\\0' x >&2; exit 2", "(2): xxxx"),
    ],
)
def test_a_failed_restart_is_one_line(tmp_path: Path, body: str, says: str) -> None:
    with pytest.raises(NodeChangeError) as raised:
        by_command(_command(tmp_path, body), "kubelet.service")
    line = str(raised.value)
    assert line.startswith(f"restarting kubelet.service failed {says}"), line
    assert "\n" not in line and len(line) < 1200


def test_a_restart_that_cannot_start_says_so(tmp_path: Path) -> None:
    with pytest.raises(
        NodeChangeError, match=r"restarting kubelet\.service failed: .*No such file"
    ):
        by_command(f"{tmp_path / 'missing'} {{unit}}", "kubelet.service")

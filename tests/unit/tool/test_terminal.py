"""What the tool prints (credprovider/tool/terminal.py): escaped always, and on stderr each line
capped, saying how long it was (#62: a 120 KB path echoed three times, 5,000 node names in one
line); stdout, which scripts read, whole."""

from __future__ import annotations

import json

from credprovider.tool.terminal import STDERR_LINE_LIMIT, capped, sanitized
from tests.helpers import run_cli


def test_a_long_line_is_cut_where_a_person_reads_it() -> None:
    assert capped("short\nlines") == "short\nlines"
    long = "n" * 10_000
    cut = capped(f"first\n{long}\nlast")
    first, middle, last = cut.split("\n")
    assert (first, last) == ("first", "last")
    assert middle.startswith("n" * STDERR_LINE_LIMIT) and middle.endswith("…(10000 bytes)")
    assert sanitized("a\x1b[2Jb") == "a\\x1b[2Jb"


def test_a_path_of_120_kb_is_not_echoed_whole(tmp_path: object) -> None:
    path = "/" + "/".join(["d" * 200] * 600)  # 120 KB, past the system's own limit
    done = run_cli("validate", path)  # its verdict on stdout, for a person
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = (done.stdout + done.stderr).splitlines()
    assert lines and all(len(line) <= STDERR_LINE_LIMIT + 32 for line in lines), [
        len(line) for line in lines
    ]
    assert "…(" in done.stdout and len(done.stdout + done.stderr) < 3 * (STDERR_LINE_LIMIT + 32)


def test_json_on_stdout_is_not_cut() -> None:
    """``--json`` is read by scripts: a long value there stays whole (and JSON-escaped)."""
    path = "/nonexistent-" + "x" * 5000
    done = run_cli("validate", "--json", path)
    assert path in json.dumps(json.loads(done.stdout)), done.stdout[:200]

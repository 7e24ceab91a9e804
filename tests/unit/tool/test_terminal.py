"""What the tool prints (credprovider/tool/terminal.py): escaped always, and on stderr each line
capped, saying how long it was (#62: a 120 KB path echoed three times, 5,000 node names in one
line); stdout, which scripts read, whole."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from credprovider.tool.terminal import STDERR_LINE_LIMIT, capped, encodable, sanitized
from tests.helpers import run_cli, unavailable


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


def test_what_an_encoding_cannot_show_is_escaped() -> None:
    assert encodable("a → b…", "utf-8") == "a → b…"
    assert encodable("a → b… é", "iso8859-1") == "a \\u2192 b\\u2026 é"
    assert encodable("a → b", "no-such-codec") == "a → b"


def _latin1_locale(tmp_path: Path) -> dict[str, str]:
    """The environment of an operator whose terminal is ISO-8859-1 (a locale compiled into
    ``tmp_path``: LOCPATH, nothing installed on the host)."""
    tmp_path.mkdir()
    made = subprocess.run(
        ["localedef", "-i", "en_US", "-f", "ISO-8859-1", str(tmp_path / "en_US.ISO-8859-1")],
        capture_output=True,
        check=False,
    )
    if made.returncode not in (0, 1):  # 1: made, with warnings
        unavailable(f"localedef could not make an ISO-8859-1 locale: {made.stderr[-200:]!r}")
    return {"LOCPATH": str(tmp_path), "LC_ALL": "en_US.ISO-8859-1", "LANG": "en_US.ISO-8859-1"}


@pytest.mark.parametrize("use_bundle", [False, True], ids=["source", "bundle"])
def test_a_terminal_in_an_8_bit_locale_gets_the_whole_verdict(
    tmp_path: Path, use_bundle: bool
) -> None:
    """An operator's terminal in ISO-8859-1: a config naming a host with "→" ended validate
    halfway through its findings with "internal error: UnicodeEncodeError" (Python's stdout is
    strict); now each such character is escaped and the verdict is whole."""
    env = _latin1_locale(tmp_path / "locale")
    config = tmp_path / "providers.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        "- name: auth-provider-gcp\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        '  matchImages: ["gcr.io", "x→y.example.com"]\n  defaultCacheDuration: 1m\n'
        '  args: ["get-credentials"]\n',
        encoding="utf-8",
    )
    done = run_cli("validate", str(config), "--bin-dir", str(tmp_path), env=env,
                   use_bundle=use_bundle)  # fmt: skip
    assert "internal error" not in done.stderr, done.stderr
    assert done.returncode == 1 and "\\u2192" in done.stdout, done.stdout
    assert done.stdout.rstrip().endswith("get no credentials from it"), done.stdout

"""docs/operators.md states facts that live in code: keep them the same."""

from __future__ import annotations

import re

from credprovider.aws.registry import SHIPPED_ANNOTATIONS
from credprovider.azure.registry import ANNOTATION_KEYS
from credprovider.gcp.registry import WI_ANNOTATION
from credprovider.runtime.log import VERBOSITY_SCHEME
from release.bundle import REPO

OPERATORS = " ".join((REPO / "docs" / "operators.md").read_text().split())


def test_the_annotation_keys_are_the_ones_the_plugins_read() -> None:
    for key in (*SHIPPED_ANNOTATIONS, *ANNOTATION_KEYS, WI_ANNOTATION):
        assert f"`{key}" in OPERATORS, key


def test_the_verbosity_levels_are_the_plugins() -> None:
    assert VERBOSITY_SCHEME.removeprefix("0 quiet, ") in OPERATORS


def test_every_symptom_names_a_command() -> None:
    for symptom in ("did not exist", "no basic auth credentials", "context deadline exceeded",
                    "Failed getting credential"):  # fmt: skip
        assert symptom in OPERATORS
    assert "credprovider validate CONFIG --bin-dir BIN_DIR" in OPERATORS
    assert "credprovider get IMAGE --config CONFIG --bin-dir BIN_DIR" in OPERATORS


def test_exit_status_and_what_changes_are_one_text_in_help_readme_and_docs() -> None:
    """README, docs/operators.md and --help give one meaning of validate's exit status and one
    account of what each command changes."""
    import contextlib
    import io

    from credprovider.tool.cli import build_parser
    from credprovider.tool.commands.common import VALIDATE_EXIT_STATUS, WHAT_CHANGES

    readme = " ".join((REPO / "README.md").read_text().split())
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser().parse_args(["validate", "--help"])
    shown = " ".join(out.getvalue().split())
    for where, text in (("README", readme), ("docs", OPERATORS), ("--help", shown)):
        assert " ".join(VALIDATE_EXIT_STATUS.split()) in text, where
    # and what each command changes: the same text in credprovider --help, README and the docs
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser().parse_args(["--help"])
    # argparse wraps at hyphens too ("read-" / "only"): joined back, the text is what was written
    top = re.sub(r"(?<=\w)- (?=\w)", "-", " ".join(out.getvalue().split()))
    for where, text in (("README", readme), ("docs", OPERATORS), ("--help", top)):
        assert " ".join(WHAT_CHANGES.split()) in text, where
    assert "changes nothing" not in OPERATORS


def test_the_layout_table_in_the_docs_is_the_one_doctor_uses() -> None:
    from credprovider.tool.node.layouts import LAYOUTS

    text = (REPO / "docs" / "operators.md").read_text()
    for layout in LAYOUTS:
        (row,) = [line for line in text.splitlines() if line.startswith(f"| {layout.name} |")]
        assert layout.source in row and (not layout.config or f"`{layout.config}`" in row)
        assert all(f"`{directory}`" in row for directory in layout.bin_dirs)

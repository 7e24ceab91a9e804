"""docs/operators.md states facts that live in code: keep them the same."""

from __future__ import annotations

import re
from pathlib import Path

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


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # not inside code blocks
    return re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)


def test_every_link_between_the_docs_resolves() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = [
        f"{page.relative_to(REPO)} -> {link}"
        for page in pages
        for link in _links(page)
        if "://" not in link and not (page.parent / link).exists()
    ]
    assert broken == []
    linked = {(REPO / link).resolve() for link in _links(REPO / "README.md") if "://" not in link}
    assert set((REPO / "docs").glob("*.md")) <= linked, "a page the README does not link"


def test_the_readme_is_a_front_page() -> None:
    """What it is, the two commands, installing on a node and on a cluster, a config per cloud and
    links: no dated figures (they live in bench/results.md and the docs)."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", text) is None
    for heading in ("## The two commands", "## Install on a node", "## Install on a cluster",
                    "## A config per cloud", "## Where to read more"):  # fmt: skip
        assert f"\n{heading}\n" in text, heading


def test_one_layout_per_install_form_in_readme_install_text_and_help() -> None:
    """The bin dir and config each install form suggests are credprovider.paths', everywhere."""
    import contextlib
    import io

    from credprovider.paths import (
        AGENT_BIN_DIR,
        NODE_BIN_DIR,
        NODE_CONFIG,
        PACKAGE_BIN_DIR,
        PACKAGE_DOC_DIR,
    )
    from credprovider.tool.cli import build_parser
    from release.package import install_text

    readme = (REPO / "README.md").read_text()
    for path in (NODE_BIN_DIR, NODE_CONFIG, PACKAGE_BIN_DIR, PACKAGE_DOC_DIR, AGENT_BIN_DIR):
        assert f"`{path}" in readme, path
    shipped = install_text("0.1.0", "amd64")
    assert f"BIN_DIR={NODE_BIN_DIR} " in shipped and NODE_CONFIG in shipped
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser().parse_args(["install", "--help"])
    shown = re.sub(r"(?<=\w)- (?=\w)", "-", " ".join(out.getvalue().split()))
    assert NODE_BIN_DIR in shown and NODE_CONFIG in shown
    install_doc = (REPO / "docs" / "install.md").read_text()
    assert NODE_BIN_DIR in install_doc and PACKAGE_BIN_DIR in install_doc


def test_every_file_of_the_tree_the_docs_name_exists() -> None:
    """A module moved is a doc changed: README and docs/ name only files that are there."""
    named = re.compile(
        r"(?<![\w/.-])((?:credprovider|tests|release|emulators|bench|charts|config)/[\w./-]+"
        r"\.(?:py|yaml|md|json|c|sh|spec))\b"
    )
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    missing = [
        f"{page.relative_to(REPO)}: {path}"
        for page in pages
        for path in named.findall(page.read_text())
        if not (REPO / path).exists()
    ]
    assert missing == []


def bootstrap_script_in_the_docs() -> str:
    """The provisioning commands docs/fleet.md gives for mode files (the first sh block after
    'Provisioning lays a bootstrap'), as an operator copies them."""
    text = (REPO / "docs/fleet.md").read_text()
    after = text[text.index("**Provisioning lays a bootstrap with the flags.**") :]
    start = after.index("```sh\n") + len("```sh\n")
    return after[start : after.index("```", start)]


def test_the_bootstrap_in_the_docs_is_the_one_the_agent_knows() -> None:
    from credprovider.tool.agent.bootstrap import provisioning_script

    assert bootstrap_script_in_the_docs() == provisioning_script()


def test_a_newcomers_first_release_is_this_machines_architecture_only() -> None:
    """make release-here: this machine's artifacts only (no other interpreter, no qemu-user), and
    the README starts a newcomer there."""
    import subprocess

    from release.targets import host_target

    planned = subprocess.run(
        ["make", "-n", "--always-make", "release-here"], cwd=REPO, capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip
    arch = host_target().arch
    other = {"amd64": "arm64", "arm64": "amd64"}[arch]
    assert f"-m release artifacts --arch {arch} --out dist/release-{arch}" in planned
    assert f"--arch {other}" not in planned and f"bundles/{other}" not in planned
    assert "make release-here" in " ".join((REPO / "README.md").read_text().split())


def test_the_readme_names_every_command_of_the_tool() -> None:
    """The README's row for `credprovider` lists the tool's commands: each one, in the parser's
    order (it listed nine of twelve)."""
    from credprovider.tool.commands import COMMANDS

    readme = (REPO / "README.md").read_text()
    [row] = [line for line in readme.splitlines() if line.startswith("| `credprovider` |")]
    named = re.findall(r"`([a-z-]+)`", row.split("|")[2])
    assert named == [command.replace("_", "-") for command in COMMANDS]

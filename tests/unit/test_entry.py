"""The multi-call entry point and the lean exec path (which modules each plugin imports)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from credprovider.entry import PLUGIN_MODULES, plugin_of, program_name, resolve
from release.bundle import REPO
from tests.helpers import run_listing_imports


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["/usr/libexec/kubernetes/kubelet-plugins/ecr-credential-provider", "get-credentials"],
            ("ecr-credential-provider", ["get-credentials"]),
        ),
        (["ecr-credential-provider.exe"], ("ecr-credential-provider", [])),
        (
            ["/opt/credprovider/credprovider", "match", "a", "b"],
            ("credprovider", ["match", "a", "b"]),
        ),
        (
            ["/opt/credprovider/credprovider", "ecr-credential-provider", "-v=1"],
            ("ecr-credential-provider", ["-v=1"]),
        ),
        (
            ["/x/__main__.py", "ecr-credential-provider", "get-credentials"],
            ("ecr-credential-provider", ["get-credentials"]),
        ),
        (["/x/__main__.py"], None),
        (["/x/something-else", "nope"], None),
        # a second provider of a plugin, under a name of its own (#33)
        (
            ["/etc/kubernetes/bin/ecr-credential-provider-prod", "get-credentials"],
            ("ecr-credential-provider-prod", ["get-credentials"]),
        ),
        (
            ["acr-credential-provider-team_b.2", "a.json"],
            ("acr-credential-provider-team_b.2", ["a.json"]),
        ),
        (["auth-provider-gcp-europe.exe"], ("auth-provider-gcp-europe", [])),
        (
            ["/opt/credprovider/credprovider", "auth-provider-gcp-eu", "-v=1"],
            ("auth-provider-gcp-eu", ["-v=1"]),
        ),
        # not a suffix: nothing after the dash, a suffix starting with punctuation, a slash or a
        # space in it, a name that only starts like a plugin's
        (["/x/ecr-credential-provider-"], None),
        (["/x/ecr-credential-provider--prod"], None),
        (["/x/ecr-credential-provider-.x"], None),
        (["/x/ecr-credential-provider-a/b"], None),  # basename: "b"
        (["/x/credprovider-x", "ecr-credential-provider-a/b"], None),
        (["/x/ecr-credential-provider-a b"], None),
        (["/x/ecr-credential-providers"], None),
        (["/x/ecr-credential-provider_prod"], None),
    ],
)
def test_dispatch(argv: list[str], expected: tuple[str, list[str]] | None) -> None:
    assert resolve(argv) == expected


def test_program_name_strips_directory_and_exe() -> None:
    assert program_name("/a/b/ecr-credential-provider") == "ecr-credential-provider"
    assert program_name("auth-provider-gcp.EXE") == "auth-provider-gcp"
    assert program_name("C:\\k\\x") != "x"  # Linux paths only: backslashes are name characters


def test_unknown_name_is_a_clear_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from credprovider.entry import main; main(['/x/nope'])"],
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        check=False,
    )
    assert proc.returncode == 1 and proc.stdout == b""
    assert proc.stderr.decode() == (
        "nope: unknown program name; run as one of ecr-credential-provider, "
        "acr-credential-provider, auth-provider-gcp, registry-credential-provider, credprovider (a symlink to this executable), "
        "or as <plugin name>-<suffix> for a second provider of a plugin (e.g. "
        "ecr-credential-provider-prod), or pass the name as the first argument\n"
    )


@pytest.mark.parametrize(
    ("name", "plugin"),
    [
        ("ecr-credential-provider", "ecr-credential-provider"),
        ("ecr-credential-provider-prod", "ecr-credential-provider"),
        ("acr-credential-provider-team-b", "acr-credential-provider"),
        ("auth-provider-gcp-europe", "auth-provider-gcp"),
        ("auth-provider-gcp-", None),
        ("auth-provider-gcpx", None),
        ("credprovider", None),
        ("credprovider-x", None),
    ],
)
def test_plugin_of(name: str, plugin: str | None) -> None:
    assert plugin_of(name) == plugin


def test_a_suffixed_name_runs_its_plugin_as_that_name() -> None:
    """Its error lines (which the kubelet logs) name the provider the kubelet ran."""
    proc = subprocess.run(
        [sys.executable, "-m", "credprovider", "ecr-credential-provider-prod", "--no-such-flag"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("ecr-credential-provider-prod: "), proc.stderr


HEAVY = {
    "pydantic",
    "pydantic_core",
    "yaml",
    "botocore",
    "boto3",
    "azure",
    "msal",
    "google",
    "requests",
    "urllib3",
    "cryptography",
}


@pytest.mark.parametrize("name", sorted(PLUGIN_MODULES))
def test_plugin_start_up_imports_nothing_heavy(name: str) -> None:
    """Until a token is fetched (here: the request is invalid) no SDK, pydantic or YAML is loaded."""
    run = run_listing_imports(name, b"not a request", plugin_sees_env=False)
    assert run.code == 1
    assert HEAVY.isdisjoint(run.roots), HEAVY.intersection(run.roots)


_MODULES_PROBE = """
import sys
sys.path.insert(0, sys.argv.pop(1))
baseline = set(sys.modules)
sys.argv = sys.argv[1:]
from credprovider.entry import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write("\\nIMPORTED " + " ".join(sorted(set(sys.modules) - baseline)) + "\\n")
"""


def _run_entry(argv: list[str], env: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """Run the dispatcher as the bundle does (-I -S): its stdout, and the modules it imported beyond
    what the interpreter had at start."""
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _MODULES_PROBE, str(REPO), *argv],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    imported = proc.stderr.rpartition("\nIMPORTED ")[2].split()
    return proc.stdout, imported


# What --version may import beyond the bare interpreter's start: os (frozen in the bundle; imported
# by the bundle's own start anyway) and, run from source only, _ssl for the OpenSSL version.
VERSION_MAY_IMPORT = {
    "credprovider", "credprovider.entry", "credprovider.version", "credprovider._buildinfo",
    "__future__", "os", "os.path", "posixpath", "genericpath", "stat", "_stat", "_collections_abc",
    "_ssl", "_socket",
}  # fmt: skip


@pytest.mark.parametrize("name", [*sorted(PLUGIN_MODULES), "credprovider"])
def test_version_is_answered_before_any_program_is_imported(name: str) -> None:
    """--version alone imports the version module and nothing else: no typing, re, json or the
    runtime. A plugin prints the same text when --version comes with another flag (full path)."""
    fast, imported = _run_entry([f"/opt/bin/{name}", "--version"])
    assert fast.startswith(f"{name} version ") and len(fast.splitlines()) == 2
    assert set(imported) <= VERSION_MAY_IMPORT, set(imported) - VERSION_MAY_IMPORT
    if name in PLUGIN_MODULES:
        slow, _imported = _run_entry([f"/opt/bin/{name}", "-v=0", "--version"])
        assert slow == fast


def test_the_start_check_reads_a_plugins_settings_when_it_has_no_args() -> None:
    """The tool's start check ran `<plugin> --version` for a provider with no args (ECR's usual
    entry): answered before the plugin loaded, it proved nothing of the settings every pull reads
    (ECR's profile files: tests/integration/cli/test_validate.py). With CREDPROVIDER_START_CHECK=1
    the plugin is loaded and its settings read: acr-credential-provider without its azure.json is
    refused, as every pull would be; an operator's bare --version stays the fast answer."""
    from credprovider.entry import START_CHECK_ENV

    env = {"PATH": "/usr/bin:/bin"}
    argv = ["/opt/bin/acr-credential-provider", "--version"]
    fast, imported = _run_entry(argv, env)
    assert fast.startswith("acr-credential-provider version ")
    assert "credprovider.azure.main" not in imported
    checked = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _MODULES_PROBE, str(REPO), *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**env, START_CHECK_ENV: "1"},
    )
    assert (checked.returncode, checked.stdout) == (1, "")
    assert checked.stderr.startswith(
        "acr-credential-provider: error: config file is not specified"
    ), checked.stderr


def test_every_tool_option_has_help_and_states_its_default() -> None:
    import argparse

    from credprovider.tool.cli import build_parser

    parser = build_parser()
    assert "credprovider <plugin-name> [args]" in parser.format_help()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    checked = 0
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            if not action.option_strings or action.dest == "help":
                continue
            checked += 1
            assert action.help, f"{name} {action.option_strings[0]} has no help"
            if action.default not in (None, False, [], "") and not action.required:
                assert "default" in action.help, f"{name} {action.option_strings[0]}: no default"
    assert checked > 20

"""The tool's parser: a mistyped subcommand or option gets "did you mean", in every subparser, and an
unknown option is reported before a missing argument (``validate --hlep`` is not "PATH required")."""

from __future__ import annotations

import argparse

import pytest

from credprovider.tool.cli import build_parser
from credprovider.tool.commands import COMMANDS


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["valdiate", "x"], "invalid choice: 'valdiate' (choose from 'doctor', 'validate', 'get', 'explain', "
                            "'match', 'install', 'migrate', 'undo', 'agent', 'fleet', 'render', 'package-removal-check'); "
                            "did you mean 'validate'?"),
        (["gte", "img"], "did you mean 'get'?"),
        (["instal"], "did you mean 'install'?"),
        (["validate", "--hlep"], "credprovider validate: error: unrecognized argument --hlep; did you mean --help?"),
        (["validate", "x", "--bin-dri", "y"], "unrecognized argument --bin-dri; did you mean --bin-dir?"),
        (["validate", "--xyzzy"], "unrecognized argument --xyzzy (see credprovider validate --help)"),
        (["get", "img", "--cofnig", "c.yaml"], "unrecognized argument --cofnig; did you mean --config?"),
        (["explain", "img", "--jsno"], "did you mean --json?"),
        (["match", "--jsn", "p", "i"], "unrecognized argument --jsn (see credprovider match --help)"),
        (["install", "--bin-dir", "b", "--config-out", "c", "--targt", "t"], "did you mean --target?"),
        (["migrate", "--kubelet-flag-file", "f"], "did you mean --kubelet-flags-file?"),
        (["migrate", "--wirte"], "did you mean --write?"),
    ],
)  # fmt: skip
def test_a_typo_gets_did_you_mean(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert said in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["migrate", "--kubelet-flags=--cloud-provider=aws --v=2"],  # a value that looks like flags
        ["migrate", "--kubelet-config", "-", "--json"],
        ["get", "img", "--config", "c.yaml", "--bin-dir", "b", "--timeout", "5s"],
        ["validate", "x", "--bin", "b"],  # an unambiguous prefix, as argparse allows
        ["match", "*.example", "x.example/app"],
    ],
)
def test_what_is_right_still_parses(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).command == argv[0]


def test_every_subcommand_has_the_parser() -> None:
    parser = build_parser()
    (action,) = [a for a in parser._actions if a.dest == "command"]
    # one module each, named as the command ('-' written '_')
    assert sorted(action.choices) == sorted(c.replace("_", "-") for c in COMMANDS)  # type: ignore[arg-type]
    assert {type(p).__name__ for p in action.choices.values()} == {"ToolParser"}  # type: ignore[union-attr]


def test_a_bug_is_one_line_unless_its_traceback_is_asked_for(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever a command did not expect is one line naming it (scrubbed and escaped, as every
    line the tool prints), exit 1; CREDPROVIDER_TRACEBACK=1 raises it instead (the tests' own
    setting, so that a bug fails them). The bug here is stood in for: the image parser raising
    what no command catches, with an escape byte and a registered secret in its text."""
    from credprovider.runtime import imageref
    from credprovider.runtime.redact import register_secret
    from credprovider.tool.cli import TRACEBACK_ENV, main

    secret = "s3cr3t-" + "x" * 24
    register_secret(secret)

    def broken(reference: str) -> object:
        raise KeyError(f"\x1b[2J{secret}")

    monkeypatch.setattr(imageref, "parse_image", broken)
    monkeypatch.delenv(TRACEBACK_ENV)
    with pytest.raises(SystemExit) as exited:
        main(["match", "*.io", "a.io/x"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("credprovider match: internal error: KeyError: ") and err.count("\n") == 1
    assert secret not in err and "\x1b" not in err and "Traceback" not in err
    assert err.endswith(f"(rerun with {TRACEBACK_ENV}=1 for a traceback and report it)\n")
    monkeypatch.setenv(TRACEBACK_ENV, "1")
    with pytest.raises(KeyError):
        main(["match", "*.io", "a.io/x"])


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _parsers(sub)
    return found


def test_every_help_reads_as_written() -> None:
    """Every command's and subcommand's --help, formatted as argparse prints it: no escape left
    (a description is not %-formatted unless it names %(prog)s, so the .rpm's "%%preun" printed
    doubled), no default left unfilled."""
    for parser in _parsers(build_parser()):
        text = parser.format_help()
        assert "%%" not in text and "%(" not in text, parser.prog

"""The tool's parser: a mistyped subcommand or option gets "did you mean", in every subparser, and an
unknown option is reported before a missing argument (``validate --hlep`` is not "PATH required")."""

from __future__ import annotations

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

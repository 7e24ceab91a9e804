"""``credprovider``: the operator tool (run by hand, never by the kubelet).

It answers "why did this pull get no credentials?" (``doctor`` first, then ``get`` for one image)
and changes nodes (``install``, ``migrate``, the fleet ``agent``). Each subcommand is a module of
credprovider/tool/commands/, listed in ``COMMANDS`` (their order in ``--help``); this one builds the
parser and is the edge that catches errors.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import itertools
import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from credprovider.entry import (
    PLUGIN_MODULES,
    drop_stdout,
    print_out,
    say_quietly,
    stdout_failed,
)
from credprovider.errors import CredproviderError
from credprovider.runtime.child import kill_running
from credprovider.runtime.excerpt import VALUE_LIMIT, quoted
from credprovider.runtime.redact import safe_line
from credprovider.runtime.serve import without_key_log
from credprovider.tool.commands import COMMANDS
from credprovider.tool.commands.common import (
    CWD_GONE,
    EXAMPLE,
    EXIT_FAILED,
    EXIT_USAGE,
    WHAT_CHANGES,
)
from credprovider.tool.node.access import UnreadableError, cwd_gone
from credprovider.tool.terminal import OutputFailed, sanitizing
from credprovider.version import version_text


class _PrintVersion(argparse.Action):
    """--version as the plugins print it (argparse's own action would re-wrap the lines)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        parser.exit(print_out("credprovider", version_text("credprovider")))


# ``~`` or ``~user`` at the start of a path, as a shell would have expanded it.
_UNEXPANDED_HOME = re.compile(r"~[A-Za-z0-9._-]*(/|$)")
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)$")


def _closest(word: str, candidates: Sequence[str]) -> str | None:
    found = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return found[0] if found else None


class ToolParser(argparse.ArgumentParser):
    """argparse with "did you mean" for a mistyped subcommand or option, in every subparser. An
    option no subcommand knows is refused as such, before a missing argument is reported (so
    ``validate --hlep`` says so, not that PATH is required)."""

    def error(self, message: str) -> NoReturn:
        choice = _INVALID_CHOICE.search(message)
        if choice:
            choices = [c.strip().strip("'") for c in choice.group(2).split(",")]
            guess = _closest(choice.group(1), choices)
            if guess:
                message += f"; did you mean '{guess}'?"
        super().error(message)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if args is not None and not self._subparsers:
            self._refuse_dashed_value(list(args))
            for word in self._unknown_options(list(args)):
                guess = _closest(word, list(self._option_string_actions))
                hint = f"; did you mean {guess}?" if guess else f" (see {self.prog} --help)"
                self.error(f"unrecognized argument {word}{hint}")
            for word in args:
                self._refuse_unexpanded_home(word)
        return super().parse_known_args(args, namespace)

    def _refuse_dashed_value(self, args: list[str]) -> None:
        """An option's value given as the next word that starts with '-' (``--kubelet-flags
        "--cloud-provider=aws ..."``): argparse reads it as another option and says only
        "expected one argument". Refused, saying how to give it (after '=')."""
        for option, value in itertools.pairwise(args):
            action = self._option_string_actions.get(option)
            if (
                action is None
                or action.nargs is not None  # a switch, or a value of its own shape
                or not value.startswith("-")
                or value == "-"
                or value.split("=", 1)[0] in self._option_string_actions  # an option of ours
                or self._negative_number_matcher.match(value)
            ):
                continue
            given = quoted(value, VALUE_LIMIT)
            self.error(
                f"{option} {given}: a value that starts with '-' is read as an option of its "
                f"own; give it after '=': {option}={given}"
            )

    def _refuse_unexpanded_home(self, word: str) -> None:
        """A path that reached the tool as ``~/x`` (quoted, or after ``--opt=``, where the shell
        does not expand it) would be taken as a directory named ``~`` here: refused, naming the
        path meant. No other value the tool takes (an image, a pattern, JSON) starts with ``~``."""
        name, equals, value = word.partition("=") if word.startswith("--") else ("", "", word)
        meant = os.path.expanduser(value)
        if not _UNEXPANDED_HOME.match(value) or meant == value:  # no such user: a name as given
            return
        given = f"{name}{equals}{value}"
        self.error(
            f"{quoted(given, VALUE_LIMIT)}: '~' reached credprovider unexpanded (the shell expands it only at "
            f"the start of a word, not after '=' or in quotes): give the full path, "
            f"{quoted(meant, VALUE_LIMIT)}"
        )

    def _unknown_options(self, args: list[str]) -> list[str]:
        """The option-like words of ``args`` this parser does not know (values skipped)."""
        unknown: list[str] = []
        index = 0
        while index < len(args):
            word = args[index]
            index += 1
            if word == "--":
                break
            if not word.startswith("-") or word == "-" or self._negative_number_matcher.match(word):
                continue
            name, equals, _ = word.partition("=")
            known = [o for o in self._option_string_actions if o.startswith(name)]
            action = self._option_string_actions.get(name) or (
                self._option_string_actions[known[0]] if len(known) == 1 else None
            )
            if action is None:
                unknown.append(name)
            elif not equals and action.nargs != 0:
                index += 1  # its value, which may look like an option
        return unknown


def build_parser() -> argparse.ArgumentParser:
    parser = ToolParser(
        prog="credprovider",
        epilog=(
            "The plugins run under this name too: 'credprovider <plugin-name> [args]' is the "
            f"plugin itself (plugin names: {', '.join(PLUGIN_MODULES)}); for example "
            f"'credprovider {EXAMPLE.name} --help'."
        ),
        description=(
            "Operator tool for the kubelet image credential provider plugins "
            f"{', '.join(PLUGIN_MODULES)}. Start with 'credprovider doctor' on the node (no flags: "
            "it finds the kubelet's config and bin dir), then 'credprovider get IMAGE' to see why "
            "one pull got (or did not get) credentials. " + WHAT_CHANGES
        ),
    )
    parser.add_argument(
        "--version",
        action=_PrintVersion,
        nargs=0,
        help="print the version, git commit, build date, architecture, Python and OpenSSL versions",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ToolParser)

    for command in COMMANDS:
        importlib.import_module(f"credprovider.tool.commands.{command}").register(sub)
    return parser


@contextlib.contextmanager
def _children_end_with_the_tool() -> Iterator[None]:
    """While the tool runs, SIGTERM and SIGHUP (``timeout 10 credprovider doctor``, a closed ssh
    session) first kill the programs it runs, each in a session of its own that the signal never
    reaches, then end the tool as they would have (a node change under way is the journal's to
    finish or reverse at the next run, as after any kill). The agent's own SIGTERM handling
    (agent/termination.py) takes over once it runs."""
    import signal

    def ended(signum: int, _frame: object) -> None:
        kill_running()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    before = {ending: signal.signal(ending, ended) for ending in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for ending, handler in before.items():
            signal.signal(ending, handler)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    without_key_log()  # before any TLS: the API server's token and the kubelet's cross it
    with _children_end_with_the_tool():
        code = _outcome(args)
    sys.exit(_flushed(code))


def _outcome(args: list[str]) -> int | str | None:
    """The command's exit status, whatever ended it."""
    try:
        # nothing printed can drive the terminal; what a person reads is capped per line, what
        # a script reads (--json on stdout) is whole (tool/terminal.py)
        with sanitizing(cap_stdout="--json" not in args):
            return _run(args)
    except SystemExit as done:  # argparse's --help and usage errors
        return done.code
    except BrokenPipeError:
        return EXIT_BROKEN_PIPE
    except OutputFailed as exc:  # --help, or usage, to a stdout that cannot take it
        say_quietly(f"credprovider: {exc}\n")
        drop_stdout()
        return EXIT_FAILED
    except KeyboardInterrupt:
        # Ctrl-C: one line, the shell's status for SIGINT; a program the tool ran was stopped
        # with it (runtime/child.py); install and migrate --write put back what they had done
        # (change/abort.py), and another change left half done is its journal's to finish
        say_quietly("credprovider: interrupted\n")
        return EXIT_INTERRUPTED


def _flushed(code: int | str | None) -> int | str | None:
    """``code``, once what is buffered for stdout is written; or the status of why it cannot be."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        code = EXIT_BROKEN_PIPE
    except OSError as exc:  # a full disk under `doctor --json > report.json`
        return stdout_failed("credprovider", exc)
    if code == EXIT_BROKEN_PIPE:
        # The reader went away (`credprovider validate ... | head -1`): stop quietly, as other
        # command-line tools do; what is still buffered goes nowhere instead of to a traceback.
        drop_stdout()
    return code


# 128 + SIGPIPE, what a shell reports for a program the signal ended.
EXIT_BROKEN_PIPE = 141
# 128 + SIGINT.
EXIT_INTERRUPTED = 130


def _run(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    named = (getattr(args, key, None) for key in ("command", "action"))
    prog = " ".join(["credprovider", *(str(name) for name in named if name)])
    try:
        code: int = args.handler(args)
    except CredproviderError as exc:  # each handler says its own failures; this is the backstop
        sys.stderr.write(f"{prog}: {safe_line(str(exc))}\n")
        # this user may not read what root would: no verdict, as every command says it
        code = EXIT_USAGE if isinstance(exc, UnreadableError) else EXIT_FAILED
    except Exception as exc:  # a bug: one line naming it, as a plugin says its own
        if isinstance(exc, FileNotFoundError) and cwd_gone():  # a relative path: no bug
            sys.stderr.write(f"{prog}: {CWD_GONE}\n")
            return EXIT_USAGE
        if os.environ.get(TRACEBACK_ENV) == "1":
            raise
        sys.stderr.write(
            f"{prog}: internal error: {type(exc).__name__}: {safe_line(str(exc))} (rerun "
            f"with {TRACEBACK_ENV}=1 for a traceback and report it)\n"
        )
        code = EXIT_FAILED
    return code


# Set to 1, a bug in the tool is raised with its traceback instead of said in one line (the
# tests set it: a bug must fail them, not pass as a one-line failure).
TRACEBACK_ENV = "CREDPROVIDER_TRACEBACK"

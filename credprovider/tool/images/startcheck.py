"""Does a provider's binary start the way the kubelet starts it? Proven by running it, offline.

The kubelet execs ``<bin-dir>/<name>`` with the provider's ``args``, its own environment with the
provider's ``env`` over it, and a pipe on stdin. A file can exist and be executable and still never
run: a lone copy of the bundle's launcher (no ``_internal/`` beside it), a binary for another
architecture, a script whose interpreter is missing, a link to ``/bin/true``. So each binary is run:

* under one of our plugin names, with ``--version`` appended to its args: credprovider answers with its
  version line (``<name> version X (credprovider)``) and contacts nothing; args that ask for its
  help or version themselves (which it would print on every exec, answering no request) are said
  first, read by the plugins' own parser, since the appended ``--version`` would hide them;
* anything else (a foreign plugin, or another program under our name), with its args and an empty
  request (stdin closed at once): it must execute (loader, interpreter, architecture) and must refuse
  an empty request, as any plugin that reads its request does. Whether it answers a real request
  cannot be proven offline, and the result says so.

Not on the exec path.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from credprovider.entry import START_CHECK_ENV, TOOL_NAME, UNKNOWN_PROGRAM_MARK, VERSION_FLAG
from credprovider.errors import CredproviderError
from credprovider.runtime.args import split_common_args
from credprovider.runtime.bundlecheck import INSTALL_HINT_START
from credprovider.runtime.child import run_bounded
from credprovider.runtime.excerpt import byte_size
from credprovider.runtime.nodefile import reason
from credprovider.tool.catalog import plugin_for_name
from credprovider.tool.node.trust import UntrustedProgram, check_program, safe_environment

# What our launcher says when it is not in a whole bundle (release/launcher.c, built with
# bundlecheck.install_hint's text): the file is ours, but it cannot start.
LAUNCHER_FAILURE_MARK: Final = INSTALL_HINT_START
# The end of the first line of our --version (credprovider/version.py).
VERSION_MARK: Final = " (credprovider)"
START_TIMEOUT_SECONDS: Final = 20.0
_OUTPUT_CAP: Final = 64 * 1024
_SHELL_CANNOT_EXECUTE: Final = (126, 127)


@dataclass(frozen=True)
class StartResult:
    """What running the binary proved. ``error``: it can never run (the kubelet's every exec of it
    fails); ``warning``: it ran, but not everything could be proven; ``proven``: what was shown."""

    provider: str
    path: str
    ours: bool
    proven: str = ""
    error: str | None = None
    warning: str | None = None
    version: str | None = None
    refuses_args: bool = False  # the error: our plugin ran, and refused its args or env


def kubelet_environment(
    env: Sequence[tuple[str, str]], base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The plugin's environment as the kubelet builds it: its own, with the provider's ``env`` over
    it (later entries win); never the loader's or an interpreter's variables (``node.trust``)."""
    merged = dict(os.environ if base is None else base)
    merged.update(env)
    return safe_environment(merged)


def check_start(
    provider: str,
    bin_dir: str,
    args: Sequence[str],
    env: Sequence[tuple[str, str]],
    timeout: float = START_TIMEOUT_SECONDS,
    base: Mapping[str, str] | None = None,
    executable: str | None = None,
    settings: bool = True,
) -> StartResult:
    """Run ``<bin_dir>/<provider>`` as the kubelet would (see the module doc), in ``base`` (the
    kubelet's environment; default: this process's), and say what it proved. ``executable``: the
    file that path is on the node, when the tool sees the node elsewhere (``--root``: its links
    resolved inside the root); the program still gets the node's path as its argv[0].
    ``settings``: the files its args and env name are this machine's, so that the plugin reads
    them as a pull would (not for a node seen under a root, nor for config printed for others)."""
    path = str(Path(bin_dir) / provider)
    environment = kubelet_environment(env, base)
    named_ours = plugin_for_name(provider) is not None
    try:
        check_program(executable or path)
    except UntrustedProgram as exc:
        return StartResult(provider, path, named_ours, warning=str(exc))
    stops = _answers_nothing(args) if named_ours else ""
    if stops:  # it would print that on every exec: the check's own --version would hide it
        return StartResult(provider, path, True, error=f"{path} {stops}", refuses_args=True)
    if named_ours:
        # As root, as the kubelet runs it: its settings read as a pull reads them, not only its
        # args (credprovider/entry.py). Another user may not read what root's plugin reads, and a
        # refusal it alone gets is no verdict: its check stays the args'.
        reads = settings and os.geteuid() == 0
        checking = {**environment, START_CHECK_ENV: "1"} if reads else environment
        run = _run([path, *args, VERSION_FLAG], checking, timeout, executable)
        if isinstance(run, str):
            return StartResult(provider, path, True, error=_not_started(path, run))
        code, stdout, stderr = run
        first = stdout.splitlines()[0] if stdout else ""
        if first.endswith(VERSION_MARK):
            warned = [line for line in stderr.splitlines() if line.startswith(f"{provider}: ")]
            return StartResult(
                provider,
                path,
                True,
                proven=f"it answers {first!r}",
                version=first,
                # what it says of its args and the files they name (a misspelt key), every pull
                warning=f"{path} answers {first!r}, and says {warned[0][:600]}" if warned else None,
            )
        if _ours_but_broken(stderr):
            return StartResult(
                provider, path, True, error=f"{path} exits {code} when started: {_first(stderr)}"
            )
        refused = [line for line in stderr.splitlines() if line.startswith(f"{provider}: error: ")]
        if code == 1 and refused:  # our plugin, refusing these args (or this environment)
            return StartResult(
                provider,
                path,
                True,
                error=f"{path} refuses its args: {refused[0][:600]}",
                refuses_args=True,
            )
        # Another program under our name (the upstream plugin, /bin/true): checked as foreign.
    run = _run([path, *args], environment, timeout, executable)
    if isinstance(run, str):
        return StartResult(provider, path, False, error=_not_started(path, run))
    code, stdout, stderr = run
    if _ours_but_broken(stderr):
        return StartResult(
            provider, path, True, error=f"{path} exits {code} when started: {_first(stderr)}"
        )
    return _foreign(provider, path, named_ours, code, stdout, _first(stderr))


def _answers_nothing(args: Sequence[str]) -> str:
    """Why our plugin, given ``args``, never answers a request ("": it may), read by the plugins'
    own parser (``runtime.args``): they ask for its help or its version, which it prints and
    exits 0, as the upstream plugins do; the kubelet then finds no response on stdout."""
    try:
        options, _ = split_common_args(list(args))
    except CredproviderError:  # args it refuses: running it says which
        return ""
    if options.show_help:
        asked = "its help (-h or --help)"
    elif options.show_version:
        asked = "its version (--version, or -v with no level after it)"
    else:
        return ""
    return f"is given args that ask for {asked}: it prints that and exits, answering no request"


def _not_started(path: str, why: str) -> str:
    if isinstance(why, Flood):
        return f"{path} {why}: the kubelet could never decode an answer from it"
    return f"{path} cannot be started: {why}"


def _ours_but_broken(stderr: str) -> bool:
    """Our launcher outside a whole bundle, or our executable under a name it does not know."""
    return LAUNCHER_FAILURE_MARK in stderr or UNKNOWN_PROGRAM_MARK in stderr


def _foreign(
    provider: str, path: str, named_ours: bool, code: int | None, stdout: str, said: str
) -> StartResult:
    """A binary that is not credprovider, run with an empty request: what that proved."""
    what = f"{path} is not credprovider" if named_ours else f"{path} is not a credprovider plugin"
    unproven = "whether it answers a request was not proven (try credprovider get IMAGE)"
    if code is None:
        return StartResult(
            provider,
            path,
            False,
            proven="it executes",
            warning=f"{what}: it executes, but an empty request did not end it within the "
            f"check's time (or its first {byte_size(_OUTPUT_CAP)} on stderr); {unproven}",
        )
    if code < 0:
        return StartResult(
            provider,
            path,
            False,
            error=f"{path} is killed by {_signal_name(-code)} when started: it can never answer",
        )
    if code in _SHELL_CANNOT_EXECUTE and said:
        return StartResult(provider, path, False, error=f"{path} cannot run (exit {code}): {said}")
    if code == 0 and not stdout.strip():
        return StartResult(
            provider,
            path,
            False,
            error=f"{what}: it exits 0 and prints nothing on an empty request, as /bin/true "
            "does; a plugin must refuse that, and the kubelet could never decode an answer from it"
            + (" (link the bundle's executable there)" if named_ours else ""),
        )
    shown = f": {said!r}" if said else ""
    return StartResult(
        provider,
        path,
        False,
        proven=f"it executes (exit {code} on an empty request)",
        warning=f"{what}: it executes (exit {code} on an empty request{shown}); {unproven}",
    )


def _run(
    command: list[str], env: dict[str, str], timeout: float, executable: str | None = None
) -> tuple[int | None, str, str] | str:
    """(exit status or ``None`` on time-out, stdout, stderr), or why exec failed. The request is
    empty: stdin is closed at once. It runs in ``/``, as the kubelet's plugins do (the kubelet
    sets no directory for them, and systemd starts a system service in ``/``: systemd.exec(5),
    WorkingDirectory=): a relative path in its args or env is read from there, never from where
    the operator stands."""
    try:
        run = run_bounded(
            command, env, b"", timeout, cap=_OUTPUT_CAP,
            executable=executable or os.path.abspath(command[0]), stop_at_cap=True, cwd="/",
        )  # fmt: skip
    except OSError as exc:
        return _exec_failure(command[0], exc)
    except ValueError as exc:  # a NUL in the path or an argument
        return str(exc)
    if run.stdout_cut:  # stopped there (not read to the time-out): stdout is the one answer
        return Flood(f"writes more than {byte_size(_OUTPUT_CAP)} without end when started")
    return run.code, run.stdout.decode("utf-8", "replace"), run.stderr.decode("utf-8", "replace")


class Flood(str):
    """Why a started program was stopped: it wrote past the check's cap (no answer the kubelet
    could decode comes from it)."""


def _exec_failure(path: str, exc: OSError) -> str:
    """Why execve refused the file, in words that point at the fix."""
    if exc.errno == errno.ENOEXEC:
        return (
            "exec format error: it is not a program this machine can run (another architecture, "
            "or a script without a #! line)"
        )
    if exc.errno == errno.ENOENT and os.path.lexists(path):
        what = "a dangling symlink" if not os.path.exists(path) else "its interpreter or loader"
        return f"no such file or directory ({what} is missing: {_interpreter(path)})"
    if exc.errno == errno.EACCES:
        return f"permission denied ({_why_refused(path)})"
    return reason(exc)


def _why_refused(path: str) -> str:
    """Which of execve's refusals (EACCES) it was, as far as this user can tell: the file's mount
    (noexec: its mode does not matter), its mode, or neither."""
    try:
        mode, flags = os.stat(path).st_mode, os.statvfs(path).f_flag
    except OSError:
        return "a directory on its path cannot be searched by this user, or it is not executable"
    if flags & os.ST_NOEXEC:
        return (
            "its filesystem is mounted noexec, whatever its mode: put the bundle on a mount "
            "programs may run from (docs/platforms.md), and link the plugins to it"
        )
    if not mode & 0o111:
        return "not executable: chmod +x it, or link the bundle's executable"
    return (
        "it is executable, yet refused: a security module (SELinux, AppArmor), or its owner's "
        "rights"
    )


def _interpreter(path: str) -> str:
    """The ``#!`` line or ELF loader a file asks for, as far as a short read tells."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return "unknown"
    if head.startswith(b"#!"):
        return head[2:].split(b"\n", 1)[0].strip().decode("utf-8", "replace")
    if head.startswith(b"\x7fELF"):
        start = head.find(b"/lib")
        if start >= 0:
            return head[start : head.find(b"\0", start)].decode("utf-8", "replace")
    return "unknown"


def _first(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:600] if lines else ""


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def credprovider_version(executable: str, timeout: float = START_TIMEOUT_SECONDS) -> str:
    """The version a credprovider executable answers ``credprovider --version`` with (``0.1.0``);
    raises :class:`NotCredprovider` saying what it did instead. The tool's name is passed as the
    first argument, so an executable renamed by its packager (``credprovider-0.2.0``) still answers."""
    run = _run([executable, TOOL_NAME, VERSION_FLAG], kubelet_environment(()), timeout)
    if isinstance(run, str):
        raise NotCredprovider(_not_started(executable, run))
    code, stdout, stderr = run
    first = stdout.splitlines()[0] if stdout else ""
    if first.endswith(VERSION_MARK) and " version " in first:
        return first.removesuffix(VERSION_MARK).rsplit(" version ", 1)[1]
    said = _first(stderr) or _first(stdout) or "nothing"
    raise NotCredprovider(
        f"{executable} is not a working credprovider executable: '{TOOL_NAME} {VERSION_FLAG}' gave exit {code} "
        f"and {said!r}, not credprovider's version line"
    )


class NotCredprovider(CredproviderError):
    """The file is not a credprovider executable that runs."""

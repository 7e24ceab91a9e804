"""The ``credprovider`` tool from source, many times over, at the cost of a fork rather than an
interpreter's start: for the crash-point suites, which run it a few thousand times (each kill point
a run, then a rerun and an uninstall). A run there is ~0.3 s of imports for ~0.05 s of work.

A server (this module run as ``python -m tests.forkrun``) imports the whole tool once and then,
for each run asked of it, forks a child that does what :func:`tests.helpers.run_cli`'s
``unshare --pid --fork --mount --propagation private --mount-proc`` and its ``/run`` tmpfs do: a
mount and pid namespace of its own whose first process (pid 1 there, as under ``unshare``) sets
the run's environment, argv, working directory and stdio, and calls ``credprovider.entry.main``
as ``python -m credprovider`` does. Its exit status is reported as ``subprocess`` reports one
(a signal as its negative number). The server runs nothing of the tool's itself, so each child
starts from the tool as imported, with no state of an earlier run: the kill points' counter, the
environment the runtime reads once, logging.

What it does not test, on purpose: an import that fails on a fresh interpreter. Every other test
runs the tool (or its bundle) as a process of its own.
"""

from __future__ import annotations

import ctypes
import json
import os
import pkgutil
import posix
import select
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Final

from release.bundle import REPO
from tests.helpers import _KUBELETS, RUN_TMPFS, run_cli

CLONE_NEWNS: Final = 0x00020000
CLONE_NEWPID: Final = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
PR_SET_PDEATHSIG: Final = 1


def _isolated(libc: Any) -> None:
    """This process into a mount and pid namespace of its own (its next child is pid 1 there)."""
    if libc.unshare(CLONE_NEWNS | CLONE_NEWPID) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "mount --make-rprivate /")


def _as_first_process(libc: Any) -> None:
    """pid 1 of the new namespace: its own /proc (``--mount-proc``) and /run (the node's lock)."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # unshare --kill-child
    for source, target, kind, flags, data in (
        (b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
        (RUN_TMPFS[0].encode(), b"/run", b"tmpfs", 0, RUN_TMPFS[1].encode()),
    ):
        if libc.mount(source, target, kind, flags, data) != 0:
            raise OSError(ctypes.get_errno(), f"mount {target.decode()}")


def _run_tool(request: Mapping[str, Any]) -> int:
    """The tool as ``python -m credprovider ARGV`` runs it, in this (forked) process."""
    env: dict[str, str] = request["env"]
    os.environ.clear()
    os.environ.update(env)
    posix.environ.clear()  # what the runtime reads once (runtime/_os.py), as a new process has it
    posix.environ.update({k.encode(): v.encode() for k, v in env.items()})
    os.chdir(request["cwd"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["out"], os.O_WRONLY),
                            (2, request["err"], os.O_WRONLY)):  # fmt: skip
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    if request.get("probe"):  # what the child sees of its namespaces (tests/reliability)
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        seen = {"pid": os.getpid(), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
                "run": [m.split(" - ")[1].split()[0] for m in mounts if m.split()[4] == "/run"]}  # fmt: skip
        sys.stdout.write(json.dumps(seen))
        sys.stdout.flush()
        return 0
    from credprovider.entry import TOOL_NAME, main

    sys.argv = [str(REPO / "credprovider" / "__main__.py"), *request["argv"]]
    code: int = 0
    try:
        main([TOOL_NAME, *request["argv"]])
    except SystemExit as ended:
        if ended.code is None or isinstance(ended.code, int):
            code = ended.code or 0
        else:
            sys.stderr.write(f"{ended.code}\n")
            code = 1
    except BaseException:  # what the interpreter would print and exit 1 for
        import traceback

        traceback.print_exc()
        code = 1
    import atexit

    atexit._run_exitfuncs()  # as the interpreter does at a normal exit (logging's flush, ...)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    return code


def _child(request: Mapping[str, Any]) -> None:
    """The forked child: namespaces as root (else the run as it is), the run, its status."""
    try:
        if os.geteuid() == 0:
            libc = ctypes.CDLL(None, use_errno=True)
            _isolated(libc)
            first = os.fork()
            if first == 0:
                _as_first_process(libc)
                os._exit(_run_tool(request))
            _, status = os.waitpid(first, 0)
            if os.WIFSIGNALED(status):
                os.kill(os.getpid(), os.WTERMSIG(status))
            os._exit(os.waitstatus_to_exitcode(status))
        os._exit(_run_tool(request))
    except BaseException as failed:  # never back into the server's loop
        os.write(2, f"forkrun: {failed!r}\n".encode())
        os._exit(125)


def serve() -> None:
    """Import the tool whole, then answer one JSON request per line on stdin with its status."""
    import credprovider.entry
    import credprovider.tool

    for found in pkgutil.walk_packages(credprovider.tool.__path__, "credprovider.tool."):
        __import__(found.name)
    del credprovider  # (imported for its side effect: the modules in sys.modules)
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"status": os.waitstatus_to_exitcode(status)}), flush=True)


class Server:
    """One server per test process, started at its first run."""

    process: subprocess.Popen[str] | None = None

    @classmethod
    def run(
        cls, argv: list[str], env: Mapping[str, str], timeout: float, probe: bool = False
    ) -> tuple[int, str, str]:
        """``argv`` run by a child of the server: its status, stdout and stderr."""
        if cls.process is None or cls.process.poll() is not None:
            cls.process = subprocess.Popen(
                [sys.executable, "-m", "tests.forkrun"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                cwd=REPO,
            )
            assert "ready" in json.loads(cls._line(cls.process.stdout, 120))
        process = cls.process
        assert process.stdin is not None
        with tempfile.TemporaryDirectory() as tmp:
            out, err = Path(tmp, "out"), Path(tmp, "err")
            out.touch()
            err.touch()
            request = {"argv": argv, "env": dict(env), "cwd": os.getcwd(), "probe": probe,
                       "out": str(out), "err": str(err)}  # fmt: skip
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            try:
                status = json.loads(cls._line(process.stdout, timeout))["status"]
            except subprocess.TimeoutExpired:
                process.kill()  # its children die with it (the first process's death signal)
                cls.process = None
                raise
            return int(status), out.read_text(), err.read_text()

    @staticmethod
    def _line(stream: IO[str] | None, timeout: float) -> str:
        assert stream is not None
        ready, _, _ = select.select([stream], [], [], timeout)
        if not ready:
            raise subprocess.TimeoutExpired("tests.forkrun", timeout)
        line = stream.readline()
        assert line, "the fork server ended"
        return line


def run_cli_forked(
    *args: str, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """:func:`tests.helpers.run_cli` (from source, as root in namespaces of its own), forked from
    a server that has the tool imported: the same result, a tenth of the cost."""
    if any(kubelet.process.poll() is None for kubelet in _KUBELETS):
        return run_cli(*args, env=env)  # in that kubelet's namespaces (nsenter), as run_cli does
    status, out, err = Server.run(
        list(args), {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, timeout
    )
    command = [sys.executable, "-m", "credprovider", "credprovider", *args]
    return subprocess.CompletedProcess(command, status, out, err)


if __name__ == "__main__":
    serve()

"""What the tests share: the shipped configs, the run settings (bundle required or not), the tool
run as an operator runs it, configs written for a test. Running a plugin is emulators/kubelet_exec.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

from credprovider.tool.catalog import PLUGINS
from emulators.kubelet_exec import AS_NOBODY
from release.bundle import BUNDLE_DIR, REPO

# The shipped configs: config/ (one file per cloud, usable as a kubelet config directory) and
# config/examples/ (alternatives: all clouds in one file, service-account mode).
CONFIG_DIR = REPO / "config"
CONFIG_EXAMPLES = sorted([*CONFIG_DIR.glob("*.yaml"), *(CONFIG_DIR / "examples").glob("*.yaml")])
# Set by make test (and CI): what a bare pytest run may skip, they require. The test-wide clean
# environment keeps these (tests/conftest.py), so fixtures read them as the run was started.
REQUIRE_BUNDLE_ENV = "CREDPROVIDER_REQUIRE_BUNDLE"
REQUIRE_ARCHES_ENV = "CREDPROVIDER_REQUIRE_ARCHES"  # the architectures whose artifacts must exist
RUN_SETTINGS = (REQUIRE_BUNDLE_ENV, REQUIRE_ARCHES_ENV)
API_VERSIONS = (
    "credentialprovider.kubelet.k8s.io/v1",
    "credentialprovider.kubelet.k8s.io/v1beta1",
    "credentialprovider.kubelet.k8s.io/v1alpha1",
)


def bundle_as_nobody(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The built bundle's ``credprovider ARGV`` run by an operator without root (nobody)."""
    command = [*AS_NOBODY, str(BUNDLE_DIR / "credprovider"), *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def bundle_required() -> bool:
    """Does this run require the bundle and the Go builds (make test, CI), or may it skip them?"""
    return bool(os.environ.get("CI")) or os.environ.get(REQUIRE_BUNDLE_ENV) == "1"


def unavailable(reason: str) -> NoReturn:
    """Something a test needs is not built: a failure when the run requires it, else a skip."""
    import pytest  # here: the demo and the bench import this module too

    if bundle_required():
        pytest.fail(reason)
    pytest.skip(reason)


def require_bundle() -> None:
    if not (BUNDLE_DIR / "credprovider").exists():
        unavailable(f"the bundle {BUNDLE_DIR} is not built: run make build")


# Runs a plugin in a fresh interpreter, in process (not through the bundle), and reports which
# top-level packages the run imported: how the tests check that a path stays lean.
_IMPORTS_PROBE = """
import importlib, io, json, os, sys
from credprovider.runtime import serve
from credprovider.entry import PROGRAM_MODULES
name, args, stdin = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3].encode()
environ = dict(os.environ) if sys.argv[4] == "inherit" else {}
spec = importlib.import_module(PROGRAM_MODULES[name]).SPEC
class In(io.BytesIO):
    def isatty(self): return False
out = io.BytesIO()
code = serve.run(spec, args, stdin=In(stdin), stdout=out, stderr=io.StringIO(), environ=environ)
roots = sorted({m.split(".")[0] for m in sys.modules})
print(json.dumps({"code": code, "stdout": out.getvalue().decode(), "roots": roots}))
"""


@dataclass
class ImportsRun:
    code: int
    stdout: bytes
    roots: set[str]  # top-level packages imported by the end of the run

    @property
    def response(self) -> dict[str, Any]:
        assert self.code == 0, f"plugin failed ({self.code})"
        parsed: dict[str, Any] = json.loads(self.stdout)
        return parsed


def run_listing_imports(
    name: str,
    stdin: bytes,
    args: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    plugin_sees_env: bool = True,
) -> ImportsRun:
    """Run plugin ``name`` in a fresh interpreter and list what it imported.

    ``env`` is added to the test environment; with ``plugin_sees_env`` false the plugin gets an
    empty environment (only the interpreter sees ``env``).
    """
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _IMPORTS_PROBE,
            name,
            json.dumps(args or []),
            stdin.decode(),
            "inherit" if plugin_sees_env else "empty",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    return ImportsRun(answer["code"], answer["stdout"].encode(), set(answer["roots"]))


def tool_command(use_bundle: bool = False) -> list[str]:
    """The ``credprovider`` tool's command: the bundle's (required), or from source."""
    if use_bundle:
        require_bundle()
        return [str(BUNDLE_DIR / "credprovider")]
    return [sys.executable, "-m", "credprovider", "credprovider"]


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    use_bundle: bool = False,
    cwd: Path | None = None,
    wrapper: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run the ``credprovider`` tool (from source, or the bundle's) with ``args``: as root, in a
    pid and mount namespace of its own (:func:`private`), where the only kubelet it can find is
    the one this test started (:func:`fake_kubelet`), never another run's. ``wrapper`` goes
    before the tool's command, inside those namespaces (a network namespace with its servers)."""
    command = tool_command(use_bundle)
    if cwd is not None:  # entering a mount namespace moves to its root: go there inside it
        command = ["sh", "-c", 'cd "$0" && exec "$@"', str(cwd), *command]
    command = [*wrapper, *command]
    return subprocess.run(
        private([*command, *args]),
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        check=False,
    )


# The fake kubelets this test started (each the first process of its own pid and mount namespace).
_KUBELETS: list[FakeKubelet] = []
# ... with a /run of its own (where the node's lock is, change/lock.py): a run never takes the
# host's, nor another test's.
# (tests/forkrun.py makes the same /run with mount(2): one name and options for both)
RUN_TMPFS: Final = ("credprovider-run", "mode=0755")
_ISOLATE = ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--propagation", "private",
            "--mount-proc", "sh", "-c",
            f'mount -t tmpfs -o {RUN_TMPFS[1]} {RUN_TMPFS[0]} /run && exec "$@"', "sh"]  # fmt: skip


def private(command: list[str]) -> list[str]:
    """``command`` as root runs it in the namespaces of the newest live fake kubelet, or in fresh
    ones: its ``/proc`` shows only its own namespace's processes. Unprivileged: as it is."""
    if os.geteuid() != 0:
        return command
    live = [k for k in _KUBELETS if k.process.poll() is None]
    if live:
        return ["nsenter", "-t", str(live[-1].host_pid), "--pid", "--mount", "--", *command]
    return [*_ISOLATE, *command]


def node_script(script: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``script`` run by sh as root in a mount and pid namespace of its own (:func:`private`): a
    node of the test's, whose mounts go with it, the tool from source (``PYTHONPATH``)."""
    return subprocess.run(
        private(["sh", "-c", script]),
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class FakeKubelet:
    """A process doctor takes for a kubelet, alone in a pid and mount namespace of its own
    (its pid there: 1). ``kill`` ends it and its namespace."""

    process: subprocess.Popen[bytes]
    host_pid: int
    pid: int = 1

    def kill(self) -> None:
        self.process.kill()
        if self in _KUBELETS:
            _KUBELETS.remove(self)

    def wait(self) -> int:
        return self.process.wait()


# A CredentialProviderConfig for the tool's tests: provider entries over our ECR plugin's defaults.
def provider_entry(**fields: Any) -> dict[str, Any]:
    entry = {
        "name": "ecr-credential-provider",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        "defaultCacheDuration": "12h",
        "matchImages": list(PLUGINS["aws"].match_images),
    }
    entry.update(fields)
    return entry


def config_file(tmp_path: Path, *providers: dict[str, Any]) -> Path:
    path = tmp_path / "c.json"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "kubelet.config.k8s.io/v1",
                "kind": "CredentialProviderConfig",
                "providers": list(providers),
            }
        ),
    )
    return path


def fake_kubelet(
    flags: list[str], env: Mapping[str, str], stderr: Path | int | None = None
) -> FakeKubelet:
    """A process doctor takes for a kubelet (argv[0] ``kubelet``: a wrapper's exec does the same)
    with ``flags`` on its command line, ``env`` as its environment and its stderr in ``stderr``
    (a file appended to, or a descriptor); it only sleeps. As root it runs alone in a pid and
    mount namespace of its own, which :func:`run_cli` enters: no other run's discovery can take
    it for its node's kubelet. The caller kills it."""
    import time

    if os.geteuid() != 0:
        raise RuntimeError("a fake kubelet needs root (a pid namespace of its own)")
    process = subprocess.Popen(
        [
            *_ISOLATE, "bash", "-c", 'exec -a kubelet "$0" -c "import time; time.sleep(120)" "$@"',
            sys.executable, *flags,
        ],
        env=dict(env),
        stderr=stderr.open("ab") if isinstance(stderr, Path) else stderr,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    child = 0
    while time.monotonic() < deadline:  # until unshare's child has exec'd it as "kubelet"
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
        found = children.read_text().split() if children.exists() else []
        if found:
            child = int(found[0])
            cmdline = Path(f"/proc/{child}/cmdline")
            if cmdline.exists() and cmdline.read_bytes().startswith(b"kubelet\0"):
                break
        time.sleep(0.05)
    kubelet = FakeKubelet(process, child)
    _KUBELETS.append(kubelet)
    return kubelet


def stop_what_is_left(pid_file: Path) -> tuple[list[int], list[int]]:
    """The processes a test's helper listed in ``pid_file`` (one id a line) and those of them
    still running, which are killed: a test leaves no process behind, whatever the code did.
    A zombie (killed, not yet reaped by whoever inherited it) is not running."""
    import signal

    def running(pid: int) -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        return state != "Z"

    listed = [int(pid) for pid in pid_file.read_text().split()] if pid_file.exists() else []
    still = [pid for pid in listed if running(pid)]
    for pid in still:
        os.kill(pid, signal.SIGKILL)
    return listed, still


# What a node file's reader must refuse at once (runtime/nodefile.py), and the reason it gives: a
# FIFO would hold it until a deadline, /dev/zero and a huge file would be read into memory.
SPECIAL_FILES: Final = {
    "a FIFO": "is a FIFO, not a regular file",
    "/dev/zero": "is a character device, not a regular file",
    "a directory": "is a directory, not a regular file",
    "2 GiB": "is larger than 1 MiB",
}


def make_special(path: Path, kind: str) -> None:
    """``path`` (not there yet) made into ``kind`` of :data:`SPECIAL_FILES`: a link to /dev/zero
    for that one, a sparse file for 2 GiB."""
    if kind == "a FIFO":
        os.mkfifo(path)
    elif kind == "/dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "a directory":
        path.mkdir()
    else:
        with path.open("wb") as file:
            file.truncate(2 << 30)

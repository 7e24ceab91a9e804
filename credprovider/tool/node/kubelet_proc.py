"""Running kubelets, read from ``/proc``: command line, environment (the plugins inherit it),
working directory (relative flag paths start there), binary and start time.

Every read is bounded and none can hang (``nodefiles``); what this user may not read (another
user's environment, when not root) is ``None`` with the reason in ``unreadable``, never an error.
k3s and RKE2 run the kubelet inside their own process: their flags are not on any command line, and
the layout table (``layouts``) finds their files instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from credprovider.tool.nodefiles import FileProblem, UnreadableError, read_bytes

KUBELET_NAME = "kubelet"
_CMDLINE_LIMIT = 1024 * 1024


@dataclass(frozen=True)
class KubeletProcess:
    pid: int
    argv: tuple[str, ...]
    environ: dict[str, str] | None  # None: not readable as this user
    cwd: str | None
    exe: str | None  # the binary's path (" (deleted)" when replaced since it started)
    started_at: float | None  # seconds since the epoch
    unreadable: list[str] = field(default_factory=list)


def is_kubelet(comm: str, argv: tuple[str, ...]) -> bool:
    """A kubelet by its command name or its argv[0] (a wrapper may exec it under another name)."""
    first = os.path.basename(argv[0]) if argv else ""
    return comm == KUBELET_NAME or first == KUBELET_NAME


def split_nul(data: bytes) -> list[str]:
    """``/proc/PID/cmdline`` or ``environ``: NUL-separated, decoded without failing."""
    return [item.decode("utf-8", "replace") for item in data.split(b"\0") if item]


def parse_environ(data: bytes) -> dict[str, str]:
    pairs = (item.partition("=") for item in split_nul(data))
    return {name: value for name, sep, value in pairs if sep and name}


def started_at(stat_text: str, boot_time: float, ticks_per_second: int) -> float | None:
    """The start time in ``/proc/PID/stat`` (field 22, clock ticks after boot), in epoch seconds.
    The command name (field 2) may hold spaces and parentheses: fields are counted after its last
    ``)``."""
    _, sep, rest = stat_text.rpartition(")")
    fields = rest.split()
    if not sep or len(fields) < 20 or not fields[19].isdigit():
        return None
    return boot_time + int(fields[19]) / ticks_per_second


def boot_time(proc: str) -> float | None:
    try:
        for line in read_bytes(f"{proc}/stat").decode("ascii", "replace").splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (FileProblem, UnreadableError, ValueError, IndexError):
        return None
    return None


def _read(path: str, limit: int = _CMDLINE_LIMIT) -> bytes | None:
    try:
        return read_bytes(path, limit)
    except (FileProblem, UnreadableError):
        return None


def _link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def find_kubelets(proc: str = "/proc") -> list[KubeletProcess]:
    """Every running kubelet this user can see, oldest first."""
    try:
        pids = sorted(int(name) for name in os.listdir(proc) if name.isdigit())
    except OSError:
        return []
    boot = boot_time(proc)
    ticks = os.sysconf("SC_CLK_TCK")
    found = []
    for pid in pids:
        base = f"{proc}/{pid}"
        comm = (_read(f"{base}/comm") or b"").decode("utf-8", "replace").strip()
        cmdline = _read(f"{base}/cmdline")
        argv = tuple(split_nul(cmdline or b""))
        if not is_kubelet(comm, argv):
            continue
        unreadable = []
        environ_bytes = _read(f"{base}/environ")
        if environ_bytes is None:
            unreadable.append(
                f"cannot read {base}/environ (the environment the plugins inherit) as uid "
                f"{os.geteuid()}: the kubelet's environment is not checked"
            )
        cwd = _link(f"{base}/cwd")
        exe = _link(f"{base}/exe")
        if exe is None:
            unreadable.append(
                f"cannot read {base}/exe (the kubelet's binary) as uid {os.geteuid()}"
            )
        stat = _read(f"{base}/stat")
        start = (
            started_at(stat.decode("utf-8", "replace"), boot, ticks)
            if stat is not None and boot is not None
            else None
        )
        found.append(
            KubeletProcess(
                pid,
                argv,
                parse_environ(environ_bytes) if environ_bytes is not None else None,
                cwd,
                exe,
                start,
                unreadable,
            )
        )
    return found

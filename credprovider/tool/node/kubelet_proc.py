"""Running kubelets, read from ``/proc``: command line, environment (the plugins inherit it),
working directory (relative flag paths start there), binary, start time, and whether the process
can be trusted to be this node's kubelet at all.

A process is only a *candidate* by its name: anyone can ``exec -a kubelet``. It is **trusted**
(:attr:`KubeletProcess.distrust` empty) only when nobody but root could have made it what it is:

* it runs as root (real, effective and saved user id 0): no other user can start such a process;
* in this tool's mount namespace: its flag paths then name the files this tool reads (a kind or
  minikube node's kubelet, or a test's sandboxed one, names files of another filesystem view);
* from a binary owned by root and writable by nobody else.

What fails any of these is never acted on: its flags, files and environment are not read, and
discovery reports it in one line (``docs/security.md``). A kubelet that systemd (or k3s, RKE2,
k0s) runs as the node's service (:attr:`KubeletProcess.service`) is preferred over other trusted
ones. Every read is bounded and none can hang (``node/access``); command lines are read whole (the
kernel caps them) and their bytes kept (``os.fsdecode``: a path with a byte that is not UTF-8 still
names the same file). What this user may not read (another user's environment, when not root) is
``None`` with the reason in ``unreadable``, never an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Final

from credprovider.tool.node.access import FileProblem, UnreadableError, read_bytes
from credprovider.tool.node.trust import owner_problem

KUBELET_NAME: Final = "kubelet"
# The kernel keeps a command line (or environment) within a quarter of the stack limit and never
# above 6 MiB (fs/exec.c): a larger read limit reads any of them whole.
_CMDLINE_LIMIT: Final = 8 * 1024 * 1024
# The systemd units that run a kubelet (or the k3s, RKE2, k0s, MicroK8s process embedding one).
KUBELET_SERVICES: Final = frozenset(
    {
        "kubelet.service",
        "k3s.service",
        "k3s-agent.service",
        "rke2-server.service",
        "rke2-agent.service",
        "k0sworker.service",
        "k0scontroller.service",
        "snap.microk8s.daemon-kubelite.service",
    }
)


@dataclass(frozen=True)
class KubeletProcess:
    pid: int
    argv: tuple[str, ...]
    environ: dict[str, str] | None  # None: not readable as this user
    cwd: str | None
    exe: str | None  # the binary's path (" (deleted)" when replaced since it started)
    started_at: float | None  # seconds since the epoch
    unreadable: list[str] = field(default_factory=list)
    distrust: str = ""  # why this is not taken for the node's kubelet ("": trusted)
    service: str = ""  # the systemd unit it runs in, when it is a kubelet service


def is_kubelet(comm: str, argv: tuple[str, ...]) -> bool:
    """A kubelet by its command name or its argv[0] (a wrapper may exec it under another name)."""
    first = os.path.basename(argv[0]) if argv else ""
    return comm == KUBELET_NAME or first == KUBELET_NAME


def split_nul(data: bytes) -> list[str]:
    """``/proc/PID/cmdline`` or ``environ``: NUL-separated, each byte kept (``os.fsdecode``)."""
    return [os.fsdecode(item) for item in data.split(b"\0") if item]


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


def user_ids(status_text: str) -> tuple[int, ...] | None:
    """The real, effective, saved and filesystem user ids in ``/proc/PID/status``."""
    for line in status_text.splitlines():
        if line.startswith("Uid:"):
            fields = line.split()[1:]
            return tuple(int(f) for f in fields) if all(f.isdigit() for f in fields) else None
    return None


def service_unit(cgroup_text: str) -> str:
    """The kubelet service a process runs in, from ``/proc/PID/cgroup`` (cgroup v2's ``0::`` line,
    or v1's ``name=systemd`` one): its last path component when that is a kubelet unit and no part
    of the path is a user's own (``user.slice``, ``user@UID.service``: units a user may start)."""
    for line in cgroup_text.splitlines():
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if controllers not in ("", "name=systemd"):
            continue
        parts = [part for part in path.split("/") if part]
        if (
            parts
            and parts[-1] in KUBELET_SERVICES
            and not any(part == "user.slice" or part.startswith("user@") for part in parts)
        ):
            return parts[-1]
    return ""


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


def _distrust(proc: str, pid: int) -> str:
    """Why process ``pid`` is not the node's kubelet ('' when it may be: see the module)."""
    base = f"{proc}/{pid}"
    status = _read(f"{base}/status")
    uids = user_ids(status.decode("ascii", "replace")) if status is not None else None
    if not uids or any(uids):
        return f"it runs as uid {uids[0] if uids else 'unknown'}, not root"
    mine, theirs = _link(f"{proc}/self/ns/mnt"), _link(f"{base}/ns/mnt")
    if mine is None or theirs is None:
        if os.geteuid() == 0:
            return "its mount namespace cannot be read"
    elif mine != theirs:
        return (
            "it runs in another mount namespace (a container's or a sandbox's): the paths it "
            "names are not this filesystem's"
        )
    try:
        found = os.stat(f"{base}/exe")
    except OSError as exc:
        if os.geteuid() == 0:
            return f"its binary cannot be checked ({(exc.strerror or str(exc)).lower()})"
        return ""
    return owner_problem("its binary", found, 0)


def find_kubelets(proc: str = "/proc") -> list[KubeletProcess]:
    """Every process this user can see that is named kubelet: trusted ones first (services
    before others), each group oldest first; untrusted ones say why in ``distrust``."""
    try:
        pids = sorted(int(name) for name in os.listdir(proc) if name.isdigit())
    except OSError:
        return []
    boot = boot_time(proc)
    ticks = os.sysconf("SC_CLK_TCK")
    found = []
    for pid in pids:
        base = f"{proc}/{pid}"
        comm = os.fsdecode(_read(f"{base}/comm") or b"").strip()
        argv = tuple(split_nul(_read(f"{base}/cmdline") or b""))
        if not is_kubelet(comm, argv):
            continue
        distrust = _distrust(proc, pid)
        if distrust:  # nothing more of it is read: not its environment, not its files
            found.append(KubeletProcess(pid, argv, None, None, None, None, distrust=distrust))
            continue
        unreadable = []
        environ_bytes = _read(f"{base}/environ")
        if environ_bytes is None:
            unreadable.append(
                f"cannot read {base}/environ (the environment the plugins inherit) as uid "
                f"{os.geteuid()}: the kubelet's environment is not checked"
            )
        exe = _link(f"{base}/exe")
        if exe is None:
            unreadable.append(
                f"cannot read {base}/exe (the kubelet's binary) as uid {os.geteuid()}"
            )
        stat_bytes = _read(f"{base}/stat")
        start = (
            started_at(stat_bytes.decode("utf-8", "replace"), boot, ticks)
            if stat_bytes is not None and boot is not None
            else None
        )
        found.append(
            KubeletProcess(
                pid,
                argv,
                parse_environ(environ_bytes) if environ_bytes is not None else None,
                _link(f"{base}/cwd"),
                exe,
                start,
                unreadable,
                service=service_unit(os.fsdecode(_read(f"{base}/cgroup") or b"")),
            )
        )
    return sorted(found, key=lambda k: (bool(k.distrust), not k.service, k.pid))

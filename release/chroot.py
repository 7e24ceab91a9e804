"""Run a command chrooted into a root filesystem, inside namespaces that leave the host unchanged.

The command runs as root in a new user and mount namespace:

- every uid and gid maps to itself (the caller is real root), so dpkg can chown to system users;
- every mount (an overlay over the root filesystem, bind mounts, /proc, /dev) is private to the
  namespace and vanishes with it;
- a foreign-architecture root filesystem gets qemu-user through a *private* binfmt_misc instance
  (one per user namespace, Linux >= 6.7): the host's binfmt_misc is never mounted or changed.

util-linux ``unshare`` creates the namespaces; its ``--map-users`` needs newuidmap and an
``/etc/subuid`` entry, so this module writes the identity map itself, as the parent of the
namespace, before letting the inner half (``python -m release.chroot``) go on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from release.targets import Target

FULL_RANGE = "0 0 4294967295\n"
NAMESPACE_WAIT_SECONDS = 10.0


class SandboxError(RuntimeError):
    """The namespace or the chroot could not be set up."""


@dataclass(frozen=True)
class Bind:
    source: str  # a path on the host
    target: str  # where it appears inside the root filesystem
    read_only: bool = False


@dataclass(frozen=True)
class Spec:
    root: str  # the root filesystem to chroot into ("/" with overlay=False: none, only the binds)
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = "/"
    binds: list[Bind] = field(default_factory=list)
    overlay: bool = True  # writes go to an upper layer; root stays as it was
    upper: str = (
        ""  # a host directory that keeps the upper layer across runs (default: thrown away)
    )
    qemu: str = ""  # qemu-user binary for a foreign-architecture root filesystem
    elf_magic: str = ""  # binfmt_misc magic:mask of that architecture's ELF files


def supported() -> str:
    """Empty when this machine can run sandboxes, else why not."""
    if os.geteuid() != 0:
        return "needs root (user namespaces with an identity uid map, chroot)"
    if shutil.which("unshare") is None:
        return "needs util-linux unshare"
    return ""


def spec_for(target: Target, root: Path, argv: Sequence[str], **kwargs: object) -> Spec:
    """A Spec for ``target``'s root filesystem, with qemu-user when ``target`` is foreign."""
    qemu = ""
    if not target.is_native():
        qemu = shutil.which(target.qemu) or ""
        if not qemu:
            raise SandboxError(
                f"{target.qemu} not found: install Debian's qemu-user-static to run {target.arch}"
            )
    return Spec(str(root), list(argv), qemu=qemu, elf_magic=target.binfmt_magic, **kwargs)  # type: ignore[arg-type]


def run(
    spec: Spec,
    *,
    timeout: float | None = None,
    stdin: bytes | None = None,
    capture: bool = True,
    stdout: int | None = None,
    stderr: int | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``spec`` and wait for it; returns its exit status and (with ``capture``) its output."""
    _check_runnable(spec)
    ready_read, ready_write = os.pipe()
    argv = [
        "unshare",
        "--user",
        "--mount",
        "--propagation",
        "private",
        "--",
        sys.executable,
        "-m",
        "release.chroot",
        str(ready_read),
        json.dumps(asdict(spec)),
    ]
    repo = str(Path(__file__).resolve().parent.parent)
    env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "PYTHONPATH": repo}
    out = subprocess.PIPE if capture else stdout
    err = subprocess.PIPE if capture else stderr
    proc = subprocess.Popen(
        argv,
        pass_fds=(ready_read,),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=out,
        stderr=err,
        env=env,
    )
    os.close(ready_read)
    try:
        _map_identity(proc.pid)
        os.write(ready_write, b"1")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        os.close(ready_write)
    try:
        output, errors = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, output or b"", errors or b"")


def _check_runnable(spec: Spec) -> None:
    why = supported()
    if why:
        where = "a private mount namespace" if spec.root == "/" else spec.root
        raise SandboxError(f"cannot run {spec.argv[0]} in {where}: {why}")
    hidden = [spec.root, *(b.source for b in spec.binds)]
    if spec.root == "/":
        # No chroot: the program and its directory are the host's, less what the tmpfs on /mnt hides.
        hidden += [spec.argv[0], spec.cwd]
    if any(
        Path(path).is_relative_to("/mnt") or Path(path).resolve().is_relative_to("/mnt")
        for path in hidden
    ):
        raise SandboxError("the sandbox mounts its scratch space on /mnt: use paths outside it")
    if spec.root == "/" and (
        spec.overlay or not all(Path(b.target).is_relative_to("/mnt") for b in spec.binds)
    ):
        # Without a chroot, only the namespace's own tmpfs on /mnt may take new mount points.
        raise SandboxError("a sandbox without a chroot binds only under /mnt, with no overlay")


def _map_identity(pid: int) -> None:
    """Wait until ``pid`` is in its own user namespace, then map every uid and gid to itself."""
    own = os.readlink("/proc/self/ns/user")
    deadline = time.monotonic() + NAMESPACE_WAIT_SECONDS
    while True:
        try:
            if os.readlink(f"/proc/{pid}/ns/user") != own:
                break
        except FileNotFoundError as exc:
            raise SandboxError("unshare exited before creating its namespaces") from exc
        if time.monotonic() > deadline:
            raise SandboxError("unshare did not create a user namespace")
        time.sleep(0.001)
    Path(f"/proc/{pid}/uid_map").write_text(FULL_RANGE)
    Path(f"/proc/{pid}/gid_map").write_text(FULL_RANGE)


# ---- the inner half: runs inside the namespaces, before the chroot --------------------------------


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def _register_qemu(qemu: str, elf_magic: str) -> None:
    binfmt = "/proc/sys/fs/binfmt_misc"
    _mount("-t", "binfmt_misc", "binfmt_misc", binfmt)
    magic, mask = elf_magic.split(":")
    # F: open the interpreter now, so it works inside the chroot, where its path does not exist.
    # P: keep argv[0] as the caller gave it, as a real arm64 kernel does (the plugin is chosen by
    # the name it was run as; without P, qemu would see the resolved file name).
    Path(binfmt, "register").write_text(f":credprovider-qemu:M::{magic}:{mask}:{qemu}:FP")


def _prepare_root(spec: Spec, scratch: Path) -> Path:
    root = Path(spec.root)
    if spec.overlay:
        layers = Path(spec.upper) if spec.upper else scratch
        merged, upper, work = scratch / "root", layers / "upper", layers / "work"
        for directory in (merged, upper, work):
            directory.mkdir(exist_ok=True)
        _mount(
            "-t",
            "overlay",
            "overlay",
            "-o",
            f"lowerdir={root},upperdir={upper},workdir={work},userxattr",
            str(merged),
        )
        root = merged
    for name in ("proc", "dev") if root != Path("/") else ():
        (root / name).mkdir(exist_ok=True)
        _mount("--rbind", f"/{name}", str(root / name))
    for bind in spec.binds:
        inside = root / bind.target.lstrip("/")
        if Path(bind.source).is_dir():
            inside.mkdir(parents=True, exist_ok=True)
        else:
            inside.parent.mkdir(parents=True, exist_ok=True)
            inside.touch(exist_ok=True)
        _mount("--bind", bind.source, str(inside))
        if bind.read_only:
            _mount("-o", "remount,bind,ro", str(inside))
    return root


def _wait_for_map(ready_fd: int, spec_json: str) -> None:
    """Wait for the identity map, then exec again: capabilities come with an exec as mapped root."""
    if os.read(ready_fd, 1) != b"1":
        raise SandboxError("the parent did not map the user namespace")
    os.close(ready_fd)
    os.execv(sys.executable, [sys.executable, "-m", "release.chroot", "mapped", spec_json])


def _inner(spec: Spec) -> None:
    if spec.qemu:
        _register_qemu(spec.qemu, spec.elf_magic)
    # The scratch directory lives in this namespace's own tmpfs, so nothing is left behind.
    _mount("-t", "tmpfs", "-o", "mode=0700", "sandbox", "/mnt")
    scratch = Path(tempfile.mkdtemp(dir="/mnt"))
    root = _prepare_root(spec, scratch)
    os.chroot(root)
    os.chdir(spec.cwd)
    os.execve(spec.argv[0], spec.argv, spec.env)


def _spec_from_json(text: str) -> Spec:
    raw = json.loads(text)
    raw["binds"] = [Bind(**bind) for bind in raw["binds"]]
    return Spec(**raw)


def main(argv: Sequence[str]) -> int:
    stage, spec_json = argv[0], argv[1]
    try:
        if stage == "mapped":
            _inner(_spec_from_json(spec_json))
        else:
            _wait_for_map(int(stage), spec_json)
    except (OSError, subprocess.CalledProcessError, SandboxError) as exc:
        sys.stderr.write(f"sandbox: {exc}\n")
        return 125
    return 0  # not reached: both stages exec


def env_with_path(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment for a command inside a Debian root filesystem."""
    base = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
    }
    return {**base, **(extra or {})}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

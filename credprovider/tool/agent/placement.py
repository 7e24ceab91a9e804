"""Where the node agent may place what the kubelet will run and read, by the node's mounts
(checked before any change begins, so that none stops part way): a writable mount
(:func:`not_writable`), one the kubelet may execute from (:func:`not_executable`: COS mounts
/var noexec) and one that outlives a reboot as long as the kubelet's own files do
(:func:`not_lasting`). Each answers with the one line that refuses the change, or "".
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from typing import Final

from credprovider.tool.node.root import NodeRoot


def not_writable(root: NodeRoot, paths: list[str]) -> str:
    """Why one of the node ``paths`` cannot be written here ("": none is on a read-only
    filesystem): its directory, or the nearest one that exists, is on a read-only mount, or not
    mounted at all in the chart's pod (whose root is read-only): a place its ``flags.platform``
    does not mount writable. Checked before a change begins, so that none stops part way (a
    user's permissions are the change's own errors)."""
    for path in paths:
        place, flags = root.mount_of(posixpath.dirname(path.rstrip("/")) or "/")
        if flags & os.ST_RDONLY:
            return (
                f"cannot write {path}: {place} is read-only here (in the chart's pod: not "
                "mounted writable for its flags.platform)"
            )
    return ""


def not_executable(root: NodeRoot, place: str) -> str:
    """Why the kubelet could not execute what the agent places at ``place`` ("": it could): the
    mount it lands on is ``noexec`` (COS mounts /var and /home so, and remounts only
    /home/kubernetes/bin exec: paths.AGENT_EXEC_HOME; a plugin linked from the bin dir into a
    noexec mount fails with EACCES at every pull)."""
    existing, flags = root.mount_of(place)
    if flags & os.ST_NOEXEC:
        return (
            f"cannot place the plugins in {place}: {existing} is on a noexec mount, so the kubelet "
            "could not run them; mount it exec (on COS, kube-node-installation.service remounts "
            "/home/kubernetes/bin so at every boot, and flags.platform=gke places them there), "
            "or install them on an exec mount with credprovider install --copy --bin-dir DIR"
        )
    return ""


def not_lasting(root: NodeRoot, place: str, kept: list[str]) -> str:
    """Why what the agent places at ``place`` would not outlive a reboot while what the kubelet
    reads at its start (``kept``: the bin dir, the config, the flags file) would ("": it would,
    or they go together, as on a node booted from RAM that provisioning lays out anew): the
    mount it lands on is a tmpfs. The links in the kubelet's bin dir would then name files gone
    at the next boot, and a kubelet whose config names a provider without its binary does not
    start."""
    table = mount_table()

    def kind_of(path: str) -> tuple[str, str]:
        existing, _ = root.mount_of(path)
        return existing, filesystem_type(root.host(existing, follow=False), table)

    existing, kind = kind_of(place)
    if kind not in VOLATILE:
        return ""
    lasting = [path for path in kept if kind_of(path)[1] not in VOLATILE]
    if not lasting:
        return ""
    return (
        f"cannot place the plugins in {place}: {existing} is on a {kind}, lost at the next boot, "
        f"while {lasting[0]} lasts, and the kubelet would not start with links to plugins gone; "
        "place them on the node's disk (the chart mounts the agent's home from the host's "
        "/var/lib/credprovider)"
    )


# Filesystems whose files do not outlive a reboot.
VOLATILE: Final = frozenset({"tmpfs", "ramfs"})


def mount_table() -> list[tuple[str, str]]:
    """This process's mounts as (mount point, filesystem type), in mount order ([] when the
    table cannot be read)."""
    try:
        # the kernel's bytes as a path is decoded (the operator's locale may be no UTF-8 one)
        table = os.fsdecode(Path("/proc/self/mountinfo").read_bytes())
    except OSError:
        return []
    found = []
    for line in table.splitlines():
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest:
            continue
        point = parts[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        found.append((point, rest.split()[0]))
    return found


def filesystem_type(path: Path, table: list[tuple[str, str]]) -> str:
    """The type of the filesystem mounted where ``path`` is, by ``table`` (the mount point that
    holds it, the longest, the last mounted of equals); "" when none does."""
    target = os.path.realpath(path)
    best, kind = "", ""
    for point, found in table:
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, found
    return kind

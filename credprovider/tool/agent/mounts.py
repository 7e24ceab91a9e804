"""What of the host the fleet chart mounts for the agent in mode ``flags``, per platform: the
chart's ``flags.platform`` values, each naming the platform row the agent follows (``--platform``)
and the host paths it needs, each read-write only where the agent writes. One definition: the
chart reads it from ``charts/credprovider/platforms.yaml``, which ``release/chartplatforms.py``
writes from :func:`chart_table` (a test holds them together). Pure data.

Why each is mounted:

* the directory holding the agent's home (state, bundles, the plugin links where the platform
  fixes no bin dir), which is made and removed whole by a rename in it;
* the directory of the config and of the bin dir the platform uses, where the agent writes them
  (a file is replaced by a rename beside it, so its directory is mounted, never the file alone);
* the file holding the kubelet's flags where the agent sets them (kubeadm's env file, k0s's unit):
  its directory, for the same reason;
* read-only: the systemd unit directories (which of the platform's services the node runs), the
  files the agent only reads (kubeadm's own flags file) and those the platform's shipped config
  names for its plugin (AKS' ``azure.json``, read by the dry run).

``auto`` keeps the wide mounts (``/etc`` and ``/var/lib`` read-write) of an agent that finds the
layout itself.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from typing import Final

from credprovider.paths import AGENT_CONFIG, AGENT_HOME_PARENT
from credprovider.tool.agent.platforms import ENV_FILE, K0S_UNIT, PLATFORMS, UNIT_DIRS, Platform
from credprovider.tool.node.layouts import KUBEADM_FLAGS_ENV

AUTO: Final = "auto"
AKS_CLOUD_CONFIG: Final = "/etc/kubernetes/azure.json"  # AKS' shipped acr plugin args name it
K0S_UNIT_DIR: Final = "/etc/systemd/system"  # k0s install writes its units there


@dataclass(frozen=True)
class HostMount:
    path: str
    writable: bool
    why: str
    file: bool = False  # one file, read-only (its directory holds more than the agent may see)
    create: bool = False  # made if missing: a directory only the agent uses


@dataclass(frozen=True)
class Choice:
    """One value of the chart's ``flags.platform``."""

    value: str
    platform: Platform | None  # None: auto (the agent recognizes the node)
    mounts: tuple[HostMount, ...]
    note: str = ""


def _platform(name: str) -> Platform:
    return next(platform for platform in PLATFORMS if platform.name == name)


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


# Of systemd's unit load path (:data:`UNIT_DIRS`), the directories every systemd host has: not
# /run's (transient units) nor /usr/local's (only where something installs units there).
_UNITS_ON_EVERY_HOST: Final = tuple(
    d for d in UNIT_DIRS if d not in ("/run/systemd/system", "/usr/local/lib/systemd/system")
)


def unit_mounts() -> tuple[str, ...]:
    """Directories every systemd host has that hold its units: /etc/systemd/system, and the
    parents of the others (a host whose /usr is not merged may lack /usr/lib/systemd/system,
    and a missing path would keep the pod from starting)."""
    return tuple(
        directory if directory.startswith("/etc/") else posixpath.dirname(directory)
        for directory in _UNITS_ON_EVERY_HOST
    )


def mounts_for(platform: Platform, reads: tuple[str, ...] = ()) -> tuple[HostMount, ...]:
    """The host paths the agent needs to follow ``platform``'s row (``reads``: more files it only
    reads), each directory once, nested ones folded into the one holding them. k3s and RKE2 get
    no unit directory: systemd names their units over its socket, and k3s' install script keeps
    the node's join token (K3S_TOKEN) in /etc/systemd/system/k3s*.service.env."""
    wanted: list[HostMount] = [
        # the directory above the agent's home: the home is made whole beside its place and
        # renamed in, and removed the same way
        HostMount(AGENT_HOME_PARENT, True, "the agent's home", create=True),
        HostMount(
            posixpath.dirname(platform.config),
            True,
            "the credential provider config",
            create=not platform.managed,
        ),
        HostMount(platform.bin_dir, True, "the plugins' bin dir", create=not platform.managed),
    ]
    if platform.flags == ENV_FILE:
        wanted += [
            HostMount(posixpath.dirname(path), True, f"the kubelet's flags, in {path}")
            for path in platform.flag_files
        ]
        wanted.append(HostMount(KUBEADM_FLAGS_ENV, False, "kubeadm's own flags (read)", file=True))
    if platform.flags == K0S_UNIT:
        wanted.append(HostMount(K0S_UNIT_DIR, True, "the kubelet's flags, in k0s' unit"))
    wanted += [
        HostMount(directory, False, "the kubelet's unit, as systemd starts it")
        for directory in (() if platform.rancher else unit_mounts())
    ]
    wanted += [HostMount(path, False, "read by the dry run", file=True) for path in reads]
    kept: list[HostMount] = []
    for mount in wanted:
        holder = next(
            (
                other
                for other in wanted
                if other is not mount
                and not other.file
                and _under(mount.path, other.path)
                and (other.writable or not mount.writable)
                and (other.path != mount.path or wanted.index(other) < wanted.index(mount))
            ),
            None,
        )
        if holder is None:
            kept.append(mount)
    return tuple(kept)


def _choice(
    value: str,
    platform: Platform,
    reads: tuple[str, ...] = (),
    note: str = "",
) -> Choice:
    return Choice(value, platform, mounts_for(platform, reads), note)


_KUBEADM = _platform("kubeadm")
_RANCHER_UNITS: Final = (
    "no unit directory: systemd names the service to restart, and the units' environment files "
    "hold k3s' join token"
)
# kubeadm and k0s take the flags from the agent: the config then goes in the agent's own
# directory, never in /etc/kubernetes (a control plane's keys)
CHOICES: Final[tuple[Choice, ...]] = (
    _choice(
        "kubeadm",
        replace(_KUBEADM, config=AGENT_CONFIG, flag_files=("/etc/default/kubelet",)),
        note="Debian, Ubuntu: the flags in /etc/default/kubelet",
    ),
    _choice(
        "kubeadm-rpm",
        replace(_KUBEADM, config=AGENT_CONFIG, flag_files=("/etc/sysconfig/kubelet",)),
        note="RHEL, Rocky, Amazon Linux 2, Fedora: the flags in /etc/sysconfig/kubelet",
    ),
    _choice("k3s", _platform("k3s"), note=_RANCHER_UNITS),
    _choice("rke2", _platform("RKE2"), note=_RANCHER_UNITS),
    _choice(
        "k0s",
        replace(_platform("k0s"), config=AGENT_CONFIG),
        note="its unit directory /etc/systemd/system is writable: k0s keeps the kubelet's "
        "flags in its unit",
    ),
    _choice("eks", _platform("EKS AL2023 (nodeadm)")),
    _choice(
        "aks",
        _platform("AKS"),
        reads=(AKS_CLOUD_CONFIG,),
        note="its config is directly in /var/lib/kubelet, so that directory is writable",
    ),
    _choice("gke", _platform("GKE (COS)")),
)
AUTO_CHOICE: Final = Choice(
    AUTO,
    None,
    (
        HostMount("/etc", True, "any platform's flags and config"),
        HostMount("/var/lib", True, "any platform's config, bin dir and the agent's own"),
        HostMount("/usr/lib/systemd", False, "units"),
    ),
    note="the agent finds the layout itself: /etc and /var/lib are writable",
)


def choice(value: str) -> Choice:
    """The chart's ``flags.platform`` ``value`` (KeyError for one it does not have)."""
    for known in (*CHOICES, AUTO_CHOICE):
        if known.value == value:
            return known
    raise KeyError(value)


def chart_table() -> dict[str, dict[str, object]]:
    """What the chart reads (platforms.yaml): per value, its mounts in order."""
    return {
        known.value: {
            "note": known.note,
            "mounts": [
                {
                    "path": mount.path,
                    "readOnly": not mount.writable,
                    "type": "File"
                    if mount.file
                    else ("DirectoryOrCreate" if mount.create else "Directory"),
                    "why": mount.why,
                }
                for mount in known.mounts
            ],
        }
        for known in (*CHOICES, AUTO_CHOICE)
    }

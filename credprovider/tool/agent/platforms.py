"""What the node agent (``credprovider agent``) does on each kind of node: one table, each row
naming how the node is recognised, where the kubelet's config and plugins go, whether the platform
manages that config (then providers are merged into it, its own entries kept), how the kubelet's two
flags are set, which service runs the kubelet, or why nothing may be changed there and what to do
instead. Sources: each platform's own documentation (docs/fleet.md names them) and
:mod:`credprovider.tool.node.layouts` (the paths: one definition, used by the doctor too). Pure data
and one reader (``recognize``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from credprovider.paths import AGENT_BIN_DIR, AGENT_EXEC_HOME, AGENT_HOME, NODE_CONFIG
from credprovider.tool.node.access import FileProblem, UnreadableError, read_bytes
from credprovider.tool.node.layouts import (
    KUBEADM_EXTRA_ARGS_FILES,
    KUBEADM_FLAGS_ENV,
    LAYOUTS,
    Layout,
)
from credprovider.tool.node.root import NodeRoot, RootPathError

UNIT_DIRS: Final = ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
# How the kubelet's flags are set: by the platform itself (nothing to do), in an env file's
# KUBELET_EXTRA_ARGS (kubeadm), or in the k0s unit's --kubelet-extra-args.
BY_PLATFORM: Final = "platform"
ENV_FILE: Final = "env-file"
K0S_UNIT: Final = "k0s-unit"


def _layout(name: str) -> Layout:
    return next(layout for layout in LAYOUTS if layout.name == name)


@dataclass(frozen=True)
class Platform:
    name: str
    # Recognised by any of these files under the root, or by /etc/os-release's ID.
    evidence: tuple[str, ...] = ()
    os_ids: tuple[str, ...] = ()
    config: str = NODE_CONFIG
    bin_dir: str = AGENT_BIN_DIR
    # where the bundles go (versions/, current): on a mount the kubelet may execute from
    bundles: str = AGENT_HOME
    managed: bool = False  # the platform writes the config: merge, keep its providers
    flags: str = BY_PLATFORM
    flag_files: tuple[str, ...] = ()  # ENV_FILE: where KUBELET_EXTRA_ARGS lives (first present)
    services: tuple[str, ...] = ("kubelet",)  # the first one the node has is restarted
    refusal: str = ""  # nothing is changed on this platform: why, and what to do instead
    note: str = ""
    # provisioning names its config and bin dir in the kubelet's flags (mode files): uninstall
    # leaves the bootstrap there (agent/bootstrap.py), never a missing file
    bootstrap: bool = False


_EKS, _AKS, _GKE = _layout("EKS AL2023 (nodeadm)"), _layout("AKS"), _layout("GKE")
_KUBE_UP = _layout("GCE kube-up")
_RANCHER, _KOPS = _layout("k3s / RKE2"), _layout("kOps")

PLATFORMS: Final[tuple[Platform, ...]] = (
    Platform(
        "Bottlerocket",
        os_ids=("bottlerocket",),
        refusal="Bottlerocket's root is read-only and its kubelet is configured through its "
        "settings API: set settings.kubernetes.credential-providers there (it ships its own ECR "
        "plugin only: bottlerocket #4165)",
    ),
    Platform(
        "Talos",
        os_ids=("talos",),
        refusal="Talos is configured by its machine config: apply credprovider render talos "
        "(machine.kubelet.credentialProviderConfig) and install the release's Talos system "
        "extension (docs/platforms.md)",
    ),
    Platform(
        "OpenShift (RHCOS)",
        os_ids=("rhcos", "scos"),
        refusal="the Machine Config Operator owns the kubelet's files and /usr is read-only: "
        "apply the MachineConfig of credprovider render openshift, and the chart in mode files "
        "(docs/platforms.md)",
    ),
    Platform(
        "kOps",
        evidence=(_KOPS.config, "/etc/kubernetes/kops-controller"),
        refusal="kOps' nodeup rewrites the kubelet's flags and config at every boot: add the "
        "providers to the cluster spec instead",
    ),
    Platform(
        "Gardener",
        evidence=("/opt/gardener", "/var/lib/gardener-node-agent"),
        refusal="gardener-node-agent writes the kubelet's unit and files again from the shoot's "
        "operating system config: a change here is undone; Gardener's AWS extension gives the "
        "kubelet its ECR provider (enableECRAccess), and an operating system config extension "
        "is the lasting way for another",
    ),
    Platform(
        "RKE2",
        evidence=("/etc/rancher/rke2",),
        config=_RANCHER.config,
        bin_dir=_RANCHER.bin_dirs[0],
        services=("rke2-server", "rke2-agent"),
        note=_RANCHER.note,
    ),
    Platform(
        "k3s",
        evidence=("/etc/rancher/k3s",),
        config=_RANCHER.config,
        bin_dir=_RANCHER.bin_dirs[0],
        services=("k3s", "k3s-agent"),
        note=_RANCHER.note,
    ),
    Platform(
        "k0s",
        evidence=("/etc/k0s", "/etc/systemd/system/k0sworker.service"),
        flags=K0S_UNIT,
        services=("k0sworker", "k0scontroller"),
        note="k0s passes the kubelet's flags from its unit's --kubelet-extra-args",
    ),
    Platform(
        "EKS AL2023 (nodeadm)",
        evidence=(_EKS.config, "/etc/eks/nodeadm"),
        config=_EKS.config,
        bin_dir=_EKS.bin_dirs[0],
        managed=True,
        note=_EKS.note + ": the agent merges its providers again after a reboot",
    ),
    Platform(
        "AKS",
        evidence=(_AKS.config,),
        config=_AKS.config,
        bin_dir=_AKS.bin_dirs[0],
        managed=True,
        note=_AKS.note,
    ),
    # kube-up's own file first: both run COS, and a COS node without it is GKE's
    Platform(
        "GCE kube-up",
        evidence=(_KUBE_UP.config,),
        config=_KUBE_UP.config,
        bin_dir=_KUBE_UP.bin_dirs[0],
        managed=True,
        bundles=AGENT_EXEC_HOME,  # COS mounts /var noexec (paths.py)
        note=_KUBE_UP.note,
    ),
    Platform(
        "GKE (COS)",
        evidence=(_GKE.config,),
        os_ids=("cos",),
        config=_GKE.config,
        bin_dir=_GKE.bin_dirs[0],
        managed=True,
        bundles=AGENT_EXEC_HOME,  # COS mounts /var noexec (paths.py)
        note=_GKE.note + ": the agent merges its providers again when its pod starts",
    ),
    Platform(
        "kubeadm",
        evidence=(
            "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
            "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
            KUBEADM_FLAGS_ENV,
        ),
        flags=ENV_FILE,
        # kubeadm's drop-in reads KUBELET_EXTRA_ARGS last, from the distribution's file
        flag_files=KUBEADM_EXTRA_ARGS_FILES,
        note="the flags go into KUBELET_EXTRA_ARGS, which kubeadm's drop-in passes last (kubeadm "
        "rewrites kubeadm-flags.env on upgrade)",
    ),
)
UNKNOWN: Final = Platform(
    "unknown",
    refusal="this node's layout is not one the agent knows: nothing is changed; run "
    "credprovider doctor on it and install with credprovider install",
)


def files_only(config: str, bin_dir: str) -> Platform:
    """The least-privileged mode: the bundle, the links and the config at paths given, nothing
    else (the kubelet's flags were set at provisioning; no service is restarted, so a changed
    config takes effect at the kubelet's next start; a new bundle at the next exec)."""
    return Platform(
        "files only",
        config=config,
        bin_dir=bin_dir,
        managed=True,
        services=(),
        note="files only: the kubelet's flags are set at provisioning and it is not restarted",
        bootstrap=True,
    )


def os_release_id(root: NodeRoot) -> str:
    """``ID`` of the node's /etc/os-release ("" when there is none)."""
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:  # bounded, and never a FIFO or device (which would hang or fill memory)
            text = read_bytes(str(root.host(path)), 65536).decode("utf-8", "replace")
        except (FileProblem, UnreadableError, RootPathError):
            continue
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "ID":
                return value.strip().strip("'\"").lower()
    return ""


def recognize(root: NodeRoot) -> tuple[Platform, str]:
    """The node's platform and what told it (a file, or the OS ID)."""
    os_id = os_release_id(root)
    for platform in PLATFORMS:
        if os_id and os_id in platform.os_ids:
            return platform, f"/etc/os-release ID={os_id}"
        for evidence in platform.evidence:
            if root.lexists(evidence):
                return platform, evidence
    return UNKNOWN, "nothing the agent knows"


def confirmed(root: NodeRoot, platform: Platform) -> str:
    """What on the node under ``root`` shows it is ``platform``, a platform the operator named:
    one of its files, its OS ID, or a unit of a service of its own ("" when nothing does;
    "the command line" for rules that need nothing of the node, files only's)."""
    if not (platform.evidence or platform.os_ids):
        return "the command line"
    for evidence in platform.evidence:
        if root.lexists(evidence):
            return evidence
    os_id = os_release_id(root) if platform.os_ids else ""
    if os_id in platform.os_ids:
        return f"/etc/os-release ID={os_id}"
    own = _own_services(platform)
    unit = installed_unit(root, own) if own else ""
    return f"its unit {unit}.service" if unit else ""


def _own_services(platform: Platform) -> tuple[str, ...]:
    """The platform's services a node of another would not run (every one runs a kubelet)."""
    return tuple(service for service in platform.services if service != "kubelet")


def signs_of(platform: Platform) -> tuple[str, ...]:
    """What :func:`confirmed` looks for on a node, as an operator reads it."""
    return (
        *platform.evidence,
        *(f"/etc/os-release ID={os_id}" for os_id in platform.os_ids),
        *(f"{service}.service" for service in _own_services(platform)),
    )


def service_to_restart(root: NodeRoot, rules: Platform | None) -> str:
    """The unit an uninstall restarts: of ``rules`` (files only's: none), else of the platform
    the node is recognised as."""
    platform = rules or recognize(root)[0]
    return installed_unit(root, platform.services)


def installed_unit(root: NodeRoot, services: tuple[str, ...]) -> str:
    """The first of ``services`` the node has a systemd unit for ("" for none)."""
    for service in services:
        for directory in UNIT_DIRS:
            if root.exists(f"{directory}/{service}.service"):
                return service
    return ""

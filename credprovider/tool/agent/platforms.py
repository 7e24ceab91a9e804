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
from typing import Final, TypeAlias

from credprovider.paths import AGENT_BIN_DIR, AGENT_EXEC_HOME, AGENT_HOME, NODE_CONFIG
from credprovider.tool.node.access import FileProblem, UnreadableError, read_bytes
from credprovider.tool.node.layouts import (
    KUBEADM_EXTRA_ARGS_FILES,
    KUBEADM_FLAGS_ENV,
    LAYOUTS,
    Layout,
)
from credprovider.tool.node.root import NodeRoot, RootPathError
from credprovider.tool.node.units import UNIT_LOAD_PATH, find_unit

# Where systemd loads units from (node/units.py: one definition, the order systemd reads them in).
UNIT_DIRS: Final = UNIT_LOAD_PATH
Loaded: TypeAlias = frozenset[str] | None
"""The units (``NAME.service``) systemd said it has loaded; None: it was not asked, and the unit
files on the node's load path tell."""
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
    # k3s or rke2: the product whose own configuration may name other paths (node/rancher.py)
    rancher: str = ""


_EKS, _AKS, _GKE = _layout("EKS AL2023 (nodeadm)"), _layout("AKS"), _layout("GKE")
_KUBE_UP = _layout("GCE kube-up")
_RANCHER, _KOPS = _layout("k3s / RKE2"), _layout("kOps")
_RANCHER_NOTE: Final = (
    "k3s and RKE2 add the kubelet flags themselves, only when both the config and the bin dir "
    "exist as they start: the agent restarts their service whenever it changes the config"
)

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
        # nodeup writes /etc/sysconfig/kops-configuration (and kops-configuration.service) on
        # every node it sets up (kubernetes/kops nodeup/pkg/bootstrap/install.go); the credential
        # provider config only where the cluster has one (nodeup/pkg/model/kubelet.go)
        evidence=(_KOPS.config, "/etc/sysconfig/kops-configuration"),
        refusal="kOps' nodeup rewrites the kubelet's flags and config at every boot: add the "
        "providers to the cluster spec instead",
    ),
    Platform(
        "Gardener",
        # the AWS extension's config directory (platforms.md); gardener-node-agent's BaseDir
        # (gardener/gardener pkg/apis/config/nodeagent/v1alpha1/types.go)
        evidence=("/opt/gardener", "/var/lib/gardener-node-agent"),
        refusal="gardener-node-agent writes the kubelet's unit and files again from the shoot's "
        "operating system config: a change here is undone; Gardener's AWS extension gives the "
        "kubelet its ECR provider (enableECRAccess), and an operating system config extension "
        "is the lasting way for another",
    ),
    Platform(
        "RKE2",
        # its config directory (docs.rke2.io: an agent's server and token go in
        # /etc/rancher/rke2/config.yaml); else its units (recognize), which its tarball puts in
        # /usr/local/lib/systemd/system (rancher/rke2 bundle/lib/systemd/system/rke2-*.service)
        evidence=("/etc/rancher/rke2",),
        config=_RANCHER.config,
        bin_dir=_RANCHER.bin_dirs[0],
        services=("rke2-server", "rke2-agent"),
        note=_RANCHER_NOTE,
        rancher="rke2",
    ),
    Platform(
        "k3s",
        # a server's kubeconfig directory; an agent installed by k3s-io/k3s install.sh with
        # systemd has none, only its unit /etc/systemd/system/k3s-agent.service (recognize)
        evidence=("/etc/rancher/k3s",),
        config=_RANCHER.config,
        bin_dir=_RANCHER.bin_dirs[0],
        services=("k3s", "k3s-agent"),
        note=_RANCHER_NOTE,
        rancher="k3s",
    ),
    Platform(
        "k0s",
        # k0s' config and containerd directory (k0sproject/k0s pkg/constant/constant_unix.go,
        # pkg/component/worker/containerd/component_other.go) and its worker unit
        evidence=("/etc/k0s", "/etc/systemd/system/k0sworker.service"),
        flags=K0S_UNIT,
        services=("k0sworker", "k0scontroller"),
        note="k0s passes the kubelet's flags from its unit's --kubelet-extra-args",
    ),
    Platform(
        "EKS AL2023 (nodeadm)",
        # nodeadm writes config.json at every boot (awslabs/amazon-eks-ami
        # nodeadm/internal/kubelet/image-credential-provider.go); the image has nodeadm's drop-in
        # directory (templates/al2023/provisioners/install-nodeadm.sh)
        evidence=(_EKS.config, "/etc/eks/nodeadm.d"),
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


def recognize(root: NodeRoot, loaded: Loaded = None) -> tuple[Platform, str]:
    """The node's platform and what told it (a file, the OS ID, or a unit of a service of the
    platform's own: a k3s agent has no file of k3s' outside its unit)."""
    os_id = os_release_id(root)
    for platform in PLATFORMS:
        if os_id and os_id in platform.os_ids:
            return platform, f"/etc/os-release ID={os_id}"
        for evidence in platform.evidence:
            if root.lexists(evidence):
                return platform, evidence
        unit = _own_unit(root, platform, loaded)
        if unit:
            return platform, unit
    return UNKNOWN, "nothing the agent knows"


def confirmed(root: NodeRoot, platform: Platform, loaded: Loaded = None) -> str:
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
    return _own_unit(root, platform, loaded)


def _own_unit(root: NodeRoot, platform: Platform, loaded: Loaded) -> str:
    """What shows ``platform`` by a unit of a service of its own: ``its unit NAME.service`` for
    the first the node has ("" for none)."""
    own = _own_services(platform)
    unit = installed_unit(root, own, loaded) if own else ""
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


def service_to_restart(root: NodeRoot, rules: Platform | None, loaded: Loaded = None) -> str:
    """The unit an uninstall restarts: of ``rules`` (files only's: none), else of the platform
    the node is recognised as."""
    platform = rules or recognize(root, loaded)[0]
    return installed_unit(root, platform.services, loaded)


def installed_unit(root: NodeRoot, services: tuple[str, ...], loaded: Loaded = None) -> str:
    """The first of ``services`` the node has a systemd unit for ("" for none): of those systemd
    said it has loaded (``loaded``), else of those with a unit file on the load path under
    ``root`` (a pod sees only the directories its chart value mounts)."""
    if loaded is not None:
        return next((service for service in services if f"{service}.service" in loaded), "")
    unit = find_unit(root.exists, (f"{service}.service" for service in services))
    return unit.rsplit("/", 1)[1].removesuffix(".service") if unit else ""


def every_service() -> tuple[str, ...]:
    """The unit of every service a platform's kubelet runs under, as systemd names it."""
    return tuple(dict.fromkeys(f"{s}.service" for p in PLATFORMS for s in p.services))

"""Where each distribution puts the credential provider config and plugins, for a node with no
kubelet running (an image being built, a kubelet that will not start). One table; each row names
its source, and docs/operators.md shows the same table (a test holds them together). Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# kubeadm's flags: its own file (written anew at init, join and upgrade), then the distribution's,
# whose KUBELET_EXTRA_ARGS its drop-in passes last.
KUBEADM_FLAGS_ENV: Final = "/var/lib/kubelet/kubeadm-flags.env"
KUBEADM_EXTRA_ARGS_FILES: Final = ("/etc/default/kubelet", "/etc/sysconfig/kubelet")
# k3s' and RKE2's defaults (k3s-io/k3s pkg/cli/cmds/agent.go; node/rancher.py reads what a node
# names instead)
RANCHER_CONFIG: Final = "/var/lib/rancher/credentialprovider/config.yaml"
RANCHER_BIN_DIR: Final = "/var/lib/rancher/credentialprovider/bin"
# Where a node keeps the kubelet binary its unit's ExecStart runs, for a kubelet that is not running
# (its version decides whether its flags start it), first match wins:
KUBELET_BINARIES: Final = (
    "/usr/bin/kubelet",  # kubernetes/release debs and rpms (kubelet.service); EKS AL2023 (nodeadm)
    "/usr/local/bin/kubelet",  # kOps nodeup (kubelet.service ExecStart)
    "/opt/bin/kubelet",  # AKS AgentBaker and Gardener (kubelet.service ExecStart)
    "/home/kubernetes/bin/kubelet",  # GKE and GCE kube-up (kubelet.service ExecStart)
)


@dataclass(frozen=True)
class Layout:
    name: str
    config: str  # the --image-credential-provider-config it passes ("": none at a fixed path)
    bin_dirs: tuple[str, ...]  # the bin dir, with the alternatives it uses on some images
    source: str
    note: str = ""
    flag_files: tuple[str, ...] = ()  # where its kubelet flags are kept, when a file holds them
    # the platform passes the kubelet the two flags only when both paths exist as it starts
    # (k3s, RKE2): a missing one leaves the kubelet without plugins, not unable to start
    both_or_neither: bool = False


LAYOUTS: tuple[Layout, ...] = (
    Layout(
        "EKS AL2023 (nodeadm)",
        "/etc/eks/image-credential-provider/config.json",
        ("/etc/eks/image-credential-provider",),
        "awslabs/amazon-eks-ami nodeadm",
        "nodeadm rewrites the config at every boot: a hand edit does not survive",
    ),
    Layout(
        "AKS",
        "/var/lib/kubelet/credential-provider-config.yaml",
        ("/var/lib/kubelet/credential-provider",),
        "Azure/AgentBaker",
        "its args name /etc/kubernetes/azure.json",
    ),
    Layout(
        "GKE",
        "/etc/srv/kubernetes/cri_auth_config.yaml",
        ("/home/kubernetes/bin",),
        "GKE's node configure helper (the function writing its auth provider config); "
        "KUBELET_OPTS in /etc/default/kubelet",
        "GKE writes the config at every boot (cloud-init runs its configure scripts): a hand "
        "edit lasts until the next reboot",
    ),
    Layout(
        "GCE kube-up",
        "/home/kubernetes/cri-auth-config.yaml",
        ("/home/kubernetes/bin",),
        "kubernetes/cloud-provider-gcp cluster/gce/gci/configure-helper.sh",
        "kube-up's config, not GKE's (/etc/srv/kubernetes/cri_auth_config.yaml)",
    ),
    Layout(
        "k3s / RKE2",
        RANCHER_CONFIG,
        (RANCHER_BIN_DIR,),
        "k3s-io/k3s pkg/cli/cmds/agent.go, pkg/configfilearg",
        "k3s and RKE2 add the kubelet flags themselves, only when both the config and the bin dir "
        "exist as they start: restart k3s (k3s-agent, rke2-server, rke2-agent) once both are there",
        both_or_neither=True,
    ),
    Layout(
        "kOps",
        "/var/lib/kubelet/credential-provider.conf",
        ("/usr/local/bin", "/opt/kubernetes/bin", "/home/kubernetes/bin"),
        "kubernetes/kops nodeup",
        "binaries in /usr/local/bin (/opt/kubernetes/bin on Flatcar, /home/kubernetes/bin on COS)",
    ),
    Layout(
        "Bottlerocket",
        "/etc/kubernetes/kubelet/credential-provider-config.yaml",
        ("/usr/libexec/kubernetes/kubelet/plugins",),
        "bottlerocket-os/bottlerocket kubelet templates",
        "Bottlerocket ships its own ECR plugin on a read-only root: third-party plugins cannot be "
        "added there (bottlerocket #4165)",
    ),
    Layout(
        "Talos",
        "/etc/kubernetes/kubelet-credentialproviderconfig.yaml",
        ("/usr/local/lib/kubelet/credentialproviders",),
        "siderolabs/talos pkg/machinery/constants (KubeletCredentialProviderConfig)",
        "Talos writes the config from machine.kubelet.credentialProviderConfig; only system "
        "extensions can place binaries (the node has no glibc; the bundle needs none: "
        "docs/release.md says what the extension holds)",
    ),
    Layout(
        "kubeadm",
        "",
        (),
        "kubernetes/kubeadm kubelet drop-in",
        "the flags are in kubeadm-flags.env, /etc/default/kubelet or /etc/sysconfig/kubelet",
        (
            KUBEADM_FLAGS_ENV,
            *KUBEADM_EXTRA_ARGS_FILES,
            "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
            "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
        ),
    ),
)

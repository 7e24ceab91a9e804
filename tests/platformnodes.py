"""Fixture nodes, one per platform, built from what each vendor's own provisioning writes (issue #61;
``../shared/reference/platforms.md`` has each fact, and each node below names the vendor file it
comes from). Each is the node's files as provisioning leaves them: its kubelet unit and drop-ins as
the vendor writes them (the variable it uses, its quoting), the file holding the flags, os-release,
the shipped provider config and a stand-in for the platform's own plugin. ``expected`` is the
config and bin dir that platform's kubelet is started with: what ``doctor --root`` must name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PlatformNode:
    name: str
    source: str  # the vendor files the node is built from
    config: str  # the --image-credential-provider-config its kubelet is started with
    bin_dir: str
    files: dict[str, str]  # node path -> content
    executables: tuple[str, ...] = ()  # node paths made executable (binaries' stand-ins)
    # the vendor's mounts the kubelet cannot execute from, and those inside them it remounts exec
    noexec: tuple[str, ...] = ()
    exec_mounts: tuple[str, ...] = ()

    def executable(self, path: str) -> bool:
        """Could the kubelet execute a file at the node's ``path``, by this vendor's mounts?"""

        def under(top: str) -> bool:
            return path == top or path.startswith(top.rstrip("/") + "/")

        return any(under(top) for top in self.exec_mounts) or not any(map(under, self.noexec))

    def build(self, root: Path) -> Path:
        for path, text in self.files.items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            if path in self.executables:
                target.chmod(0o755)
        return root


# COS: /var and /home are noexec; cloud-init's kube-node-installation.service bind-mounts
# /home/kubernetes/bin over itself and remounts it exec before every boot's configure
# (kubernetes/kubernetes cluster/gce/gci/node.yaml; platforms.md, GKE row).
COS_NOEXEC = ("/var", "/home")
COS_EXEC = ("/home/kubernetes/bin",)
COS_INSTALLATION_UNIT = (
    "[Unit]\nDescription=Download and install k8s binaries and configurations\n"
    "After=network-online.target\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\n"
    "ExecStartPre=/bin/mkdir -p /home/kubernetes/bin\n"
    "ExecStartPre=/bin/mount --bind /home/kubernetes/bin /home/kubernetes/bin\n"
    "ExecStartPre=/bin/mount -o remount,exec /home/kubernetes/bin\n"
    "ExecStart=/home/kubernetes/bin/configure.sh\n\n[Install]\nWantedBy=kubernetes.target\n"
)
BINARY = '#!/bin/sh\necho "the platform\'s own binary" >&2\nexit 1\n'
PROVIDER = (
    "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
    "  - name: {name}\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
    "    matchImages:\n{patterns}    defaultCacheDuration: {cache}\n{args}"
)


def _provider(name: str, patterns: tuple[str, ...], cache: str, args: tuple[str, ...] = ()) -> str:
    listed = "".join(f'    - "{p}"\n' for p in patterns)
    given = ("    args:\n" + "".join(f"    - {a}\n" for a in args)) if args else ""
    return PROVIDER.format(name=name, patterns=listed, cache=cache, args=given)


def _os_release(os_id: str, name: str) -> str:
    return f'NAME="{name}"\nID={os_id}\nPRETTY_NAME="{name}"\n'


GKE_CONFIG = "/etc/srv/kubernetes/cri_auth_config.yaml"
GCP_PATTERNS = ("container.cloud.google.com", "gcr.io", "*.gcr.io", "*.pkg.dev")


def gke() -> PlatformNode:
    """GKE on COS: the kubelet unit reads ``KUBELET_OPTS`` from /etc/default/kubelet; the config
    is ``/etc/srv/kubernetes/cri_auth_config.yaml`` (underscores), not kube-up's."""
    opts = (
        "--v=2 --cloud-provider=external --cert-dir=/var/lib/kubelet/pki/ "
        "--kubeconfig=/var/lib/kubelet/kubeconfig "
        f"--image-credential-provider-config={GKE_CONFIG} "
        "--image-credential-provider-bin-dir=/home/kubernetes/bin --max-pods=110 "
        "--node-labels=cloud.google.com/gke-boot-disk=pd-balanced,"
        "cloud.google.com/gke-container-runtime=containerd"
    )
    return PlatformNode(
        "GKE (COS)",
        "GKE's node configure helper, configure-auth-provider-gcp (the config it writes, 'Keep in "
        "sync with --image-credential-provider-config in .../kube_env.go'); a GKE node's "
        "/etc/default/kubelet KUBELET_OPTS and kubelet.service (platforms.md, GKE row)",
        GKE_CONFIG,
        "/home/kubernetes/bin",
        {
            "/etc/os-release": _os_release("cos", "Container-Optimized OS"),
            "/etc/systemd/system/kubelet.service": (
                "[Unit]\nDescription=Kubernetes kubelet\n\n[Service]\nRestart=always\n"
                "EnvironmentFile=/etc/default/kubelet\n"
                "ExecStart=/home/kubernetes/bin/kubelet $KUBELET_OPTS\n\n"
                "[Install]\nWantedBy=multi-user.target\n"
            ),
            "/etc/default/kubelet": f'KUBELET_OPTS="{opts}"\nKUBE_COVERAGE_FILE=/var/log/kubelet.cov\n',
            GKE_CONFIG: _provider(
                "auth-provider-gcp", GCP_PATTERNS, "1m", ("get-credentials", "--v=3")
            ),
            "/home/kubernetes/bin/auth-provider-gcp": BINARY,
            "/home/kubernetes/bin/kubelet": BINARY,
            "/etc/systemd/system/kube-node-installation.service": COS_INSTALLATION_UNIT,
        },
        ("/home/kubernetes/bin/auth-provider-gcp", "/home/kubernetes/bin/kubelet"),
        COS_NOEXEC,
        COS_EXEC,
    )


def gce_kube_up() -> PlatformNode:
    """GCE kube-up (not GKE): the same unit and variable; the config is
    ``/home/kubernetes/cri-auth-config.yaml`` (hyphens)."""
    config = "/home/kubernetes/cri-auth-config.yaml"
    return PlatformNode(
        "GCE kube-up",
        "kubernetes/cloud-provider-gcp cluster/gce/gci/configure-helper.sh (the auth provider "
        "config) and cluster/gce/gci/configure-kubeapiserver / util.sh KUBELET_OPTS "
        "(platforms.md, GCE kube-up row)",
        config,
        "/home/kubernetes/bin",
        {
            "/etc/os-release": _os_release("cos", "Container-Optimized OS"),
            "/etc/systemd/system/kubelet.service": (
                "[Service]\nEnvironmentFile=/etc/default/kubelet\n"
                "ExecStart=/home/kubernetes/bin/kubelet $KUBELET_OPTS\n"
            ),
            "/etc/default/kubelet": (
                'KUBELET_OPTS="--v=2 --cloud-provider=external '
                f"--image-credential-provider-config={config} "
                '--image-credential-provider-bin-dir=/home/kubernetes/bin"\n'
            ),
            config: _provider("auth-provider-gcp", GCP_PATTERNS, "1m", ("get-credentials",)),
            "/home/kubernetes/bin/auth-provider-gcp": BINARY,
            "/etc/systemd/system/kube-node-installation.service": COS_INSTALLATION_UNIT,
        },
        ("/home/kubernetes/bin/auth-provider-gcp",),
        COS_NOEXEC,
        COS_EXEC,
    )


EKS_DIR = "/etc/eks/image-credential-provider"


def eks_al2023() -> PlatformNode:
    """EKS AL2023: nodeadm writes every flag into ``NODEADM_KUBELET_ARGS`` (no fixed order, the
    user's NodeConfig flags last), which the unit expands unquoted."""
    args = (
        "--node-ip=10.0.1.5 --cloud-provider=external "
        f"--image-credential-provider-config={EKS_DIR}/config.json "
        f"--image-credential-provider-bin-dir={EKS_DIR} "
        "--config=/etc/kubernetes/kubelet/config.json --hostname-override=ip-10-0-1-5 "
        "--kubeconfig=/var/lib/kubelet/kubeconfig --runtime-cgroups=/runtime.slice/containerd.service"
    )
    config = (
        '{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":'
        '[{"name":"ecr-credential-provider","matchImages":["*.dkr.ecr.*.amazonaws.com"],'
        '"defaultCacheDuration":"12h0m0s","apiVersion":"credentialprovider.kubelet.k8s.io/v1"}]}\n'
    )
    return PlatformNode(
        "EKS AL2023 (nodeadm)",
        "awslabs/amazon-eks-ami templates/al2023/runtime/rootfs/etc/systemd/system/kubelet.service "
        "(EnvironmentFile=/etc/eks/kubelet/environment, ExecStart=/usr/bin/kubelet "
        "$NODEADM_KUBELET_ARGS) and nodeadm's kubelet daemon (the environment file, config.json)",
        f"{EKS_DIR}/config.json",
        EKS_DIR,
        {
            "/etc/os-release": _os_release("amzn", "Amazon Linux"),
            "/etc/systemd/system/kubelet.service": (
                "[Unit]\nDescription=Kubernetes Kubelet\nAfter=containerd.service\n\n[Service]\n"
                "Slice=runtime.slice\nEnvironmentFile=/etc/eks/kubelet/environment\n"
                "ExecStartPre=/sbin/iptables -P FORWARD ACCEPT -w 5\n"
                "ExecStart=/usr/bin/kubelet $NODEADM_KUBELET_ARGS\n\nRestart=on-failure\n"
            ),
            "/etc/eks/kubelet/environment": f"NODEADM_KUBELET_ARGS={args}\n",
            f"{EKS_DIR}/config.json": config,
            f"{EKS_DIR}/ecr-credential-provider": BINARY,
        },
        (f"{EKS_DIR}/ecr-credential-provider",),
    )


def eks_al2023_node_config_flags() -> PlatformNode:
    """EKS AL2023 whose NodeConfig ``spec.kubelet.flags`` names another config: nodeadm puts the
    user's flags last, and the kubelet takes the last value (not the layout's config.json)."""
    base = eks_al2023()
    custom = f"{EKS_DIR}/team.json"
    environment = base.files["/etc/eks/kubelet/environment"].rstrip("\n")
    files = {
        **base.files,
        "/etc/eks/kubelet/environment": f"{environment} --image-credential-provider-config={custom}\n",
        custom: base.files[f"{EKS_DIR}/config.json"],
    }
    return PlatformNode(
        "EKS AL2023, NodeConfig flags",
        base.source + "; nodeadm's NodeConfig spec.kubelet.flags, appended last",
        custom,
        EKS_DIR,
        files,
        base.executables,
    )


def eks_al2() -> PlatformNode:
    """EKS AL2 (bootstrap.sh): the two flags written into the unit itself, space-separated, then
    ``$KUBELET_ARGS $KUBELET_EXTRA_ARGS`` from bootstrap.sh's drop-ins."""
    return PlatformNode(
        "EKS AL2",
        "awslabs/amazon-eks-ami templates/al2/runtime/kubelet.service (the flags in ExecStart) "
        "and bootstrap.sh's drop-ins 10-kubelet-args.conf, 30-kubelet-extra-args.conf",
        f"{EKS_DIR}/config.json",
        EKS_DIR,
        {
            "/etc/os-release": _os_release("amzn", "Amazon Linux"),
            "/etc/systemd/system/kubelet.service": (
                "[Unit]\nDescription=Kubernetes Kubelet\n\n[Service]\nExecStart=/usr/bin/kubelet \\\n"
                "    --config /etc/kubernetes/kubelet/kubelet-config.json \\\n"
                "    --kubeconfig /var/lib/kubelet/kubeconfig \\\n"
                f"    --image-credential-provider-config {EKS_DIR}/config.json \\\n"
                f"    --image-credential-provider-bin-dir {EKS_DIR} \\\n"
                "    $KUBELET_ARGS \\\n    $KUBELET_EXTRA_ARGS\n\nRestart=always\n"
            ),
            "/etc/systemd/system/kubelet.service.d/10-kubelet-args.conf": (
                "[Service]\nEnvironment='KUBELET_ARGS=--node-ip=10.0.1.5 "
                "--pod-infra-container-image=602401143452.dkr.ecr.us-east-1.amazonaws.com/"
                "eks/pause:3.5 --v=2'\n"
            ),
            "/etc/systemd/system/kubelet.service.d/30-kubelet-extra-args.conf": (
                "[Service]\nEnvironment='KUBELET_EXTRA_ARGS=--node-labels=team=a'\n"
            ),
            f"{EKS_DIR}/config.json": eks_al2023().files[f"{EKS_DIR}/config.json"],
            f"{EKS_DIR}/ecr-credential-provider": BINARY,
        },
        (f"{EKS_DIR}/ecr-credential-provider",),
    )


def flatcar_kubeadm() -> PlatformNode:
    """Flatcar with the kubernetes sysext: kubeadm's drop-in under /usr (read-only), the user's
    flags in /etc/sysconfig/kubelet."""
    config, bin_dir = "/etc/kubernetes/credential-provider.yaml", "/opt/bin/credential-providers"
    return PlatformNode(
        "Flatcar (kubernetes sysext)",
        "flatcar/sysext-bakery kubernetes: /usr/lib/systemd/system/kubelet.service and its "
        "kubelet.service.d/10-kubeadm.conf, reading /etc/sysconfig/kubelet (platforms.md, Flatcar row)",
        config,
        bin_dir,
        {
            "/etc/os-release": _os_release("flatcar", "Flatcar Container Linux by Kinvolk"),
            "/usr/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet\n",
            "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": (
                "[Service]\n"
                'Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"\n'
                "EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\n"
                "EnvironmentFile=-/etc/sysconfig/kubelet\nExecStart=\n"
                "ExecStart=/usr/bin/kubelet $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS "
                "$KUBELET_EXTRA_ARGS\n"
            ),
            "/etc/sysconfig/kubelet": (
                f'KUBELET_EXTRA_ARGS="--image-credential-provider-config={config} '
                f'--image-credential-provider-bin-dir={bin_dir}"\n'
            ),
            config: _provider("ecr-credential-provider", ("*.dkr.ecr.*.amazonaws.com",), "12h"),
        },
    )


def cluster_api_ecr() -> PlatformNode:
    """A Cluster API image-builder image with the ECR role: the flags in KUBELET_EXTRA_ARGS of
    /etc/default/kubelet (kubeadm's drop-in passes it last)."""
    config = "/var/usr/ecr-credential-provider/ecr-credential-provider-config"
    return PlatformNode(
        "Cluster API image-builder (ECR)",
        "kubernetes-sigs/image-builder ansible roles (the ECR credential provider's config and "
        "bin dir, KUBELET_EXTRA_ARGS; platforms.md, Cluster API row)",
        config,
        "/opt/bin",
        {
            "/etc/os-release": _os_release("ubuntu", "Ubuntu"),
            "/usr/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet\n",
            "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": (
                "[Service]\nEnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\n"
                "EnvironmentFile=-/etc/default/kubelet\nExecStart=\n"
                "ExecStart=/usr/bin/kubelet $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS\n"
            ),
            "/etc/default/kubelet": (
                f"KUBELET_EXTRA_ARGS=--image-credential-provider-config={config} "
                "--image-credential-provider-bin-dir=/opt/bin\n"
            ),
            config: _provider("ecr-credential-provider", ("*.dkr.ecr.*.amazonaws.com",), "12h"),
            "/opt/bin/ecr-credential-provider": BINARY,
        },
        ("/opt/bin/ecr-credential-provider",),
    )


def aks() -> PlatformNode:
    """AKS (AgentBaker): ``KUBELET_FLAGS`` in /etc/default/kubelet, expanded by the unit."""
    config = "/var/lib/kubelet/credential-provider-config.yaml"
    flags = (
        "--address=0.0.0.0 --cloud-provider=external "
        f"--image-credential-provider-config={config} "
        "--image-credential-provider-bin-dir=/var/lib/kubelet/credential-provider "
        "--kubeconfig=/var/lib/kubelet/kubeconfig"
    )
    azure = ("*.azurecr.io", "*.azurecr.cn", "*.azurecr.de", "*.azurecr.us")
    return PlatformNode(
        "AKS",
        "Azure/AgentBaker parts/linux/cloud-init/artifacts/kubelet.service (EnvironmentFile="
        "/etc/default/kubelet, ExecStart=/opt/bin/kubelet ... $KUBELET_FLAGS) and its "
        "credential provider config (platforms.md, AKS row)",
        config,
        "/var/lib/kubelet/credential-provider",
        {
            "/etc/os-release": _os_release("ubuntu", "Ubuntu"),
            "/etc/systemd/system/kubelet.service": (
                "[Service]\nRestart=always\nEnvironmentFile=/etc/default/kubelet\n"
                "SuccessExitStatus=143\nExecStartPre=/bin/bash /opt/azure/containers/kubelet.sh\n"
                "ExecStart=/opt/bin/kubelet \\\n        --enable-server \\\n"
                '        --node-labels="${KUBELET_NODE_LABELS}" \\\n'
                "        --v=2 \\\n        --volume-plugin-dir=/etc/kubernetes/volumeplugins \\\n"
                "        $KUBELET_TLS_BOOTSTRAP_FLAGS \\\n        $KUBELET_CONFIG_FILE_FLAGS \\\n"
                "        $KUBELET_FLAGS\n"
            ),
            "/etc/default/kubelet": (
                f"KUBELET_FLAGS={flags}\nKUBELET_REGISTER_SCHEDULABLE=true\n"
                "KUBELET_NODE_LABELS=kubernetes.azure.com/role=agent,agentpool=nodepool1\n"
            ),
            config: _provider(
                "acr-credential-provider", azure, "10m", ("/etc/kubernetes/azure.json",)
            ),
            "/var/lib/kubelet/credential-provider/acr-credential-provider": BINARY,
        },
        ("/var/lib/kubelet/credential-provider/acr-credential-provider",),
    )


def kops() -> PlatformNode:
    """kOps: nodeup's unit quotes ``"$DAEMON_ARGS"``: systemd still splits it (a word that is
    exactly ``$NAME`` after unquoting)."""
    config = "/var/lib/kubelet/credential-provider.conf"
    return PlatformNode(
        "kOps",
        "kubernetes/kops nodeup/pkg/model/kubelet.go (the unit: EnvironmentFile=/etc/sysconfig/"
        'kubelet, ExecStart=/usr/local/bin/kubelet "$DAEMON_ARGS"; the credential provider '
        "config and its flags); nodeup/pkg/bootstrap/install.go (/etc/sysconfig/kops-configuration, "
        "on every node)",
        config,
        "/usr/local/bin",
        {
            "/etc/os-release": _os_release("ubuntu", "Ubuntu"),
            "/lib/systemd/system/kubelet.service": (
                "[Unit]\nDescription=Kubernetes Kubelet Server\n"
                "Documentation=https://github.com/kubernetes/kubernetes\n"
                "After=containerd.service\n\n[Service]\nEnvironmentFile=/etc/sysconfig/kubelet\n"
                'ExecStart=/usr/local/bin/kubelet "$DAEMON_ARGS"\nRestart=always\n'
                "RestartSec=2s\nStartLimitInterval=0\nKillMode=process\nUser=root\n"
            ),
            "/etc/sysconfig/kubelet": (
                'DAEMON_ARGS="--cloud-provider=external --v=2 '
                f"--image-credential-provider-config={config} "
                '--image-credential-provider-bin-dir=/usr/local/bin"\nHOME="/root"\n'
            ),
            config: _provider(
                "ecr-credential-provider",
                ("*.dkr.ecr.*.amazonaws.com",),
                "12h",
                ("get-credentials",),
            ),
            "/usr/local/bin/ecr-credential-provider": BINARY,
            # nodeup/pkg/bootstrap/install.go: on every node nodeup sets up
            "/etc/sysconfig/kops-configuration": "AWS_REGION=us-east-1\n",
        },
        ("/usr/local/bin/ecr-credential-provider",),
    )


OPENSHIFT_BIN = "/usr/libexec/kubelet-image-credential-provider-plugins"


def openshift() -> PlatformNode:
    """OpenShift (RHCOS): the MCO renders both flags inline in kubelet.service's ExecStart, the
    kubelet behind a wrapper, ``${NAME}`` words from /etc/os-release and Environment=."""
    config = "/etc/kubernetes/credential-providers/ecr-credential-provider.yaml"
    return PlatformNode(
        "OpenShift (RHCOS)",
        "openshift/machine-config-operator templates/worker/01-worker-kubelet/_base/units/"
        "kubelet.service.yaml (the ExecStart, its EnvironmentFile=/etc/os-release and "
        "Environment=KUBELET_LOG_LEVEL) and pkg/controller/template/render.go "
        "credentialProviderConfigFlag (the two flags, per cloud)",
        config,
        OPENSHIFT_BIN,
        {
            "/etc/os-release": _os_release("rhcos", "Red Hat Enterprise Linux CoreOS"),
            "/etc/systemd/system/kubelet.service": (
                "[Unit]\nDescription=Kubernetes Kubelet\nWants=rpc-statd.service crio.service\n\n"
                "[Service]\nType=notify\n"
                "ExecStartPre=/bin/mkdir --parents /etc/kubernetes/manifests\n"
                'Environment="KUBELET_LOG_LEVEL=2"\nEnvironmentFile=/etc/os-release\n'
                "EnvironmentFile=-/etc/kubernetes/kubelet-workaround\n"
                "EnvironmentFile=-/etc/kubernetes/kubelet-env\n\n"
                "ExecStart=/usr/local/bin/kubenswrapper \\\n    /usr/bin/kubelet \\\n"
                "      --config=/etc/kubernetes/kubelet.conf \\\n"
                "      --kubeconfig=/var/lib/kubelet/kubeconfig \\\n"
                "      --node-labels=node-role.kubernetes.io/worker,node.openshift.io/os_id=${ID} \\\n"
                "      --cloud-provider=external \\\n"
                f"      --image-credential-provider-bin-dir={OPENSHIFT_BIN} "
                f"--image-credential-provider-config={config} \\\n"
                "      --v=${KUBELET_LOG_LEVEL}\n\nRestart=always\nRestartSec=10\n"
            ),
            config: _provider("ecr-credential-provider", ("*.dkr.ecr.*.amazonaws.com",), "12h"),
            f"{OPENSHIFT_BIN}/ecr-credential-provider": BINARY,
        },
        (f"{OPENSHIFT_BIN}/ecr-credential-provider",),
    )


def bottlerocket() -> PlatformNode:
    """Bottlerocket: the rendered drop-in exec-start.conf resets and sets ExecStart."""
    config = "/etc/kubernetes/kubelet/credential-provider-config.yaml"
    plugins = "/usr/libexec/kubernetes/kubelet/plugins"
    return PlatformNode(
        "Bottlerocket",
        "bottlerocket-os/bottlerocket packages/kubernetes-*/kubelet-exec-start-conf and "
        "credential-provider-config-yaml templates (platforms.md, Bottlerocket row)",
        config,
        plugins,
        {
            "/etc/os-release": _os_release("bottlerocket", "Bottlerocket"),
            "/usr/lib/systemd/system/kubelet.service": (
                "[Service]\nExecStart=/usr/bin/kubelet --config /etc/kubernetes/kubelet/config\n"
            ),
            "/etc/systemd/system/kubelet.service.d/exec-start.conf": (
                "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet \\\n"
                "    --cloud-provider external \\\n"
                "    --kubeconfig /etc/kubernetes/kubelet/kubeconfig \\\n"
                "    --config /etc/kubernetes/kubelet/config \\\n"
                f"    --image-credential-provider-config {config} \\\n"
                f"    --image-credential-provider-bin-dir {plugins} \\\n"
                "    $KUBELET_EXTRA_ARGS\n"
            ),
            config: _provider("ecr-credential-provider", ("*.dkr.ecr.*.amazonaws.com",), "12h"),
            f"{plugins}/ecr-credential-provider": BINARY,
        },
        (f"{plugins}/ecr-credential-provider",),
    )


def _kubeadm_units(deb: bool, bin_dir: str = "/usr/bin") -> dict[str, str]:
    """kubernetes/release cmd/krel/templates/latest: kubelet/kubelet.service and
    kubeadm/10-kubeadm.conf, whose EnvironmentFile= names /etc/sysconfig/kubelet; the deb's build
    changes it to /etc/default/kubelet (kubeadm/kubeadm.spec). ``bin_dir``: /usr/bin replaced,
    as the kubeadm docs' install without a package manager does."""
    extra = "/etc/default/kubelet" if deb else "/etc/sysconfig/kubelet"
    return {
        "/usr/lib/systemd/system/kubelet.service": (
            "[Unit]\nDescription=kubelet: The Kubernetes Node Agent\n\n[Service]\n"
            f"ExecStart={bin_dir}/kubelet\nRestart=always\nStartLimitInterval=0\nRestartSec=10\n"
        ),
        "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": (
            "[Service]\n"
            'Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/'
            'bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"\n'
            'Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"\n'
            "EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\n"
            f"EnvironmentFile=-{extra}\n"
            "ExecStart=\n"
            f"ExecStart={bin_dir}/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS "
            "$KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS\n"
        ),
    }


def kubeadm_deb() -> PlatformNode:
    """kubeadm from the project's debs: kubelet.service plus kubeadm's drop-in, which passes
    kubeadm-flags.env's KUBELET_KUBEADM_ARGS then /etc/default/kubelet's KUBELET_EXTRA_ARGS."""
    config = "/etc/kubernetes/credential-provider.yaml"
    bin_dir = "/usr/local/lib/credprovider/bin"
    return PlatformNode(
        "kubeadm (deb)",
        "kubernetes/release cmd/krel/templates/latest/kubelet/kubelet.service and "
        "kubeadm/10-kubeadm.conf (the drop-in's EnvironmentFile= lines and ExecStart)",
        config,
        bin_dir,
        {
            "/etc/os-release": _os_release("debian", "Debian GNU/Linux"),
            **_kubeadm_units(deb=True),
            "/var/lib/kubelet/kubeadm-flags.env": (
                'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/'
                'containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10"\n'
            ),
            "/etc/default/kubelet": (
                f"KUBELET_EXTRA_ARGS=--image-credential-provider-config={config} "
                f"--image-credential-provider-bin-dir={bin_dir}\n"
            ),
            config: _provider("ecr-credential-provider", ("*.dkr.ecr.*.amazonaws.com",), "12h"),
        },
    )


def kubeadm_binaries(cloud: str = "") -> PlatformNode:
    """kubeadm installed without a package manager, as the Kubernetes docs install it
    (kubernetes/website content/en/docs/setup/production-environment/tools/kubeadm/
    install-kubeadm.md): the binaries in /usr/local/bin, kubelet.service and 10-kubeadm.conf
    fetched from kubernetes/release cmd/krel/templates/latest with only /usr/bin replaced. So its
    drop-in reads KUBELET_EXTRA_ARGS from /etc/sysconfig/kubelet, as the template has it (only the
    deb's build seds it to /etc/default/kubelet: kubeadm/kubeadm.spec), on any distribution; on
    Ubuntu /etc/default is there and /etc/sysconfig is not, and nothing creates the file. Joined
    with no credential flags yet (``cloud``: its in-tree --cloud-provider), so not one of NODES:
    its kubelet has no config for doctor to name."""
    in_tree = f" --cloud-provider={cloud}" if cloud else ""
    return PlatformNode(
        "kubeadm (binaries)",
        "kubernetes/release cmd/krel/templates/latest/kubelet/kubelet.service and "
        "kubeadm/10-kubeadm.conf as the kubeadm install docs fetch them (EnvironmentFile=-/etc/"
        "sysconfig/kubelet; /usr/bin replaced by /usr/local/bin)",
        "",
        "",
        {
            "/etc/os-release": _os_release("ubuntu", "Ubuntu"),
            "/etc/default/grub": 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=""\n',
            **_kubeadm_units(deb=False, bin_dir="/usr/local/bin"),
            "/var/lib/kubelet/kubeadm-flags.env": (
                'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/'
                f'containerd.sock{in_tree} --pod-infra-container-image=registry.k8s.io/pause:3.10"\n'
            ),
            "/var/lib/kubelet/config.yaml": (
                "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            ),
        },
    )


def talos() -> PlatformNode:
    """Talos: no systemd; machined starts the kubelet with the config at a fixed path."""
    config = "/etc/kubernetes/kubelet-credentialproviderconfig.yaml"
    return PlatformNode(
        "Talos",
        "siderolabs/talos internal/app/machined/pkg/system/services/kubelet.go and the "
        "KubeletSpec controller (the fixed config path, the bin dir mounted read-only)",
        config,
        "/usr/local/lib/kubelet/credentialproviders",
        {
            "/etc/os-release": _os_release("talos", "Talos"),
            config: _provider("ecr-credential-provider", ("*.dkr.ecr.*.amazonaws.com",), "12h"),
            "/usr/local/lib/kubelet/credentialproviders/ecr-credential-provider": BINARY,
        },
        ("/usr/local/lib/kubelet/credentialproviders/ecr-credential-provider",),
    )


def rke2() -> PlatformNode:
    """RKE2 from its tarball, an agent: its unit in /usr/local/lib/systemd/system (no unit of its
    in /etc), its server and token in /etc/rancher/rke2/config.yaml; the credential provider
    paths as k3s'."""
    base = k3s()
    files = {k: v for k, v in base.files.items() if "k3s" not in k}
    files["/etc/rancher/rke2/config.yaml"] = "server: https://10.0.0.2:9345\ntoken: K10fixture\n"
    files["/usr/local/lib/systemd/system/rke2-agent.service"] = (
        "[Unit]\nDescription=Rancher Kubernetes Engine v2 (agent)\n"
        "Wants=network-online.target\nAfter=network-online.target\n"
        "Conflicts=rke2-server.service\n\n[Install]\nWantedBy=multi-user.target\n\n[Service]\n"
        "EnvironmentFile=-/etc/default/rke2-agent\nEnvironmentFile=-/etc/sysconfig/rke2-agent\n"
        "EnvironmentFile=-/usr/local/lib/systemd/system/rke2-agent.env\nKillMode=process\n"
        "Delegate=yes\nRestart=always\nRestartSec=5s\nExecStart=/usr/local/bin/rke2 agent\n"
    )
    return PlatformNode(
        "RKE2",
        "rancher/rke2 bundle/lib/systemd/system/rke2-agent.service (installed from the tarball "
        "into /usr/local: its EnvironmentFile= names /usr/local/lib/systemd/system) and "
        "docs.rke2.io's agent config.yaml; the credential provider paths shared with k3s",
        base.config,
        base.bin_dir,
        files,
        base.executables,
    )


def k3s() -> PlatformNode:
    """A k3s agent as k3s' install script leaves it under systemd: its unit and the unit's
    environment in /etc/systemd/system, no /etc/rancher/k3s (only a server writes its kubeconfig
    there); k3s adds the two flags itself when both the config and the bin dir exist at start."""
    config = "/var/lib/rancher/credentialprovider/config.yaml"
    return PlatformNode(
        "k3s",
        "k3s-io/k3s install.sh (create_systemd_service_file: /etc/systemd/system/k3s-agent.service "
        "and its .env) and pkg/agent/config (the credential provider paths it passes when both "
        "exist)",
        config,
        "/var/lib/rancher/credentialprovider/bin",
        {
            "/etc/os-release": _os_release("ubuntu", "Ubuntu"),
            "/etc/systemd/system/k3s-agent.service": (
                "[Unit]\nDescription=Lightweight Kubernetes\nDocumentation=https://k3s.io\n"
                "Wants=network-online.target\nAfter=network-online.target\n\n[Install]\n"
                "WantedBy=multi-user.target\n\n[Service]\nType=notify\n"
                "EnvironmentFile=-/etc/default/%N\nEnvironmentFile=-/etc/sysconfig/%N\n"
                "EnvironmentFile=-/etc/systemd/system/k3s-agent.service.env\nKillMode=process\n"
                "Delegate=yes\nUser=root\nRestart=always\nRestartSec=5s\n"
                "ExecStart=/usr/local/bin/k3s \\\n    agent \\\n\n"
            ),
            "/etc/systemd/system/k3s-agent.service.env": (
                "K3S_URL=https://10.0.0.2:6443\nK3S_TOKEN=K10fixture\n"
            ),
            config: _provider("ecr-credential-provider", ("*.dkr.ecr.*.amazonaws.com",), "12h"),
            "/var/lib/rancher/credentialprovider/bin/ecr-credential-provider": BINARY,
        },
        ("/var/lib/rancher/credentialprovider/bin/ecr-credential-provider",),
    )


GARDENER_CONFIG = "/opt/gardener/ecr-credential-provider-config.json"


def gardener() -> PlatformNode:
    """Gardener on AWS: gardener-node-agent writes kubelet.service with ``$KUBELET_EXTRA_ARGS``
    from /var/lib/kubelet/extra_args; the AWS provider extension's webhook adds both flags inline
    to its ExecStart (serialized with backslash continuations), and writes its JSON config (1h)
    and the plugin in /opt/bin."""
    providers = (
        '{"kind":"CredentialProviderConfig","apiVersion":"kubelet.config.k8s.io/v1",'
        '"providers":[{"name":"ecr-credential-provider","matchImages":["*.dkr.ecr.*.amazonaws.com",'
        '"*.dkr.ecr.*.amazonaws.com.cn","*.dkr.ecr-fips.*.amazonaws.com",'
        '"*.dkr.ecr.us-iso-east-1.c2s.ic.gov","*.dkr.ecr.us-isob-east-1.sc2s.sgov.gov"],'
        '"defaultCacheDuration":"1h0m0s","apiVersion":"credentialprovider.kubelet.k8s.io/v1"}]}'
    )
    return PlatformNode(
        "Gardener",
        "gardener/gardener-extension-provider-aws pkg/webhook/controlplane/ensurer.go "
        "(EnsureKubeletServiceUnitOptions: --image-credential-provider-config="
        "/opt/gardener/ecr-credential-provider-config.json and -bin-dir=/opt/bin/ into the "
        "ExecStart; credentialProviderConfigFile: its JSON, 0755, 1h; the plugin in /opt/bin) "
        "and gardener's kubelet unit (EnvironmentFile=-/var/lib/kubelet/extra_args, "
        "$KUBELET_EXTRA_ARGS: platforms.md, Gardener row)",
        GARDENER_CONFIG,
        "/opt/bin/",
        {
            "/etc/os-release": _os_release("gardenlinux", "Garden Linux"),
            "/etc/systemd/system/kubelet.service": (
                "[Unit]\nDescription=kubelet daemon\nAfter=containerd.service\n\n"
                "[Install]\nWantedBy=multi-user.target\n\n[Service]\nRestart=always\n"
                "RestartSec=5\nEnvironmentFile=/etc/environment\n"
                "EnvironmentFile=-/var/lib/kubelet/extra_args\n"
                "ExecStart=/opt/bin/kubelet \\\n"
                "    --bootstrap-kubeconfig=/var/lib/kubelet/kubeconfig-bootstrap \\\n"
                "    --config=/var/lib/kubelet/config/kubelet \\\n"
                "    --kubeconfig=/var/lib/kubelet/kubeconfig-real \\\n"
                "    --node-labels=worker.gardener.cloud/kubernetes-version=1.33.4 \\\n"
                "    --v=2 \\\n    $KUBELET_EXTRA_ARGS \\\n"
                "    --cloud-provider=external \\\n"
                f"    --image-credential-provider-config={GARDENER_CONFIG} \\\n"
                "    --image-credential-provider-bin-dir=/opt/bin/\n"
            ),
            "/etc/environment": "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin\n",
            GARDENER_CONFIG: providers,
            "/opt/bin/ecr-credential-provider": BINARY,
            "/opt/bin/kubelet": BINARY,
        },
        ("/opt/bin/ecr-credential-provider", "/opt/bin/kubelet"),
    )


def k0s() -> PlatformNode:
    """k0s: no provider config of its own; ``k0s install worker --kubelet-extra-args`` saves the
    kubelet's flags in the k0sworker unit's ExecStart, and k0s passes them to the kubelet it runs
    (platforms.md, k0s row). Here they name the agent's own files, as agent apply writes them."""
    config = "/etc/kubernetes/image-credential-provider-config.yaml"
    bin_dir = "/var/lib/credprovider/agent/bin"
    extra = (
        f"--image-credential-provider-config={config} --image-credential-provider-bin-dir={bin_dir}"
    )
    return PlatformNode(
        "k0s",
        "k0sproject/k0s pkg/install (the k0sworker unit; --kubelet-extra-args kept in its "
        "ExecStart: platforms.md, k0s row)",
        config,
        bin_dir,
        {
            "/etc/os-release": _os_release("ubuntu", "Ubuntu"),
            "/etc/systemd/system/k0sworker.service": (
                "[Unit]\nDescription=k0s - Zero Friction Kubernetes\n"
                "After=network-online.target\nWants=network-online.target\n\n[Service]\n"
                "StartLimitInterval=5\nStartLimitBurst=10\n"
                "ExecStart=/usr/local/bin/k0s worker --token-file=/etc/k0s/k0stoken "
                f"--kubelet-extra-args='{extra}'\n\nRestartSec=10\nRestart=always\n\n"
                "[Install]\nWantedBy=multi-user.target\n"
            ),
            "/etc/k0s/k0stoken": "a join token\n",
            config: _provider("ecr-credential-provider", ("*.dkr.ecr.*.amazonaws.com",), "12h"),
            f"{bin_dir}/ecr-credential-provider": BINARY,
            "/usr/local/bin/k0s": BINARY,
        },
        (f"{bin_dir}/ecr-credential-provider", "/usr/local/bin/k0s"),
    )


NODES: tuple[Callable[[], PlatformNode], ...] = (
    gke, gce_kube_up, eks_al2023, eks_al2023_node_config_flags, eks_al2, aks, kops,
    flatcar_kubeadm, cluster_api_ecr, rke2, openshift, bottlerocket, kubeadm_deb, talos, k3s,
    gardener, k0s,
)  # fmt: skip

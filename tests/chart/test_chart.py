"""charts/credprovider: ``helm lint`` is clean, and what ``helm template`` renders is the agent in
mode files with least privilege (no hostPID, every capability dropped, a read-only root, only the
directories it writes in mounted (by default its own only), no API token, tainted nodes only when
tolerated; the node's network, so as not to wait for the CNI),
by digest when one is given; in mode flags, only what restarting kubelets one node at a time needs
(the host directories and systemd's socket, still no hostPID and no capability, RBAC for its node,
Leases and Events, and a policy keeping it to its own node); values the chart cannot honour fail
the render with one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from credprovider.paths import AGENT_BIN_DIR, AGENT_CONFIG
from tests.chart.helm import CHART, agent_pod, documents, helm_binary, render


@pytest.fixture(scope="module")
def helm() -> Path:
    return helm_binary()


def test_helm_lint_is_clean(helm: Path) -> None:
    done = subprocess.run(
        [str(helm), "lint", str(CHART), "--strict", "--set", "image.repository=registry.example.com/c"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_the_agent_runs_with_least_privilege(helm: Path) -> None:
    rendered = documents(
        helm, "image.repository=registry.example.com/platform/credprovider",
        "image.digest=sha256:" + "a" * 64, "providers={aws,gcp}",
    )  # fmt: skip
    assert sorted(rendered) == ["DaemonSet", "ServiceAccount"]  # no role, no binding
    pod = rendered["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert rendered["ServiceAccount"]["automountServiceAccountToken"] is False
    assert not pod.get("hostPID") and not pod.get("hostIPC")
    # the node's network: the agent must not wait for the CNI, whose images may need it
    assert (pod["hostNetwork"], pod["dnsPolicy"]) == (True, "Default")
    [container] = pod["containers"]
    assert container["image"] == "registry.example.com/platform/credprovider@sha256:" + "a" * 64
    assert container["securityContext"] == {
        "runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }  # fmt: skip
    assert container["args"] == [
        "agent", "run", "--root=/host", "--bundle=/credprovider-0.1.0",
        "--version=0.1.0", "--providers=aws,gcp", "--files-only",
        f"--bin-dir={AGENT_BIN_DIR}", f"--config={AGENT_CONFIG}",
    ]  # fmt: skip
    # only the agent's own directory of the host (and the node's lock): never /etc/kubernetes
    host = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
    assert sorted((h["path"], h["type"]) for h in host.values()) == [
        ("/run/credprovider", "DirectoryOrCreate"), ("/var/lib/credprovider", "DirectoryOrCreate"),
    ]  # fmt: skip
    # tainted nodes (control planes) only when tolerated; a node still coming up (not yet
    # initialized by the cloud controller manager, its network not ready) is not left out
    assert pod["tolerations"] == [
        {"key": key, "operator": "Exists", "effect": "NoSchedule"}
        for key in ("node.cloudprovider.kubernetes.io/uninitialized", "node.kubernetes.io/not-ready",
                    "node.kubernetes.io/network-unavailable")
    ]  # fmt: skip
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert all(mounts[name] == "/host" + h["path"] for name, h in host.items())
    strategy = rendered["DaemonSet"]["spec"]["updateStrategy"]
    # one agent per node at a time (no surge), and time for a change under way to end on SIGTERM
    assert strategy == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert rendered["DaemonSet"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 120


def test_uninstall_and_paths_of_ones_own(helm: Path) -> None:
    rendered = documents(
        helm, "image.repository=r/c", "action=uninstall",
        "paths.binDir=/opt/credential-providers/bin", "paths.config=/etc/kubelet/providers.yaml",
    )  # fmt: skip
    [container] = rendered["DaemonSet"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "r/c:0.1.0"
    assert container["args"][:3] == ["agent", "run", "--uninstall"]
    assert "--files-only" in container["args"]
    paths = sorted(
        v["hostPath"]["path"]
        for v in rendered["DaemonSet"]["spec"]["template"]["spec"]["volumes"]
        if "hostPath" in v
    )
    # the bin dir itself and the config's directory, not the bin dir's parent
    assert paths == [
        "/etc/kubelet", "/opt/credential-providers/bin", "/run/credprovider", "/var/lib/credprovider",
    ]  # fmt: skip


def test_the_registries_plugin_with_its_settings_reaches_the_agent(helm: Path) -> None:
    settings = ["providerSettings.registries.matchImages={quay.example.com}",
                "providerSettings.registries.args={--backend,quay,--url,https://quay.example.com,"
                "--robot,team+puller}",
                "providerSettings.registries.tokenAttributes.serviceAccountTokenAudience=q",
                "providerSettings.registries.tokenAttributes.cacheType=Token",
                "providerSettings.registries.tokenAttributes.requireServiceAccount=true",
                ]  # fmt: skip
    pod = agent_pod(helm, "image.repository=r/c", "providers={registries}", *settings)
    (agent,) = [c for c in pod["containers"] if "--providers=registries" in c["args"]]
    (given,) = [a for a in agent["args"] if a.startswith("--provider-settings=")]
    parsed = json.loads(given.partition("=")[2])
    assert parsed["registries"]["args"][:2] == ["--backend", "quay"]


def test_every_node_when_told(helm: Path) -> None:
    rendered = documents(helm, "image.repository=r/c", "tolerations[0].operator=Exists")
    pod = rendered["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"operator": "Exists"}]


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ((), "image.repository is required: where make release REGISTRY=... pushed the image"),
        # values.schema.json: every value typed, unknown keys refused
        (("image.repository=r/c", "mode=managed"), "at '/mode': value must be one of 'files', 'flags'"),
        (("image.repository=r/c", "providerSettings.gcp.args={-v=2}"),
         "providerSettings.gcp: gcp is not in providers"),
        (("image.repository=r/c", "mode=flags"),
         "mode flags needs flags.platform, the nodes' platform: one of aks, auto, eks, gke, k0s, "
         "k3s, kubeadm, kubeadm-rpm, rke2 (auto: the agent finds the layout itself"),
        (("image.repository=r/c", "mode=flags", "flags.platform=ubuntu"), "at '/flags/platform'"),
        (("image.repository=r/c", "mode=flags", "flags.platform=kubeadm",
          "flags.extraHostPaths[0].path=relative"), "at '/flags/extraHostPaths/0/path'"),
        (("image.repository=r/c", "mode=flags", "flags.platform=kubeadm", "flags.slots=0"),
         "at '/flags/slots': minimum: got 0, want 1"),
        (("image.repository=r/c", "mode=flags", "flags.platform=kubeadm", "flags.slots=100000"),
         "at '/flags/slots': maximum: got 100,000, want 5,000"),
        (("image.repository=r/c", "action=remove"),
         "at '/action': value must be one of 'install', 'uninstall'"),
        (("image.repository=r/c", "providers={aws,ibm}"),
         "at '/providers/1': value must be one of 'aws', 'azure', 'gcp', 'registries'"),
        # the opt-in plugin names nothing itself: each of its three settings is required
        (("image.repository=r/c", "providers={aws,registries}"),
         "providerSettings.registries.matchImages is required: the registries plugin"),
        (("image.repository=r/c", "providers={registries}",
          "providerSettings.registries.matchImages={quay.example.com}",
          "providerSettings.registries.args={--backend,quay}"),
         "providerSettings.registries.tokenAttributes is required"),
        (("image.repository=r/c", "slots=2"), "at '': additional properties 'slots' not allowed"),
        (("image.repository=r/c", "flags.slot=3"),
         "at '/flags': additional properties 'slot' not allowed"),
        (("image.repository=r/c", "flags.healthTimeout=soon"),
         "at '/flags/healthTimeout': got string, want integer"),
        (("image.repository=r/c", "providerSettings.aws.matchimages={x}"),
         "at '/providerSettings/aws': additional properties 'matchimages' not allowed"),
        # a provider's settings, as the kubelet decodes them (the agent then validates them too)
        (("image.repository=r/c", "providerSettings.aws.defaultCacheDuration=5x"),
         "at '/providerSettings/aws/defaultCacheDuration': '5x' does not match pattern"),
        (("image.repository=r/c", "providerSettings.gcp.tokenAttributes.cacheType=token"),
         "at '/providerSettings/gcp/tokenAttributes': missing properties "
         "'serviceAccountTokenAudience', 'requireServiceAccount'"),
        (("image.repository=r/c", "providerSettings.azure.tokenAttributes.audience=x"),
         "additional properties 'audience' not allowed"),
        (("image.repository=r/c", "providerSettings.aws.matchImages[0]="),
         "at '/providerSettings/aws/matchImages/0': minLength: got 0, want 1"),
        (("image.repository=r/c", "paths.binDir=relative/bin"), "at '/paths/binDir'"),
        (("image.repository=r/c", "image.digest=sha256:abc"), "at '/image/digest'"),
        # a config's directory holding the node's credentials is never mounted whole
        (("image.repository=r/c", "paths.config=/etc/kubernetes/providers.yaml"),
         "paths.config: its directory /etc/kubernetes would be mounted writable whole"),
        (("image.repository=r/c", "paths.config=/var/lib/kubelet/providers.yaml"),
         "paths.config: its directory /var/lib/kubelet would be mounted writable whole"),
    ],
)  # fmt: skip
def test_values_it_cannot_honour_fail_the_render(
    helm: Path, values: tuple[str, ...], said: str
) -> None:
    done = render(helm, *values)
    assert done.returncode == 1 and done.stdout == ""
    assert said in done.stderr


@pytest.mark.parametrize(
    "duration",
    ["0", "+0", "30s", "12h", "1h30m", "1.5h", ".5s", "5.s", "10\u00b5s", "10\u03bcs", "300ms",
     "2ns", "5x", "-5m", "5", "", ".s", "1h-5m", "s", "0s", "00", "1e3s", " 5s", "5s "],
)  # fmt: skip
def test_the_schemas_duration_is_the_kubelets(duration: str) -> None:
    """The schema's defaultCacheDuration pattern takes what Go's time.ParseDuration takes (the
    runtime's reading of it, held to Go's own by its unit tests) and the kubelet allows (not
    negative): one fact, checked where Helm renders and again by the agent."""
    import json
    import re

    from credprovider.runtime.goformat import DurationError, parse_go_duration

    schema = json.loads((CHART / "values.schema.json").read_text())
    pattern = schema["definitions"]["providerSettings"]["properties"]["defaultCacheDuration"]
    try:
        kubelet_takes = parse_go_duration(duration) >= 0
    except DurationError:
        kubelet_takes = False
    assert bool(re.search(pattern["pattern"], duration)) == kubelet_takes


def test_mode_flags_asks_for_what_restarting_kubelets_needs(helm: Path) -> None:
    done = render(
        helm, "image.repository=r/c", "mode=flags", "flags.platform=kubeadm", "flags.slots=2", "providers={aws,azure}",
        namespace="credprovider",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # what helm uninstall's pre-delete hook adds is test_helm_uninstall_restores_the_nodes_first's
    docs = [
        doc
        for doc in yaml.safe_load_all(done.stdout)
        if doc and "helm.sh/hook" not in (doc["metadata"].get("annotations") or {})
    ]
    kinds = sorted((doc["kind"], doc["metadata"].get("namespace", "")) for doc in docs)
    assert kinds == [
        ("ClusterRole", ""), ("ClusterRoleBinding", ""), ("DaemonSet", "credprovider"),
        ("Role", "credprovider"), ("Role", "default"), ("RoleBinding", "credprovider"),
        ("RoleBinding", "default"), ("ServiceAccount", "credprovider"),
        ("ValidatingAdmissionPolicy", ""), ("ValidatingAdmissionPolicyBinding", ""),
    ]  # fmt: skip
    rules = {
        (doc["kind"], doc["metadata"].get("namespace", "")): doc["rules"]
        for doc in docs
        if doc["kind"] in ("ClusterRole", "Role")
    }
    assert rules == {
        ("ClusterRole", ""): [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
            {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]},
        ],
        ("Role", "credprovider"): [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "verbs": ["get", "create", "update", "patch"]},
        ],
        ("Role", "default"): [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}],
    }  # fmt: skip
    [daemonset] = [doc for doc in docs if doc["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True and not pod.get("hostPID")
    [container] = pod["containers"]
    # the same as mode files: restarts go over systemd's socket, which needs no capability
    assert container["securityContext"] == {
        "runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }  # fmt: skip
    args = container["args"]
    assert "--files-only" not in args and "--node=$(NODE_NAME)" in args and "--slots=2" in args
    assert "--providers=aws,azure" in args and "--ready-file=/tmp/ready" in args
    assert "--systemd-socket=/host/run/systemd/private" in args
    assert container["readinessProbe"]["exec"]["command"] == [
        "/credprovider-0.1.0/credprovider", "agent", "ready", "--ready-file=/tmp/ready",
    ]  # fmt: skip
    env = {item["name"]: item.get("valueFrom", item.get("value")) for item in container["env"]}
    assert env == {
        "NODE_NAME": {"fieldRef": {"fieldPath": "spec.nodeName"}},
        "POD_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "HOST_IP": {"fieldRef": {"fieldPath": "status.hostIP"}},
    }
    assert "--platform=kubeadm" in args
    mounts = {m["mountPath"]: m.get("readOnly", False) for m in container["volumeMounts"]}
    assert mounts == {
        "/tmp": False, "/host/var/lib/credprovider": False, "/host/etc/default": False,
        "/host/var/lib/kubelet/kubeadm-flags.env": True, "/host/etc/systemd/system": True,
        "/host/usr/lib/systemd": True, "/host/lib/systemd": True,
        "/host/run/systemd": False, "/host/run/credprovider": False,
    }  # fmt: skip
    [policy] = [doc for doc in docs if doc["kind"] == "ValidatingAdmissionPolicy"]
    assert "system:serviceaccount:credprovider:fleet-agent" in str(policy["spec"])


def test_flags_beside_reaches_the_agent_only_when_set(helm: Path) -> None:
    """flags.beside: ours beside the platform's own plugin, not in its place (agent --beside)."""
    values = ("image.repository=r/c", "mode=flags", "flags.platform=gke")
    [default] = agent_pod(helm, *values)["containers"]
    [beside] = agent_pod(helm, *values, "flags.beside=true")["containers"]
    assert "--beside" not in default["args"]
    assert "--beside" in beside["args"] and "--platform=gke" in beside["args"]


def _hooks(done: subprocess.CompletedProcess[str]) -> list[dict[str, object]]:
    assert done.returncode == 0, done.stderr
    return [
        doc
        for doc in yaml.safe_load_all(done.stdout)
        if doc and "helm.sh/hook" in (doc["metadata"].get("annotations") or {})
    ]


def test_helm_uninstall_restores_the_nodes_first(helm: Path) -> None:
    """Mode flags: a pre-delete hook (a Job, with its own account) runs credprovider fleet
    uninstall before helm deletes anything. It may read nodes and patch this release's DaemonSet
    only, runs as nobody with nothing, and is gone once it succeeded (kept when it fails, for its
    log). Mode files sets no flag, so helm uninstall has nothing to put back; false turns it off."""
    hooks = _hooks(
        render(
            helm,
            "image.repository=r/c",
            "mode=flags",
            "flags.platform=kubeadm",
            namespace="credprovider",
        )
    )
    assert {doc["metadata"]["annotations"]["helm.sh/hook"] for doc in hooks} == {"pre-delete"}  # type: ignore[index]
    assert {doc["metadata"]["annotations"]["helm.sh/hook-delete-policy"] for doc in hooks} == {  # type: ignore[index]
        "before-hook-creation,hook-succeeded"
    }
    by_kind = {str(doc["kind"]): doc for doc in hooks}
    assert sorted(by_kind) == [
        "ClusterRole", "ClusterRoleBinding", "Job", "Role", "RoleBinding", "ServiceAccount",
    ]  # fmt: skip
    assert by_kind["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}
    ]
    assert by_kind["Role"]["rules"] == [
        {"apiGroups": ["apps"], "resources": ["daemonsets"], "resourceNames": ["fleet-agent"],
         "verbs": ["get", "patch"]},
    ]  # fmt: skip
    job = by_kind["Job"]
    assert job["metadata"]["annotations"]["helm.sh/hook-weight"] == "0"  # type: ignore[index]
    assert all(
        doc["metadata"]["annotations"]["helm.sh/hook-weight"] == "-10"  # type: ignore[index]
        for doc in hooks
        if doc["kind"] != "Job"
    )
    spec = job["spec"]  # type: ignore[index]
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == 900 + 120
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == "fleet-uninstall" and "volumes" not in pod
    [container] = pod["containers"]
    assert container["args"] == [
        "fleet", "uninstall", "--namespace=credprovider", "--daemonset=fleet-agent",
        "--timeout=900",
    ]  # fmt: skip
    assert container["securityContext"] == {
        "runAsUser": 65534, "runAsNonRoot": True, "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }  # fmt: skip
    assert _hooks(render(helm, "image.repository=r/c")) == []
    assert _hooks(render(helm, "image.repository=r/c", "mode=flags", "flags.platform=kubeadm",
                         "flags.uninstallOnDelete=false")) == []  # fmt: skip
    short = render(
        helm,
        "image.repository=r/c",
        "mode=flags",
        "flags.platform=kubeadm",
        "flags.uninstallTimeout=30",
    )
    assert short.returncode != 0 and "uninstallTimeout" in short.stderr  # below a minute


def test_the_own_node_policy_is_rendered_where_tokens_name_their_node(helm: Path) -> None:
    import subprocess as run

    from tests.chart.helm import CHART

    def rendered(version: str, *more: str) -> run.CompletedProcess[str]:
        return run.run(
            [str(helm), "template", "fleet", str(CHART), "--kube-version", version,
             "--set", "image.repository=r/c", "--set", "mode=flags", "--set", "flags.platform=kubeadm", *more],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    def kinds(version: str, *more: str) -> set[str]:
        done = rendered(version, *more)
        assert done.returncode == 0, done.stderr
        return {doc["kind"] for doc in yaml.safe_load_all(done.stdout) if doc}

    assert "ValidatingAdmissionPolicy" in kinds("1.32.0")
    # before 1.32 nothing keeps the token to its node: mode flags is refused, the oldest accepted
    # version included, unless the operator accepts that any agent may patch any Node
    for old in ("1.26.0", "1.31.9"):
        refused = rendered(old)
        assert refused.returncode != 0
        assert f"mode flags on Kubernetes v{old}: before 1.32" in refused.stderr
        assert "use mode files there, or set flags.ownNodeOnly=false" in refused.stderr
        accepted = kinds(old, "--set", "flags.ownNodeOnly=false")
        assert "ValidatingAdmissionPolicy" not in accepted and "ClusterRole" in accepted
    # mode files asks the API server for nothing, on every version
    files = run.run(
        [str(helm), "template", "fleet", str(CHART), "--kube-version", "1.26.0",
         "--set", "image.repository=r/c"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert {d["kind"] for d in yaml.safe_load_all(files.stdout) if d} == {
        "DaemonSet",
        "ServiceAccount",
    }


def test_provider_settings_reach_the_agent_as_one_json_argument(helm: Path) -> None:
    import json

    rendered = documents(
        helm, "image.repository=r/c", "providers={aws}",
        "providerSettings.aws.matchImages={registry.internal.example}",
        "providerSettings.aws.env.AWS_REGION=eu-west-1",
    )  # fmt: skip
    [container] = rendered["DaemonSet"]["spec"]["template"]["spec"]["containers"]
    [given] = [arg for arg in container["args"] if arg.startswith("--provider-settings=")]
    assert json.loads(given.split("=", 1)[1]) == {
        "aws": {"matchImages": ["registry.internal.example"], "env": {"AWS_REGION": "eu-west-1"}}
    }
    plain = documents(helm, "image.repository=r/c")
    [container] = plain["DaemonSet"]["spec"]["template"]["spec"]["containers"]
    assert not any(arg.startswith("--provider-settings") for arg in container["args"])


def test_mode_flags_can_be_told_where_the_api_server_is(helm: Path) -> None:
    rendered = documents(
        helm, "image.repository=r/c", "mode=flags", "flags.platform=kubeadm", "flags.apiServer.host=10.0.0.1",
        "flags.ownNodeOnly=false", "flags.env.AWS_REGION=eu-west-1",
    )  # fmt: skip
    assert "ValidatingAdmissionPolicy" not in rendered
    [container] = rendered["DaemonSet"]["spec"]["template"]["spec"]["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["KUBERNETES_SERVICE_HOST"] == "10.0.0.1"
    assert env["KUBERNETES_SERVICE_PORT"] == "443"
    assert env["AWS_REGION"] == "eu-west-1"


def test_the_schema_and_the_values_name_the_same_keys() -> None:
    """values.yaml (the defaults and their comments) and values.schema.json describe one set of
    values: no key documented in one and missing from the other."""
    import json

    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def keys(node: dict[str, object], prefix: str = "") -> set[str]:
        found = set()
        for key, sub in node.items():
            found.add(prefix + key)
            if isinstance(sub, dict) and sub:
                found |= keys(sub, f"{prefix}{key}.")
        return found

    def schema_keys(node: dict[str, object], prefix: str = "") -> set[str]:
        found = set()
        for key, sub in (node.get("properties") or {}).items():  # type: ignore[attr-defined]
            found.add(prefix + key)
            if isinstance(sub, dict) and "properties" in sub and key != "providerSettings":
                found |= schema_keys(sub, f"{prefix}{key}.")
        return found

    documented = keys(values) - {"resources.requests.cpu", "resources.requests.memory"}
    documented -= {"resources.limits.memory", "resources.requests", "resources.limits"}
    documented -= {"nodeSelector.kubernetes.io/os"}
    assert schema_keys(schema) - {"global"} == documented


# What mode flags mounts of the host on each platform, by hand from each platform's own docs (the
# agent's rows, credprovider/tool/agent/platforms.py): (path, read-only, hostPath type). Every
# platform also mounts the agent's home, and all but k3s and RKE2 the unit directories, read-only.
HOME = ("/var/lib/credprovider", False, "DirectoryOrCreate")
UNITS = [("/etc/systemd/system", True, "Directory"), ("/usr/lib/systemd", True, "Directory"),
         ("/lib/systemd", True, "Directory")]  # fmt: skip
KUBEADM_ENV = ("/var/lib/kubelet/kubeadm-flags.env", True, "File")
RANCHER = ("/var/lib/rancher/credentialprovider", False, "DirectoryOrCreate")
MOUNTS = {
    "kubeadm": [HOME, ("/etc/default", False, "Directory"), KUBEADM_ENV, *UNITS],
    "kubeadm-rpm": [HOME, ("/etc/sysconfig", False, "Directory"), KUBEADM_ENV, *UNITS],
    # no unit directory: systemd names their units, and k3s' install.sh keeps the node's join
    # token in its unit's environment file (/etc/systemd/system/k3s*.service.env)
    "k3s": [HOME, RANCHER],
    "rke2": [HOME, RANCHER],
    "k0s": [HOME, ("/etc/systemd/system", False, "Directory"), *UNITS[1:]],
    "eks": [HOME, ("/etc/eks/image-credential-provider", False, "Directory"), *UNITS],
    "aks": [HOME, ("/var/lib/kubelet", False, "Directory"), *UNITS,
            ("/etc/kubernetes/azure.json", True, "File")],
    "gke": [HOME, ("/etc/srv/kubernetes", False, "Directory"),
            ("/home/kubernetes/bin", False, "Directory"), *UNITS],
    "auto": [("/etc", False, "Directory"), ("/var/lib", False, "Directory"),
             ("/usr/lib/systemd", True, "Directory")],
}  # fmt: skip
# Always, beside the platform's: the node's lock and systemd's socket.
FIXED = [("/run/credprovider", False, "DirectoryOrCreate"), ("/run/systemd", False, "Directory")]


@pytest.mark.parametrize("platform", sorted(MOUNTS))
def test_mode_flags_mounts_only_what_its_platform_needs(helm: Path, platform: str) -> None:
    rendered = documents(
        helm, "image.repository=r/c", "mode=flags", f"flags.platform={platform}",
        "flags.extraHostPaths[0].path=/etc/pki/ca.pem", "flags.extraHostPaths[0].type=File",
    )  # fmt: skip
    pod = rendered["DaemonSet"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert f"--platform={platform}" in container["args"]
    # the same hardening and the same API access on every platform
    assert container["securityContext"] == {
        "runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }  # fmt: skip
    assert not pod.get("hostPID") and not pod.get("hostIPC")
    everything = render(helm, "image.repository=r/c", "mode=flags", f"flags.platform={platform}")
    roles = [
        doc["rules"]
        for doc in yaml.safe_load_all(everything.stdout)
        if doc and doc["kind"] == "ClusterRole"
        and "helm.sh/hook" not in (doc["metadata"].get("annotations") or {})
    ]  # fmt: skip
    assert roles == [[
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]},
    ]]  # fmt: skip
    assert "ValidatingAdmissionPolicy" in rendered
    mounted = {m["name"]: m for m in container["volumeMounts"]}
    found = []
    for volume in pod["volumes"]:
        if "hostPath" in volume:
            mount = mounted[volume["name"]]
            assert mount["mountPath"] == "/host" + volume["hostPath"]["path"]
            found.append(
                (
                    volume["hostPath"]["path"],
                    mount.get("readOnly", False),
                    volume["hostPath"]["type"],
                )
            )
    extra = ("/etc/pki/ca.pem", True, "File")  # the operator's, read-only
    assert sorted(found) == sorted([*MOUNTS[platform], *FIXED, extra])
    # never a control plane's keys, on any platform: /etc/kubernetes is not mounted whole
    assert not any(path in ("/", "/etc/kubernetes") for path, _, _ in found)


def test_the_charts_platform_table_is_the_agents() -> None:
    """platforms.yaml is what release/chartplatforms.py writes from the agent's own table, and the
    schema offers exactly its values."""
    import json

    from release.chartplatforms import TABLE, text

    assert TABLE.read_text() == text(), "run: python -m release.chartplatforms"
    schema = json.loads((CHART / "values.schema.json").read_text())
    offered = schema["properties"]["flags"]["properties"]["platform"]["enum"]
    assert sorted(offered) == sorted(["", *yaml.safe_load(text())])

"""The node agent's plan on each kind of node, from fixture roots (what the node's files would be):
what it places, links, writes or merges, which flags file it edits and how it reads afterwards,
what it restarts, or why it changes nothing (credprovider/tool/agent/)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from credprovider.tool.agent.plan import AgentPlan, plan_node
from credprovider.tool.node.kubelet_facts import SA_TOKEN_GATE
from credprovider.tool.node.root import NodeRoot

A = "/var/lib/credprovider/agent"
KUBEADM_DROP_IN = "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"
OWN_CONFIG = "/etc/kubernetes/image-credential-provider-config.yaml"
FLAGS = (
    f"--image-credential-provider-config={OWN_CONFIG} --image-credential-provider-bin-dir={A}/bin"
)


def node(tmp_path: Path, files: dict[str, str], links: dict[str, str] | None = None) -> str:
    root = tmp_path / "root"
    root.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.endswith("/"):
            target.mkdir(exist_ok=True)
        else:
            target.write_text(text)
    for path, target in (links or {}).items():
        link = root / path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, link)
    return str(root)


def steps(plan: AgentPlan) -> list[tuple[str, str]]:
    return [(step.action, step.path) for step in plan.steps]


def providers(plan: AgentPlan) -> list[str]:
    assert plan.config_text is not None
    return [p["name"] for p in yaml.safe_load(plan.config_text)["providers"]]


KUBEADM_NODE = {
    KUBEADM_DROP_IN: "[Service]\nEnvironmentFile=-/etc/default/kubelet\n",
    "/var/lib/kubelet/kubeadm-flags.env": 'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5"\n',
    "/lib/systemd/system/kubelet.service": "[Service]\n",
}


def test_kubeadm_on_debian_adds_the_flags_to_kubelet_extra_args(tmp_path: Path) -> None:
    root = node(tmp_path, {**KUBEADM_NODE, "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n"})
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    assert (plan.platform, plan.evidence, plan.refused) == ("kubeadm", KUBEADM_DROP_IN, "")
    assert steps(plan) == [
        ("place", f"{A}/versions/0.1.0"),
        ("switch", f"{A}/current"),
        ("link", f"{A}/bin/ecr-credential-provider"),
        ("write", OWN_CONFIG),
        ("flags", "/etc/default/kubelet"),
        ("restart", "kubelet"),
    ]
    assert plan.flag_text == f'KUBELET_EXTRA_ARGS="--v=2 {FLAGS}"\n'
    assert providers(plan) == ["ecr-credential-provider"]


def test_kubeadm_on_rhel_creates_the_sysconfig_file(tmp_path: Path) -> None:
    root = node(tmp_path, {**KUBEADM_NODE, "/etc/sysconfig/": ""})
    plan = plan_node(NodeRoot.at(root), ["aws", "gcp"], "0.1.0")
    assert (plan.flag_file, plan.flag_text) == (
        "/etc/sysconfig/kubelet",
        f'KUBELET_EXTRA_ARGS="{FLAGS}"\n',  # the line migrate adds (flagedit.extra_args_place)
    )
    assert providers(plan) == ["ecr-credential-provider", "auth-provider-gcp"]


def test_wrong_flags_are_replaced_not_doubled(tmp_path: Path) -> None:
    stale = "KUBELET_EXTRA_ARGS='--image-credential-provider-config=/old.yaml --v=2'\n"
    root = node(tmp_path, {**KUBEADM_NODE, "/etc/default/kubelet": stale})
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    assert plan.flag_text == f"KUBELET_EXTRA_ARGS='--v=2 {FLAGS}'\n"


def installed(tmp_path: Path, version: str = "0.1.0", current: str = "0.1.0") -> str:
    """A kubeadm node the agent already installed ``version`` on (``current`` in use)."""
    config = plan_node(
        NodeRoot.at(node(tmp_path / "first", dict(KUBEADM_NODE))), ["aws"], version
    ).config_text
    assert config is not None
    files = {
        **KUBEADM_NODE,
        "/etc/default/kubelet": f"KUBELET_EXTRA_ARGS='{FLAGS}'\n",
        OWN_CONFIG: config,
        f"{A}/versions/{version}/": "",
    }
    links = {
        f"{A}/current": f"versions/{current}",
        f"{A}/bin/ecr-credential-provider": f"{A}/current/ecr-credential-provider",
    }
    return node(tmp_path, files, links)


def test_a_node_already_installed_is_left_alone(tmp_path: Path) -> None:
    plan = plan_node(NodeRoot.at(installed(tmp_path)), ["aws"], "0.1.0")
    assert {action for action, _ in steps(plan)} == {"unchanged"}
    assert (plan.restart, plan.changes_kubelet_input) == ("", False)


def test_an_upgrade_re_points_current_and_restarts_nothing(tmp_path: Path) -> None:
    plan = plan_node(NodeRoot.at(installed(tmp_path, "0.0.9", current="0.0.9")), ["aws"], "0.1.0")
    assert steps(plan)[:2] == [("place", f"{A}/versions/0.1.0"), ("switch", f"{A}/current")]
    assert plan.steps[1].detail == f"{A}/current -> versions/0.1.0 (from 0.0.9, no restart needed)"
    assert (plan.restart, plan.changes_kubelet_input) == ("", False)


@pytest.mark.parametrize(
    ("files", "platform", "config", "restart"),
    [
        ({"/etc/rancher/k3s/": "", "/etc/systemd/system/k3s-agent.service": ""}, "k3s",
         "/var/lib/rancher/credentialprovider/config.yaml", "k3s-agent"),
        ({"/etc/rancher/rke2/": "", "/usr/lib/systemd/system/rke2-server.service": ""}, "RKE2",
         "/var/lib/rancher/credentialprovider/config.yaml", "rke2-server"),
    ],
)  # fmt: skip
def test_k3s_and_rke2_pick_up_their_own_directory(
    tmp_path: Path, files: dict[str, str], platform: str, config: str, restart: str
) -> None:
    plan = plan_node(NodeRoot.at(node(tmp_path, files)), ["azure"], "0.1.0")
    assert (plan.platform, plan.config_path, plan.restart, plan.flag_text) == (
        platform, config, restart, None,
    )  # fmt: skip
    assert ("link", "/var/lib/rancher/credentialprovider/bin/acr-credential-provider") in steps(
        plan
    )
    assert plan.steps[-2].detail == f"the kubelet's flags: set by {platform}"


def test_k0s_flags_go_into_the_units_kubelet_extra_args(tmp_path: Path) -> None:
    unit = (
        "[Service]\nExecStart=/usr/local/bin/k0s worker --token-file=/etc/k0s/k0stoken "
        '--kubelet-extra-args="--node-ip=10.0.0.5"\n'
    )
    root = node(tmp_path, {"/etc/k0s/": "", "/etc/systemd/system/k0sworker.service": unit})
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    assert (plan.platform, plan.flag_file, plan.restart) == (
        "k0s", "/etc/systemd/system/k0sworker.service", "k0sworker",
    )  # fmt: skip
    assert plan.flag_text == unit.replace('"--node-ip=10.0.0.5"', f"'--node-ip=10.0.0.5 {FLAGS}'")


UPSTREAM_ECR = """apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ecr-credential-provider
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    defaultCacheDuration: 12h
    matchImages: ["*.dkr.ecr.*.amazonaws.com"]
"""


@pytest.mark.parametrize(
    ("files", "platform", "config"),
    [
        ({"/etc/eks/image-credential-provider/config.json": UPSTREAM_ECR}, "EKS AL2023 (nodeadm)",
         "/etc/eks/image-credential-provider/config.json"),
        ({"/var/lib/kubelet/credential-provider-config.yaml": UPSTREAM_ECR}, "AKS",
         "/var/lib/kubelet/credential-provider-config.yaml"),
        ({"/etc/srv/kubernetes/cri_auth_config.yaml": UPSTREAM_ECR, "/etc/os-release": "ID=cos\n"},
         "GKE (COS)", "/etc/srv/kubernetes/cri_auth_config.yaml"),
        ({"/home/kubernetes/cri-auth-config.yaml": UPSTREAM_ECR, "/etc/os-release": "ID=cos\n"},
         "GCE kube-up", "/home/kubernetes/cri-auth-config.yaml"),
    ],
)  # fmt: skip
def test_a_platform_managed_config_is_merged_keeping_its_providers(
    tmp_path: Path, files: dict[str, str], platform: str, config: str
) -> None:
    files = {**files, "/etc/systemd/system/kubelet.service": ""}
    root = NodeRoot.at(node(tmp_path, files))
    refused = plan_node(root, ["gcp"], "0.1.0")
    # the kubelet does not start where a provider's plugin is missing from its bin dir
    assert refused.refused.startswith(
        f"the kubelet would not start: {config} keeps ecr-credential-provider, whose plugin is "
        f"not in {refused.bin_dir} (plugin binary executable did not exist)"
    )
    assert refused.refused.endswith("; nothing is changed")
    assert (refused.steps, refused.config_text) == ([], None)
    plugin = Path(root.host(f"{refused.bin_dir}/ecr-credential-provider"))
    plugin.parent.mkdir(parents=True, exist_ok=True)
    plugin.write_text("#!/bin/sh\n")
    plan = plan_node(root, ["gcp"], "0.1.0")
    assert (plan.platform, plan.config_path, plan.restart) == (platform, config, "kubelet")
    assert ("merge", config) in steps(plan)
    assert providers(plan) == ["ecr-credential-provider", "auth-provider-gcp"]
    [merge] = [step for step in plan.steps if step.path == config]
    assert "comment" not in merge.detail  # the platform's file has none
    # one with an operator's comments: the step says they are not kept in the file written
    Path(root.host(config)).write_text("# ask the platform team\n" + UPSTREAM_ECR)
    [merge] = [step for step in plan_node(root, ["gcp"], "0.1.0").steps if step.path == config]
    assert merge.detail.endswith(
        "keeping ecr-credential-provider (its 1 comment line(s) not kept: the backup has them)"
    )


def test_a_config_the_kubelet_would_refuse_changes_nothing(tmp_path: Path) -> None:
    broken = UPSTREAM_ECR.replace("    apiVersion: credentialprovider.kubelet.k8s.io/v1\n", "")
    files = {"/var/lib/kubelet/credential-provider-config.yaml": broken}
    plan = plan_node(NodeRoot.at(node(tmp_path, files)), ["gcp"], "0.1.0")
    assert plan.refused.startswith(
        "the kubelet would refuse the config: failed to validate credential provider config: "
    )
    assert plan.refused.endswith("; nothing is changed")
    assert (plan.steps, plan.config_text, plan.flag_text, plan.restart) == ([], None, None, "")


@pytest.mark.parametrize(
    ("files", "platform", "says"),
    [
        ({"/etc/os-release": 'NAME=Bottlerocket\nID=bottlerocket\n'}, "Bottlerocket", "settings API"),
        ({"/etc/os-release": "ID=talos\n"}, "Talos", "machine.kubelet.credentialProviderConfig"),
        ({"/etc/os-release": 'ID="rhcos"\n'}, "OpenShift (RHCOS)", "MachineConfig"),
        ({"/var/lib/kubelet/credential-provider.conf": UPSTREAM_ECR}, "kOps", "cluster spec"),
        ({"/etc/hostname": "node\n"}, "unknown", "credprovider install"),
    ],
)  # fmt: skip
def test_where_the_agent_must_not_change_anything_it_says_why(
    tmp_path: Path, files: dict[str, str], platform: str, says: str
) -> None:
    plan = plan_node(NodeRoot.at(node(tmp_path, files)), ["aws"], "0.1.0")
    assert (plan.platform, plan.steps, plan.restart) == (platform, [], "")
    assert says in plan.refused


def test_a_file_it_cannot_keep_is_not_replaced(tmp_path: Path) -> None:
    """A FIFO where the platform's config should be: the agent could not keep it, so it changes
    nothing (and never blocks reading it)."""
    root = node(tmp_path, {"/var/lib/kubelet/": ""})
    os.mkfifo(Path(root) / "var/lib/kubelet/credential-provider-config.yaml")
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    assert plan.platform == "AKS"
    assert plan.refused.startswith("/var/lib/kubelet/credential-provider-config.yaml ")
    assert plan.refused.endswith(": nothing is changed")
    assert (plan.steps, plan.config_text) == ([], None)


def test_a_kubelet_already_given_a_config_keeps_it_and_its_providers(tmp_path: Path) -> None:
    """kubeadm with the flags already in kubeadm-flags.env (set at provisioning): that config is
    merged into (its providers kept), the plugins are linked where the kubelet looks, and the flags
    file is left as it is."""
    flags = (
        'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 '
        "--image-credential-provider-config=/etc/kubernetes/providers.yaml "
        '--image-credential-provider-bin-dir=/opt/credential-providers"\n'
    )
    files = {
        **KUBEADM_NODE,
        "/var/lib/kubelet/kubeadm-flags.env": flags,
        "/etc/kubernetes/providers.yaml": UPSTREAM_ECR,
        "/opt/credential-providers/ecr-credential-provider": "#!/bin/sh\n",
    }
    plan = plan_node(NodeRoot.at(node(tmp_path, files)), ["gcp"], "0.1.0")
    assert steps(plan)[2:] == [
        ("link", "/opt/credential-providers/auth-provider-gcp"),
        ("merge", "/etc/kubernetes/providers.yaml"),
        ("unchanged", ""),
        ("restart", "kubelet"),
    ]
    assert providers(plan) == ["ecr-credential-provider", "auth-provider-gcp"]
    assert plan.flag_text is None
    assert "the kubelet is already given /etc/kubernetes/providers.yaml" in plan.notes[-1]


def test_provider_settings_replace_the_shipped_defaults(tmp_path: Path) -> None:
    from credprovider.tool.change.settings import parse

    settings = parse(
        '{"aws": {"matchImages": ["registry.internal.example"], "args": ["-v=2"],'
        ' "env": {"AWS_REGION": "eu-west-1"}, "defaultCacheDuration": "1h"}}',
        ["aws", "gcp"],
    )
    root = node(tmp_path, {**KUBEADM_NODE, "/etc/default/kubelet": ""})
    plan = plan_node(NodeRoot.at(root), ["aws", "gcp"], "0.1.0", settings=settings)
    assert plan.refused == "" and plan.config_text is not None
    aws, gcp = yaml.safe_load(plan.config_text)["providers"]
    assert aws["matchImages"] == ["registry.internal.example"]
    assert (aws["args"], aws["defaultCacheDuration"]) == (["-v=2"], "1h")
    assert aws["env"] == [{"name": "AWS_REGION", "value": "eu-west-1"}]
    assert gcp["name"] == "auth-provider-gcp" and "env" not in gcp  # the others keep the defaults


def test_provider_settings_the_kubelet_would_refuse_change_nothing(tmp_path: Path) -> None:
    from credprovider.tool.change.settings import parse

    # service-account tokens without the fields the kubelet requires with them
    settings = parse(
        '{"aws": {"tokenAttributes": {"serviceAccountTokenAudience": "sts"}}}', ["aws"]
    )
    root = node(tmp_path, {**KUBEADM_NODE, "/etc/default/kubelet": ""})
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0", settings=settings)
    assert plan.refused.startswith(
        "the kubelet would refuse the config: failed to validate credential provider config: "
    ), plan.refused
    assert "tokenAttributes" in plan.refused
    assert (plan.steps, plan.config_text, plan.flag_text, plan.restart) == ([], None, None, "")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{", "--provider-settings is not JSON: "),
        ("[]", "--provider-settings is a JSON object keyed by provider (aws, ...)"),
        ('{"gcp": {}}', "--provider-settings names 'gcp', which is not in --providers (aws)"),
        ('{"aws": []}', "--provider-settings: aws is a JSON object"),
        ('{"aws": {"image": 1}}', "--provider-settings: aws.image is not one of matchImages, "),
        ('{"aws": {"args": "-v=2"}}', "--provider-settings: aws.args is a list of strings"),
        ('{"aws": {"env": {"A": 1}}}', "--provider-settings: aws.env is a mapping of names to strings"),
        ('{"aws": {"tokenAttributes": []}}', "--provider-settings: aws.tokenAttributes is a mapping"),
        ("x" * 70000, "--provider-settings is longer than 65536 characters"),
    ],
)  # fmt: skip
def test_provider_settings_that_are_not_settings_are_one_line(text: str, said: str) -> None:
    from credprovider.tool.change.settings import SettingsError, parse

    with pytest.raises(SettingsError) as raised:
        parse(text, ["aws"])
    assert str(raised.value).startswith(said)


def test_token_attributes_are_refused_for_a_kubelet_before_1_34(tmp_path: Path) -> None:
    from credprovider.tool.change.settings import parse

    attributes = (
        '{"aws": {"tokenAttributes": {"serviceAccountTokenAudience": "sts.amazonaws.com",'
        ' "cacheType": "ServiceAccount", "requireServiceAccount": true}}}'
    )
    settings = parse(attributes, ["aws"])
    root = node(tmp_path, {**KUBEADM_NODE, "/etc/default/kubelet": ""})
    assert plan_node(NodeRoot.at(root), ["aws"], "0.1.0", settings=settings).refused == ""
    older = plan_node(
        NodeRoot.at(root), ["aws"], "0.1.0", settings=settings, kubelet_version=(1, 33)
    )
    assert older.refused == (
        "the kubelet would refuse the config: failed to validate credential provider config: "
        "providers.tokenAttributes: Forbidden: tokenAttributes is not supported when "
        "KubeletServiceAccountTokenForCredentialProviders feature gate is disabled; nothing is changed"
    )


@pytest.mark.parametrize(
    ("version", "flags", "kubelet_config", "taken"),
    [
        ((1, 33), f"--feature-gates={SA_TOKEN_GATE}=true", None, True),
        ((1, 33), "--config=/var/lib/kubelet/config.yaml", {SA_TOKEN_GATE: True}, True),
        ((1, 35), f"--feature-gates=A=true,{SA_TOKEN_GATE}=false", None, False),
        (None, "--config=/var/lib/kubelet/config.yaml", {SA_TOKEN_GATE: False}, False),
        ((1, 34), "--config=/var/lib/kubelet/config.yaml", {"Other": False}, True),
    ],
)
def test_token_attributes_follow_the_nodes_feature_gate(
    tmp_path: Path,
    version: tuple[int, int] | None,
    flags: str,
    kubelet_config: dict[str, bool] | None,
    taken: bool,
) -> None:
    """The gate the node's kubelet flags or its KubeletConfiguration give decides, as doctor
    decides it; else its version's default: a gate turned on takes them on 1.33, one turned off
    refuses them on any version."""
    from credprovider.tool.change.settings import parse

    attributes = (
        '{"aws": {"tokenAttributes": {"serviceAccountTokenAudience": "sts.amazonaws.com",'
        ' "cacheType": "ServiceAccount", "requireServiceAccount": true}}}'
    )
    files = {**KUBEADM_NODE, "/etc/default/kubelet": ""}
    files["/var/lib/kubelet/kubeadm-flags.env"] = f'KUBELET_KUBEADM_ARGS="{flags}"\n'
    if kubelet_config is not None:
        files["/var/lib/kubelet/config.yaml"] = (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            f"featureGates: {json.dumps(kubelet_config)}\n"
        )
    root = node(tmp_path, files)
    plan = plan_node(
        NodeRoot.at(root), ["aws"], "0.1.0", settings=parse(attributes, ["aws"]),
        kubelet_version=version,
    )  # fmt: skip
    assert (plan.refused == "") is taken, plan.refused
    assert taken or "feature gate is disabled" in plan.refused


@pytest.mark.parametrize("flag", ["--config=/var/lib/kub\0elet/c.yaml", "--config-dir=/a\0b"])
def test_a_nul_in_a_kubelet_config_path_is_no_traceback(tmp_path: Path, flag: str) -> None:
    """A flags file whose --config or --config-dir holds a NUL byte, read under the root for the
    feature gates: nothing read from it (it was a RootPathError out of the plan)."""
    files = {**KUBEADM_NODE, "/etc/default/kubelet": ""}
    files["/var/lib/kubelet/kubeadm-flags.env"] = f'KUBELET_KUBEADM_ARGS="{flag}"\n'
    plan = plan_node(NodeRoot.at(node(tmp_path, files)), ["aws"], "0.1.0")
    assert plan.refused == "" and plan.steps


@pytest.mark.parametrize(
    ("where", "flags", "said"),
    [
        ("/var/lib/kubelet/kubeadm-flags.env", "--cloud-provider=aws", "--cloud-provider=aws"),
        ("/etc/default/kubelet", "--cloud-provider gce", "--cloud-provider=gce"),
        (
            "/var/lib/kubelet/kubeadm-flags.env",
            "--feature-gates=DisableKubeletCloudCredentialProviders=false",
            "DisableKubeletCloudCredentialProviders",
        ),
    ],
)
def test_an_in_tree_kubeadm_node_is_refused_with_the_way_to_migrate_it(
    tmp_path: Path, where: str, flags: str, said: str
) -> None:
    """Before, the agent set the two plugin flags beside --cloud-provider=aws and reported
    "installed": the node's next kubelet upgrade past 1.31 does not start."""
    variable = "KUBELET_KUBEADM_ARGS" if where.endswith(".env") else "KUBELET_EXTRA_ARGS"
    root = node(tmp_path, {**KUBEADM_NODE, where: f'{variable}="--node-ip=10.0.0.5 {flags}"\n'})
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    assert said in plan.refused and "nothing is changed" in plan.refused
    assert f"credprovider migrate --kubelet-flags-file {where} --write" in plan.refused
    assert (plan.steps, plan.config_text, plan.flag_text) == ([], None, None)


def test_a_kubeadm_node_on_the_external_cloud_provider_is_planned(tmp_path: Path) -> None:
    env = 'KUBELET_KUBEADM_ARGS="--cloud-provider=external"\n'
    root = node(tmp_path, {**KUBEADM_NODE, "/var/lib/kubelet/kubeadm-flags.env": env})
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    assert plan.refused == "" and plan.flag_file == "/etc/default/kubelet"


def test_asked_to_migrate_an_in_tree_kubeadm_node_the_agent_moves_it_to_external(
    tmp_path: Path,
) -> None:
    """flags.migrateInTree: --cloud-provider=aws in kubeadm's own file is overridden by
    --cloud-provider=external in KUBELET_EXTRA_ARGS (passed last); what uninstall puts back keeps
    it external. The gate, in kubeadm's own file (not the agent's to edit), is still refused."""
    env = 'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 --cloud-provider=aws"\n'
    root = node(
        tmp_path,
        {
            **KUBEADM_NODE,
            "/var/lib/kubelet/kubeadm-flags.env": env,
            "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n",
        },
    )
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0", migrate_in_tree=True)
    assert (plan.refused, plan.migrating) == ("", "aws")
    assert plan.flag_text == f'KUBELET_EXTRA_ARGS="--v=2 --cloud-provider=external {FLAGS}"\n'
    assert plan.flags_restored == {
        "/etc/default/kubelet": 'KUBELET_EXTRA_ARGS="--v=2 --cloud-provider=external"\n'
    }
    assert any("controller manager must run" in note for note in plan.notes)
    gate = "--feature-gates=DisableKubeletCloudCredentialProviders=false"
    (Path(root) / "var/lib/kubelet/kubeadm-flags.env").write_text(
        f'KUBELET_KUBEADM_ARGS="{gate}"\n'
    )
    refused = plan_node(NodeRoot.at(root), ["aws"], "0.1.0", migrate_in_tree=True)
    assert "DisableKubeletCloudCredentialProviders" in refused.refused and refused.steps == []


def test_where_the_flags_file_goes_is_judged_inside_the_root(tmp_path: Path) -> None:
    """#63: the distribution's directory for the flags file is looked for inside the node's
    root. The node's /etc/default is a link to /tmp, which on the node does not exist (the host's
    /tmp does): the plan takes /etc/sysconfig, the node's own directory, and never writes
    through the link into the host."""
    root = node(tmp_path, {**KUBEADM_NODE, "/etc/sysconfig/": ""}, {"/etc/default": "/tmp"})
    assert Path("/tmp").is_dir() and not (Path(root) / "tmp").exists()
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    assert plan.flag_file == "/etc/sysconfig/kubelet", plan.flag_file

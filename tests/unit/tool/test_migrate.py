"""credprovider/tool/change/migrate.py: the kubelet flags in the files operators have, and the plan made of them."""

from __future__ import annotations

import pytest
import yaml

from credprovider.paths import NODE_CONFIG
from credprovider.tool.change.migrate import ExistingConfig, flags_from_file, plan_migration
from credprovider.tool.change.migrate_write import steps
from credprovider.tool.change.results import Action
from credprovider.tool.errors import NodeChangeError

KUBEADM_FLAGS_ENV = (
    'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock '
    '--cloud-provider=aws --pod-infra-container-image=registry.k8s.io/pause:3.10"\n'
)
KUBEADM_DROP_IN = """\
# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("kubeadm-flags.env", KUBEADM_FLAGS_ENV,
         "--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --cloud-provider=aws "
         "--pod-infra-container-image=registry.k8s.io/pause:3.10"),
        ("/etc/default/kubelet", "KUBELET_EXTRA_ARGS=--cloud-provider=gce\n", "--cloud-provider=gce"),
        ("/etc/sysconfig/kubelet", "# comment\nexport KUBELET_EXTRA_ARGS='--cloud-provider azure --cloud-config /etc/kubernetes/azure.json'\n",
         "--cloud-provider azure --cloud-config /etc/kubernetes/azure.json"),
        ("kubeadm's drop-in", KUBEADM_DROP_IN,
         "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf "
         "--config=/var/lib/kubelet/config.yaml "),
        ("a unit with the flags inline", "[Service]\nExecStart=/usr/local/bin/kubelet \\\n  --cloud-provider=aws \\\n  --v=2\n",
         "--cloud-provider=aws --v=2"),
        ("just the flags", "--cloud-provider=aws --v=2\n", "--cloud-provider=aws --v=2"),
        ("other variables are not flags", "HOME=/root\nKUBELET_EXTRA_ARGS=\n", ""),
    ],
)  # fmt: skip
def test_flags_from_file(name: str, text: str, expected: str) -> None:
    assert flags_from_file(text).strip() == expected.strip(), name


def test_kubeadm_flags_env_migrates() -> None:
    plan = plan_migration(flags_from_file(KUBEADM_FLAGS_ENV))
    assert plan.providers == ["aws"]
    assert plan.remove == ["--cloud-provider=aws"]
    assert plan.config.startswith("# Written by credprovider migrate. ")


def test_the_plan_is_told_in_installs_steps() -> None:
    """#63: one plan vocabulary (change.results.Step): each flags file edited, with what changes
    in it and where --write kept it, then the config written, or left as it is."""
    path = "/var/lib/kubelet/kubeadm-flags.env"
    plan = plan_migration(flag_files={path: KUBEADM_FLAGS_ENV})
    flags, config = steps(plan, "/etc/kubernetes/providers.yaml", {path: f"{path}.kept"})
    assert (flags.action, flags.path, flags.backup) == (Action.FLAGS, path, f"{path}.kept")
    assert flags.detail.startswith(f"edited {path} (removed --cloud-provider=aws, added ")
    assert (config.action, config.detail) == (Action.WRITE, "wrote /etc/kubernetes/providers.yaml")
    plan.config_unchanged = True
    assert steps(plan, "/etc/kubernetes/providers.yaml")[-1].action is Action.UNCHANGED


@pytest.mark.parametrize(
    ("cloud", "manager"),
    [
        ("aws", "aws-cloud-controller-manager, k8s.io/cloud-provider-aws"),
        ("azure", "cloud node manager (sigs.k8s.io/cloud-provider-azure)"),
        ("gce", "cloud-controller-manager, k8s.io/cloud-provider-gcp"),
    ],
)
def test_an_in_tree_cloud_becomes_external_and_its_controller_manager_is_named(
    cloud: str, manager: str
) -> None:
    """KEP-2395: migrate never leaves a built-in --cloud-provider; it says which controller
    manager initializes the node from then on, and what happens without it."""
    plan = plan_migration(f"--cloud-provider={cloud} --v=2")
    assert plan.remove == [f"--cloud-provider={cloud}"]
    assert plan.add[0] == "--cloud-provider=external"
    (said,) = [note for note in plan.notes if note.startswith(f"--cloud-provider={cloud} becomes")]
    assert manager in said and "node.cloudprovider.kubernetes.io/uninitialized" in said


@pytest.mark.parametrize("cloud", ["vsphere", "openstack", "cloudstack"])
def test_a_built_in_cloud_without_a_registry_login_is_refused(cloud: str) -> None:
    """A kubelet on another built-in provider would be left on it (it has no login to replace),
    and no kubelet from 1.31 starts with one: migrate refuses, naming what to do first."""
    with pytest.raises(NodeChangeError) as refused:
        plan_migration(f"--cloud-provider={cloud} --v=2")
    said = str(refused.value)
    assert f"--cloud-provider={cloud}" in said and "nothing was changed" in said
    assert "--cloud-provider=external with that cloud's controller manager first" in said


def test_providers_names_the_cloud_for_external() -> None:
    plain = plan_migration("--cloud-provider=external")
    assert plain.providers == [] and "pass --providers" in " ".join(plain.notes)
    chosen = plan_migration("--cloud-provider=external", providers=["gcp", "aws", "gcp"])
    assert chosen.providers == ["gcp", "aws"]
    assert not any("pass --providers" in note for note in chosen.notes)
    assert "auth-provider-gcp" in chosen.config and "ecr-credential-provider" in chosen.config


def test_unknown_provider_is_an_error() -> None:
    with pytest.raises(
        NodeChangeError,
        match=r"--providers takes a comma list of aws, azure, gcp, registries \(not gce\)",
    ):
        plan_migration("--cloud-provider=external", providers=["gce"])


def test_an_unbalanced_quote_in_a_flags_file_is_an_error() -> None:
    with pytest.raises(NodeChangeError, match="No closing quotation"):
        flags_from_file('KUBELET_EXTRA_ARGS="--cloud-provider=aws\n')


EXISTING = ExistingConfig(
    "/etc/kubernetes/old.yaml",
    [
        {"name": "ecr-credential-provider", "matchImages": ["*.dkr.ecr.*.amazonaws.com"],
         "defaultCacheDuration": "1h", "apiVersion": "credentialprovider.kubelet.k8s.io/v1"},
        {"name": "gcr-login", "matchImages": ["*.pkg.dev", "registry.corp.example"],
         "defaultCacheDuration": "1m", "apiVersion": "credentialprovider.kubelet.k8s.io/v1"},
    ],
    ["/etc/kubernetes/old.yaml", "/etc/kubernetes/old.yaml"],
)  # fmt: skip


def test_the_existing_config_is_merged_and_its_conflicts_reported() -> None:
    plan = plan_migration(
        "--cloud-provider=gce --image-credential-provider-config=/etc/kubernetes/old.yaml",
        providers=["aws", "gcp"],
        read_existing={EXISTING.path: EXISTING}.__getitem__,
    )
    names = [p["name"] for p in yaml.safe_load(plan.config)["providers"]]
    assert names == ["ecr-credential-provider", "gcr-login", "auth-provider-gcp"]
    kept = yaml.safe_load(plan.config)["providers"][0]
    assert kept == EXISTING.providers[0]  # theirs, as it was
    notes = "\n".join(plan.notes)
    assert (
        "Conflict: /etc/kubernetes/old.yaml already has a provider named ecr-credential-provider; "
        "it is kept as it is, though credprovider would write its defaultCacheDuration, matchImages "
        "otherwise" in notes
    )
    assert (
        "Conflict: gcr-login (from /etc/kubernetes/old.yaml) and auth-provider-gcp both match *.pkg.dev"
        in notes
    )


@pytest.mark.parametrize(
    ("flags", "removed", "added"),
    [
        ("--cloud-provider aws --image-credential-provider-bin-dir /opt/bin",
         ["--cloud-provider aws", "--image-credential-provider-bin-dir /opt/bin"],
         ["--cloud-provider=external", f"--image-credential-provider-config={NODE_CONFIG}",
          "--image-credential-provider-bin-dir=/opt/bin"]),
        ("--cloud-provider=aws --feature-gates KubeletCredentialProviders=true,A=false",
         ["--cloud-provider=aws", "--feature-gates KubeletCredentialProviders=true,A=false"],
         ["--feature-gates=A=false", "--cloud-provider=external"]),
        ("--cloud-provider=aws --feature-gates=DisableKubeletCloudCredentialProviders=true",
         ["--cloud-provider=aws", "--feature-gates=DisableKubeletCloudCredentialProviders=true"],
         ["--cloud-provider=external"]),
        ("--cloud-provider=external --feature-gates=KubeletCredentialProviders=true",
         ["--feature-gates=KubeletCredentialProviders=true"], []),
    ],
)  # fmt: skip
def test_remove_and_add_are_whole_flags(flags: str, removed: list[str], added: list[str]) -> None:
    plan = plan_migration(flags)
    assert plan.remove == removed
    assert plan.add[: len(added)] == added
    assert len([f for f in plan.add if f.startswith("--image-credential-provider-config")]) <= 1


def test_on_kubeadm_the_new_flags_go_where_kubeadm_neither_rewrites_nor_overrides_them() -> None:
    """kubeadm rewrites kubeadm-flags.env on upgrade and its drop-in passes KUBELET_EXTRA_ARGS
    (/etc/default/kubelet) after it: the old cloud flags go from both, the new flags last."""
    files = {
        "/var/lib/kubelet/kubeadm-flags.env": KUBEADM_FLAGS_ENV,
        "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2 --cloud-provider=aws\n",
    }
    plan = plan_migration(flag_files=files)
    kubeadm = flags_from_file(plan.files["/var/lib/kubelet/kubeadm-flags.env"])
    extra = flags_from_file(plan.files["/etc/default/kubelet"])
    assert "--cloud-provider" not in kubeadm and "image-credential-provider" not in kubeadm
    assert extra.split() == [
        "--v=2",
        "--cloud-provider=external",
        f"--image-credential-provider-config={NODE_CONFIG}",
        "--image-credential-provider-bin-dir=/etc/kubernetes/image-credential-provider",
    ]
    assert any(
        note.startswith("The new flags go into /etc/default/kubelet: ") for note in plan.notes
    )
    # kubeadm-flags.env alone: the flags stay where they were (nowhere else is given)
    alone = plan_migration(flag_files={"/var/lib/kubelet/kubeadm-flags.env": KUBEADM_FLAGS_ENV})
    assert (
        "--image-credential-provider-config=" in alone.files["/var/lib/kubelet/kubeadm-flags.env"]
    )
    # ... and the plan says kubeadm's upgrade would drop them, and where they last
    lost = [note for note in alone.notes if "writes anew at upgrade" in note]
    assert len(lost) == 1 and "nodeRegistration.kubeletExtraArgs" in lost[0], alone.notes
    assert not [note for note in plan.notes if "writes anew at upgrade" in note]


def test_a_kubeadm_node_is_told_what_makes_nodes_joined_later_right() -> None:
    """kubeadm writes kubeadm-flags.env again at join from nodeRegistration.kubeletExtraArgs: the
    migrated node alone is not the cluster's next node."""
    kubeadm = plan_migration(flag_files={"/var/lib/kubelet/kubeadm-flags.env": KUBEADM_FLAGS_ENV})
    said = [note for note in kubeadm.notes if note.startswith("kubeadm: nodes joined later")]
    assert len(said) == 1 and "nodeRegistration.kubeletExtraArgs" in said[0]
    assert "controllerManager.extraArgs" in said[0]
    # not for a kubelet kubeadm does not configure, nor where nothing is removed
    plain = plan_migration(flag_files={"/etc/sysconfig/kubelet": KUBEADM_FLAGS_ENV})
    external = plan_migration(
        flag_files={"/var/lib/kubelet/kubeadm-flags.env": 'A="--cloud-provider=external"\n'},
        providers=["aws"],
    )
    for plan in (plain, external):
        assert not any(n.startswith("kubeadm: nodes joined later") for n in plan.notes)

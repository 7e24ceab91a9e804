"""What the chart mounts per ``flags.platform`` (credprovider/tool/agent/mounts.py): each writable
mount holds something the platform's row writes, nothing holding the node's keys is mounted whole,
and an operator-named platform is followed only on a node that shows it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from credprovider.paths import AGENT_HOME
from credprovider.tool.agent.mounts import AUTO, CHOICES, Choice, choice, mounts_for
from credprovider.tool.agent.plan import plan_node
from credprovider.tool.agent.platforms import ENV_FILE, K0S_UNIT, PLATFORMS, confirmed
from credprovider.tool.node.root import NodeRoot
from tests.platformnodes import PlatformNode, k3s, rke2
from tests.unit.tool.test_agent_plan import KUBEADM_NODE, node

NAMED = [pytest.param(known, id=known.value) for known in CHOICES]


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


@pytest.mark.parametrize("known", NAMED)
def test_every_writable_mount_holds_what_the_platform_writes(known: Choice) -> None:
    platform = known.platform
    assert platform is not None
    writes = [AGENT_HOME, platform.config, f"{platform.bin_dir}/ecr-credential-provider"]
    if platform.flags == ENV_FILE:
        writes += list(platform.flag_files)
    if platform.flags == K0S_UNIT:
        writes.append("/etc/systemd/system/k0sworker.service")
    writable = [mount.path for mount in known.mounts if mount.writable]
    # each thing written is in a writable mounted directory (never the file alone: it is renamed)
    for path in writes:
        assert any(_under(path, d) and path != d for d in writable), (path, writable)
    # and each writable mount is there for something written
    for directory in writable:
        assert any(_under(path, directory) for path in writes), directory
    assert all(not mount.file for mount in known.mounts if mount.writable)


@pytest.mark.parametrize(("value", "make"), [("k3s", k3s), ("rke2", rke2)])
def test_k3s_and_rke2_pods_see_no_unit_directory_and_no_join_token(
    value: str, make: Callable[[], PlatformNode]
) -> None:
    """k3s' install script keeps the node's join token in its unit's environment file
    (/etc/systemd/system/k3s-agent.service.env: K3S_TOKEN) and RKE2's tarball reads one beside
    its units (/usr/local/lib/systemd/system/%N.env). Their pods mount no unit directory:
    systemd, asked over its socket, names the service to restart (agent/systemd.py)."""
    units = [path for path in make().files if ".service" in path]
    mounts = [mount.path for mount in choice(value).mounts]
    assert units and not any(_under(unit, m) for unit in units for m in mounts), (units, mounts)
    assert not any(
        m.startswith(("/etc/systemd", "/usr/lib/systemd", "/lib/systemd")) for m in mounts
    )


@pytest.mark.parametrize("known", NAMED)
def test_nothing_holding_the_nodes_keys_is_mounted_whole(known: Choice) -> None:
    paths = {mount.path for mount in known.mounts}
    assert not paths & {"/", "/etc", "/var", "/var/lib", "/etc/kubernetes", "/usr", "/home"}
    # AKS keeps its config directly in the kubelet's directory: the one exception, documented
    assert ("/var/lib/kubelet" in paths) == (known.value == "aks")


def test_auto_keeps_the_wide_mounts_and_says_so() -> None:
    auto = choice(AUTO)
    assert auto.platform is None
    assert [(m.path, m.writable) for m in auto.mounts] == [
        ("/etc", True), ("/var/lib", True), ("/usr/lib/systemd", False),
    ]  # fmt: skip
    assert "/etc and /var/lib are writable" in auto.note
    with pytest.raises(KeyError):
        choice("ubuntu")


def test_nested_mounts_fold_into_the_one_holding_them() -> None:
    k3s = next(p for p in PLATFORMS if p.name == "k3s")
    paths = [m.path for m in mounts_for(k3s)]
    # the bin dir is inside the config's directory: one mount
    assert paths.count("/var/lib/rancher/credentialprovider") == 1
    assert "/var/lib/rancher/credentialprovider/bin" not in paths
    assert len(paths) == len(set(paths))


@pytest.mark.parametrize(
    ("value", "files", "said"),
    [
        ("kubeadm", KUBEADM_NODE, "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"),
        ("kubeadm", {"/var/lib/kubelet/kubeadm-flags.env": ""}, "/var/lib/kubelet/kubeadm-flags.env"),
        ("k3s", {"/etc/systemd/system/k3s-agent.service": ""}, "its unit k3s-agent.service"),
        ("k0s", {"/etc/systemd/system/k0sworker.service": ""}, "/etc/systemd/system/k0sworker.service"),
        ("gke", {"/etc/os-release": "ID=cos\n"}, "/etc/os-release ID=cos"),
        # a kubelet unit alone says nothing: every platform but k3s, RKE2 and k0s has one
        ("eks", {"/etc/systemd/system/kubelet.service": ""}, ""),
        ("k3s", KUBEADM_NODE, ""),
    ],
)  # fmt: skip
def test_a_named_platform_is_confirmed_by_the_node(
    tmp_path: Path, value: str, files: dict[str, str], said: str
) -> None:
    platform = choice(value).platform
    assert platform is not None
    root = node(tmp_path, files)
    assert confirmed(NodeRoot.at(root), platform) == said
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0", platform)
    if said:
        assert (plan.refused, plan.evidence) == ("", said)
    else:
        assert plan.refused.startswith(f"this node shows nothing of {platform.name} (none of ")
        assert plan.steps == [] and plan.config_text is None and plan.flag_text is None
        assert plan.evidence == "nothing on this node"


def test_a_refusal_names_only_what_would_have_shown_the_platform(tmp_path: Path) -> None:
    """A kubelet unit is on every node: not a sign of EKS, so not named as one."""
    eks, k3s = choice("eks").platform, choice("k3s").platform
    assert eks is not None and k3s is not None
    root = node(tmp_path, {"/etc/systemd/system/kubelet.service": ""})
    refused = plan_node(NodeRoot.at(root), ["aws"], "0.1.0", eks).refused
    assert (
        "(none of /etc/eks/image-credential-provider/config.json, /etc/eks/nodeadm.d):" in refused
    )
    assert "(none of /etc/rancher/k3s, k3s.service, k3s-agent.service):" in (
        plan_node(NodeRoot.at(root), ["aws"], "0.1.0", k3s).refused
    )


def test_kubeadm_named_writes_its_config_in_the_agents_directory(tmp_path: Path) -> None:
    """The chart's kubeadm mounts no /etc/kubernetes: the config goes beside the agent's state,
    and the flags into the distribution's file the value names."""
    root = node(tmp_path, {**KUBEADM_NODE, "/etc/sysconfig/": "", "/etc/default/": ""})
    for value, flag_file in (("kubeadm", "/etc/default/kubelet"),
                             ("kubeadm-rpm", "/etc/sysconfig/kubelet")):  # fmt: skip
        plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0", choice(value).platform)
        assert plan.config_path == f"{AGENT_HOME}/config.yaml"
        assert plan.flag_file == flag_file


def test_a_kubeadm_value_whose_file_the_kubelet_does_not_read_is_refused(tmp_path: Path) -> None:
    """kubeadm as the Kubernetes docs install it without a package manager reads
    KUBELET_EXTRA_ARGS from /etc/sysconfig/kubelet, on Ubuntu too (tests/platformnodes.py): under
    the chart's ``kubeadm`` (whose pod mounts /etc/default) the agent changes nothing and names
    the value whose file it is, instead of setting flags the kubelet never reads;
    ``kubeadm-rpm`` sets them there."""
    from tests.platformnodes import kubeadm_binaries

    root = NodeRoot.at(kubeadm_binaries().build(tmp_path / "node"))
    refused = plan_node(root, ["aws"], "0.1.0", choice("kubeadm").platform)
    assert refused.refused.startswith(
        "the kubelet's unit reads KUBELET_EXTRA_ARGS from /etc/sysconfig/kubelet, not from "
        "/etc/default/kubelet: flags set there would never reach it; nothing is changed"
    ), refused.refused
    # on Ubuntu no /etc/sysconfig: kubeadm-rpm's pod would not start (its hostPath is missing)
    assert refused.refused.endswith(
        ": /etc/sysconfig is not there yet, and only the chart's flags.platform auto mounts "
        "where it goes: choose auto"
    ), refused.refused
    assert refused.steps == [] and refused.flag_text is None
    (root.host("/etc/sysconfig")).mkdir()
    refused = plan_node(root, ["aws"], "0.1.0", choice("kubeadm").platform)
    assert refused.refused.endswith(
        ": choose the chart's flags.platform kubeadm-rpm (its pod mounts /etc/sysconfig), or auto"
    ), refused.refused
    plan = plan_node(root, ["aws"], "0.1.0", choice("kubeadm-rpm").platform)
    assert (plan.refused, plan.flag_file) == ("", "/etc/sysconfig/kubelet")


def test_a_kubeadm_unit_that_reads_neither_file_is_refused(tmp_path: Path) -> None:
    """A kubelet unit of its own (kubeadm joined it, so kubeadm-flags.env is there) that takes
    its flags from neither /etc/default/kubelet nor /etc/sysconfig/kubelet: the agent writes
    neither (before: /etc/default/kubelet, which the kubelet never read, and "installed")."""
    from tests.platformnodes import kubeadm_binaries

    files = dict(kubeadm_binaries().files)
    drop_in = "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"
    files[drop_in] = files[drop_in].replace("/etc/sysconfig/kubelet", "/etc/kubernetes/kubelet.env")
    root = NodeRoot.at(node(tmp_path, files))
    plan = plan_node(root, ["aws"], "0.1.0")
    assert plan.refused.startswith(
        "the kubelet's unit reads KUBELET_EXTRA_ARGS from none of /etc/default/kubelet, "
        "/etc/sysconfig/kubelet: flags set there would never reach it; nothing is changed"
    ), plan.refused
    assert plan.steps == [] and plan.flag_text is None

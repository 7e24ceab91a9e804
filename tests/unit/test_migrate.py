"""credprovider/migrate.py: the kubelet flags in the files operators have, and the plan made of them."""

from __future__ import annotations

import pytest

from credprovider.install import InstallError
from credprovider.migrate import flags_from_file, plan_migration

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


def test_providers_names_the_cloud_for_external() -> None:
    plain = plan_migration("--cloud-provider=external")
    assert plain.providers == [] and "pass --providers" in " ".join(plain.notes)
    chosen = plan_migration("--cloud-provider=external", providers=["gcp", "aws", "gcp"])
    assert chosen.providers == ["gcp", "aws"]
    assert not any("pass --providers" in note for note in chosen.notes)
    assert "auth-provider-gcp" in chosen.config and "ecr-credential-provider" in chosen.config


def test_unknown_provider_is_an_error() -> None:
    with pytest.raises(InstallError, match="unknown provider gce: choose from aws, azure, gcp"):
        plan_migration("--cloud-provider=external", providers=["gce"])


def test_an_unbalanced_quote_in_a_flags_file_is_an_error() -> None:
    with pytest.raises(InstallError, match="No closing quotation"):
        flags_from_file('KUBELET_EXTRA_ARGS="--cloud-provider=aws\n')

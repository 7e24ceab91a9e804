"""The documented paths compose: each install form the docs give, followed by the next documented
step, decides alike and says only what is true. The package's example config copied into place is
the same providers for install and migrate (unchanged, never "exists with other content"); EKS's
JSON config stays JSON with its other providers kept; nothing is said "linked" after a refusal, nor
"add to the kubelet's flags" when the kubelet already has them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import CONFIG_DIR, fake_kubelet
from tests.helpers import run_cli as cli
from tests.integration.cli.conftest import fake_bundle

# What nodeadm writes (awslabs/amazon-eks-ami nodeadm: its ecr-credential-provider entry), with one
# more provider an operator added beside it.
EKS_CONFIG = {
    "apiVersion": "kubelet.config.k8s.io/v1",
    "kind": "CredentialProviderConfig",
    "providers": [
        {
            "name": "ecr-credential-provider",
            "matchImages": ["*.dkr.ecr.*.amazonaws.com", "*.dkr-ecr.*.on.aws"],
            "defaultCacheDuration": "12h0m0s",
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        },
        {
            "name": "team-registry-provider",
            "matchImages": ["registry.team.example"],
            "defaultCacheDuration": "1h",
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
        },
    ],
}


def _their_plugin(path: Path) -> None:
    """Another registry's plugin: it refuses an empty request, as a plugin does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho 'no request' >&2\nexit 1\n")
    path.chmod(0o755)


def test_the_packages_example_config_then_migrate_write_is_unchanged(tmp_path: Path) -> None:
    """install.md: copy /usr/share/doc/credprovider/config/aws.yaml into place; then a kubeadm
    node's migrate --write. Before: refused ("exists with other content") though it holds the same
    provider."""
    bundle = fake_bundle(tmp_path / "bundle", "0.2.0").parent
    config = tmp_path / "image-credential-provider-config.yaml"
    example = (CONFIG_DIR / "aws.yaml").read_text()
    config.write_text(example)
    flags = tmp_path / "kubeadm-flags.env"
    flags.write_text('KUBELET_KUBEADM_ARGS="--cloud-provider=aws --v=2"\n')
    done = cli(
        "migrate", "--kubelet-flags-file", str(flags), "--bin-dir", str(bundle),
        "--config-out", str(config), "--write",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert config.read_text() == example  # the operator's copy, byte for byte
    assert f"unchanged {config}: it already has these providers" in done.stdout
    assert "--cloud-provider=external" in flags.read_text()
    # install decides alike on the same file
    installed = cli(
        "install", "--providers", "aws", "--bin-dir", str(tmp_path / "bin"),
        "--config-out", str(config), "--target", str(bundle / "credprovider"), "--json",
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    step = json.loads(installed.stdout)["changes"][-1]
    assert step["action"] == "unchanged" and config.read_text() == example


def test_an_eks_json_config_is_merged_as_json(tmp_path: Path) -> None:
    """install.md's EKS line: install --bin-dir /etc/eks/image-credential-provider over nodeadm's
    config.json. Before: --force replaced the JSON with YAML and dropped the other provider."""
    target = fake_bundle(tmp_path / "bundle", "0.2.0")
    eks = tmp_path / "eks"
    eks.mkdir()
    config = eks / "config.json"
    config.write_text(json.dumps(EKS_CONFIG, indent=2))
    (eks / "ecr-credential-provider").write_text("#!/bin/sh\nexit 1\n")  # EKS's own binary
    _their_plugin(eks / "team-registry-provider")
    args = ["install", "--providers", "aws,gcp", "--bin-dir", str(eks), "--config-out",
            str(config), "--target", str(target)]  # fmt: skip
    refused = cli(*args)
    assert refused.returncode == 1
    assert json.loads(config.read_text()) == EKS_CONFIG  # nothing changed
    # nothing is said done that was not
    assert "not done (a step was refused)" in refused.stdout
    assert not any(line.startswith(("linked", "wrote")) for line in refused.stdout.splitlines())
    assert not any(said in refused.stdout for said in ("replaced", "linked", "added", "wrote"))
    forced = cli(*args, "--force")
    assert forced.returncode == 0, forced.stderr
    merged = json.loads(config.read_text())  # still JSON
    assert [p["name"] for p in merged["providers"]] == [
        "team-registry-provider",
        "ecr-credential-provider",
        "auth-provider-gcp",
    ]
    assert merged["providers"][0] == EKS_CONFIG["providers"][1]  # kept as it was
    assert "public.ecr.aws" in merged["providers"][1]["matchImages"]  # ours
    [backup] = eks.glob("config.json.credprovider-backup-*")
    assert json.loads(backup.read_text()) == EKS_CONFIG


def test_install_adds_its_provider_to_a_config_of_other_providers(tmp_path: Path) -> None:
    """A JSON config with none of ours: ours are added, the rest kept, no --force needed (a
    backup kept); JSON stays JSON."""
    target = fake_bundle(tmp_path / "bundle", "0.2.0")
    only_theirs = {**EKS_CONFIG, "providers": [EKS_CONFIG["providers"][1]]}
    config = tmp_path / "config.json"
    config.write_text(json.dumps(only_theirs))
    args = ["install", "--providers", "aws", "--bin-dir", str(tmp_path / "bin"),
            "--config-out", str(config), "--target", str(target)]  # fmt: skip
    # their plugin is not in the bin dir: keeping their provider would stop the kubelet
    refused = cli(*args, "--force")
    assert refused.returncode == 1 and json.loads(config.read_text()) == only_theirs
    assert "the kubelet would not start" in refused.stderr
    assert "team-registry-provider" in refused.stderr
    assert not (tmp_path / "bin").exists()
    _their_plugin(tmp_path / "bin/team-registry-provider")
    done = cli(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    merged = json.loads(config.read_text())
    assert [p["name"] for p in merged["providers"]] == [
        "team-registry-provider",
        "ecr-credential-provider",
    ]
    assert f"added our providers to {config} (its other providers kept)" in done.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="a fake kubelet needs root")
def test_install_does_not_ask_for_flags_the_kubelet_already_has(tmp_path: Path) -> None:
    """Before: "add to the kubelet's flags:" after every install, even one into the config and
    bin dir the running kubelet is given."""
    target = fake_bundle(tmp_path / "bundle", "0.2.0")
    bin_dir, config = tmp_path / "bin", tmp_path / "config.yaml"
    kubelet = fake_kubelet(
        [f"--image-credential-provider-config={config}",
         f"--image-credential-provider-bin-dir={bin_dir}"],
        dict(os.environ),
    )  # fmt: skip
    try:
        done = cli(
            "install", "--providers", "aws", "--bin-dir", str(bin_dir),
            "--config-out", str(config), "--target", str(target),
        )  # fmt: skip
        other = cli(
            "install", "--providers", "aws", "--bin-dir", str(tmp_path / "elsewhere"),
            "--config-out", str(tmp_path / "other.yaml"), "--target", str(target),
        )  # fmt: skip
    finally:
        kubelet.kill()
    assert done.returncode == 0, done.stderr
    assert "add to the kubelet's flags" not in done.stdout
    assert (
        "the kubelet's flags already name this config and bin dir (running kubelet" in done.stdout
    )
    assert "add to the kubelet's flags:" in other.stdout  # another place: they are needed


def test_a_merge_says_the_comments_it_does_not_keep(tmp_path: Path) -> None:
    """A YAML config with an operator's comments: merged, it is written anew (PyYAML keeps no
    comment), and install said only "its other providers kept". It says now how many comment
    lines are not kept and that the backup has them; a '#' inside a quoted pattern is no
    comment, and a config without comments says nothing of them."""
    target = fake_bundle(tmp_path / "bundle", "0.2.0")
    _their_plugin(tmp_path / "bin/team-registry-provider")
    config = tmp_path / "config.yaml"
    head = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
    entry = (
        "  - name: team-registry-provider\n"
        "    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        "    matchImages: ['registry.example.com/#team']{comment}\n"
        "    defaultCacheDuration: 10m\n"
    )
    commented = (
        "# the platform team's: ask #infra first\n"
        + head
        + "  # our own registry\n"
        + entry.format(comment="   # its pattern")
    )
    cases = {
        commented: "; its 3 comment line(s) not kept: the backup has them)",
        head + entry.format(comment="   # its pattern"): (
            "; its 1 comment line(s) not kept: the backup has them)"
        ),
        head + entry.format(comment=""): ")",  # '#team' is inside quotes
    }
    for text, said in cases.items():
        config.write_text(text)
        done = cli("install", "--providers", "aws", "--bin-dir", str(tmp_path / "bin"),
                   "--config-out", str(config), "--target", str(target))  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"added our providers to {config} (its other providers kept{said}" in done.stdout
        [backup] = tmp_path.glob("config.yaml.credprovider-backup-*")
        assert backup.read_text() == text
        backup.unlink()


def test_migrate_says_the_comments_it_does_not_keep(tmp_path: Path) -> None:
    """migrate --write rewrites the kubelet's commented config as install does: said, before
    --write and after it, the backup holding them."""
    _their_plugin(tmp_path / "bin/team-registry-provider")
    target = fake_bundle(tmp_path / "bundle", "0.2.0")
    placed = cli("install", "--providers", "aws", "--bin-dir", f"{tmp_path}/bin", "--config-out",
                 f"{tmp_path}/other.yaml", "--target", str(target))  # fmt: skip
    assert placed.returncode == 0, placed.stderr
    config = tmp_path / "c.yaml"
    config.write_text(
        "# the platform team's\napiVersion: kubelet.config.k8s.io/v1\n"
        "kind: CredentialProviderConfig\nproviders:\n  - name: team-registry-provider\n"
        "    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        "    matchImages: [registry.example.com]  # ours\n    defaultCacheDuration: 10m\n"
    )
    flags = tmp_path / "kubeadm-flags.env"
    flags.write_text(
        f'KUBELET_KUBEADM_ARGS="--cloud-provider=aws --image-credential-provider-config={config}'
        f' --image-credential-provider-bin-dir={tmp_path}/bin"\n'
    )
    args = ("migrate", "--kubelet-flags-file", str(flags), "--config-out", str(config),
            "--bin-dir", f"{tmp_path}/bin", "--providers", "aws")  # fmt: skip
    said = "its 2 comment line(s) not kept: the backup has them; and put the plugins in"
    planned = cli(*args)
    assert planned.returncode == 0 and f"write {config} ({said}" in planned.stdout
    written = cli(*args, "--write")
    assert f"wrote {config} ({said}" in written.stdout, written.stdout + written.stderr
    [backup] = tmp_path.glob("c.yaml.credprovider-backup-*")
    assert "# the platform team's" in backup.read_text()

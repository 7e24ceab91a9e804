"""``credprovider install`` and ``migrate``: a node's bin dir and config, from scratch or from the
in-tree providers."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from credprovider.catalog import PLUGINS
from tests.helpers import BUNDLE_DIR
from tests.helpers import run_cli as cli
from tests.integration.cli.conftest import write

# --- install / migrate --------------------------------------------------------------------------------


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A stand-in bundle: an executable next to an _internal directory."""
    bundle = tmp_path / "bundle"
    (bundle / "_internal").mkdir(parents=True)
    exe = bundle / "credprovider"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return exe


def test_install_links_writes_a_valid_config_and_is_idempotent(
    tmp_path: Path, target: Path
) -> None:
    bin_dir, config = tmp_path / "plugins", tmp_path / "etc" / "credential-providers.yaml"
    azure_json = write(tmp_path / "azure.json", "{}")
    args = [
        "install",
        "--bin-dir",
        str(bin_dir),
        "--config-out",
        str(config),
        "--target",
        str(target),
        "--azure-config",
        str(azure_json),
    ]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    for plugin in PLUGINS.values():
        assert os.readlink(bin_dir / plugin.name) == str(target)
    loaded = yaml.safe_load(config.read_text())
    assert [p["name"] for p in loaded["providers"]] == [p.name for p in PLUGINS.values()]
    assert loaded["providers"][1]["args"] == [str(azure_json)]
    assert f"--image-credential-provider-config={config}" in first.stdout
    assert f"--image-credential-provider-bin-dir={bin_dir}" in first.stdout
    assert (
        json.loads(cli("validate", str(config), "--bin-dir", str(bin_dir), "--json").stdout)[
            "warnings"
        ]
        == []
    )
    second = cli(*args)
    assert second.returncode == 0
    assert "unchanged" in second.stdout and "linked" not in second.stdout


def test_install_never_overwrites_a_different_file_without_force(
    tmp_path: Path, target: Path
) -> None:
    bin_dir, config = tmp_path / "plugins", tmp_path / "config.yaml"
    bin_dir.mkdir()
    (bin_dir / "ecr-credential-provider").write_text("someone else's plugin")
    args = [
        "install",
        "--bin-dir",
        str(bin_dir),
        "--config-out",
        str(config),
        "--target",
        str(target),
        "--providers",
        "aws",
    ]
    refused = cli(*args)
    assert refused.returncode == 1
    assert "exists and is not a link" in refused.stderr and "--force" in refused.stderr
    assert (bin_dir / "ecr-credential-provider").read_text() == "someone else's plugin"
    forced = cli(*args, "--force")
    assert forced.returncode == 0
    assert os.readlink(bin_dir / "ecr-credential-provider") == str(target)


def test_install_copy_puts_the_bundle_in_the_bin_dir(tmp_path: Path, target: Path) -> None:
    bin_dir = tmp_path / "plugins"
    result = cli(
        "install",
        "--bin-dir",
        str(bin_dir),
        "--config-out",
        str(tmp_path / "c.yaml"),
        "--target",
        str(target),
        "--providers",
        "gcp",
        "--copy",
    )
    assert result.returncode == 0, result.stderr
    assert (bin_dir / ".credprovider" / "_internal").is_dir()
    assert os.readlink(bin_dir / "auth-provider-gcp") == str(
        bin_dir / ".credprovider" / "credprovider"
    )


def test_install_from_the_bundle_links_to_itself(tmp_path: Path, bin_dir: Path) -> None:
    plugins = tmp_path / "node-bin"
    result = cli(
        "install",
        "--bin-dir",
        str(plugins),
        "--config-out",
        str(tmp_path / "c.yaml"),
        "--providers",
        "aws",
        "--json",
        use_bundle=True,
    )
    assert result.returncode == 0, result.stderr
    assert (
        Path(os.readlink(plugins / "ecr-credential-provider"))
        == (BUNDLE_DIR / "credprovider").resolve()
    )
    # The link is to the launcher (not the interpreter in _internal/), and it runs.
    linked = subprocess.run(
        [str(plugins / "ecr-credential-provider"), "--version"], capture_output=True, check=False
    )
    assert linked.returncode == 0, linked.stderr
    assert linked.stdout.startswith(b"ecr-credential-provider version ")


def test_install_needs_a_target_from_source(tmp_path: Path) -> None:
    result = cli(
        "install", "--bin-dir", str(tmp_path / "b"), "--config-out", str(tmp_path / "c.yaml")
    )
    assert result.returncode == 1 and "pass --target" in result.stderr


@pytest.mark.parametrize(
    ("flags", "providers", "removed", "azure_args"),
    [
        (
            "--cloud-provider=aws --feature-gates=DisableKubeletCloudCredentialProviders=false,Other=true",
            ["aws"],
            [
                "--cloud-provider=aws",
                "DisableKubeletCloudCredentialProviders from "
                "--feature-gates=DisableKubeletCloudCredentialProviders=false,Other=true",
            ],
            None,
        ),
        (
            "--cloud-provider azure --azure-container-registry-config=/etc/kubernetes/acr.json",
            ["azure"],
            [
                "--cloud-provider azure",
                "--azure-container-registry-config=/etc/kubernetes/acr.json",
            ],
            ["/etc/kubernetes/acr.json"],
        ),
        (
            "--cloud-provider=azure --cloud-config=/etc/kubernetes/azure.json",
            ["azure"],
            ["--cloud-provider=azure"],
            ["/etc/kubernetes/azure.json"],
        ),
        ("--cloud-provider=gce --v=2", ["gcp"], ["--cloud-provider=gce"], None),
        ("--cloud-provider=external", [], [], None),
    ],
)
def test_migrate(
    flags: str, providers: list[str], removed: list[str], azure_args: list[str] | None
) -> None:
    plan = json.loads(cli("migrate", f"--kubelet-flags={flags}", "--json").stdout)
    assert (plan["providers"], plan["removeFlags"]) == (providers, removed)
    assert any("cloud controller manager" in note for note in plan["notes"])
    if providers:
        assert "--cloud-provider=external" in plan["addFlags"]
        config = yaml.safe_load(plan["config"])
        assert [p["name"] for p in config["providers"]] == [PLUGINS[k].name for k in providers]
        if azure_args:
            assert config["providers"][0]["args"] == azure_args
    else:
        assert plan["config"] == ""


def test_migrate_reads_a_kubelet_configuration(tmp_path: Path) -> None:
    kubelet_config = write(
        tmp_path / "kubelet.yaml",
        "apiVersion: kubelet.config.k8s.io/v1beta1\n"
        "kind: KubeletConfiguration\nfeatureGates:\n  DisableKubeletCloudCredentialProviders: true\n"
        "imageCredentialProviderConfigPath: /etc/old.yaml\n",
    )
    plan = json.loads(
        cli(
            "migrate",
            "--kubelet-flags=--cloud-provider=aws",
            "--kubelet-config",
            str(kubelet_config),
            "--json",
        ).stdout
    )
    notes = " ".join(plan["notes"])
    assert "DisableKubeletCloudCredentialProviders feature gate is locked on" in notes
    assert "already configured (/etc/old.yaml)" in notes


def test_migrate_without_input_is_a_usage_error() -> None:
    result = cli("migrate")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(
        "credprovider migrate: nothing to read: give the kubelet's flags"
    )


def test_migrate_reads_kubeadm_flags_env_and_takes_providers(tmp_path: Path) -> None:
    flags_env = write(
        tmp_path / "kubeadm-flags.env",
        'KUBELET_KUBEADM_ARGS="--cloud-provider=external --node-ip=10.0.0.5"\n',
    )
    plan = json.loads(
        cli(
            "migrate", "--kubelet-flags-file", str(flags_env), "--providers", "aws,gcp", "--json"
        ).stdout
    )
    assert plan["providers"] == ["aws", "gcp"]
    assert plan["config"].startswith("# Written by credprovider migrate. ")
    missing = cli("migrate", "--kubelet-flags-file", str(tmp_path / "nope.env"))
    assert missing.returncode == 1
    assert (
        missing.stderr
        == f"credprovider migrate: {tmp_path / 'nope.env'}: no such file or directory\n"
    )
    unknown = cli("migrate", "--kubelet-flags=--cloud-provider=external", "--providers", "gce")
    assert unknown.returncode == 1 and "unknown provider gce" in unknown.stderr

"""``credprovider install`` and ``migrate``: a node's bin dir and config, from scratch or from the
in-tree providers."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from credprovider.tool.catalog import PLUGINS
from credprovider.tool.node.trust import untrusted
from release.bundle import BUNDLE_DIR
from tests.helpers import run_cli as cli
from tests.integration.cli.conftest import fake_bundle, write

# --- install / migrate --------------------------------------------------------------------------------


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A stand-in bundle (tests/integration/cli/conftest.py)."""
    return fake_bundle(tmp_path / "bundle", "0.2.0")


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
    defaults = [plugin for plugin in PLUGINS.values() if not plugin.opt_in]
    for plugin in defaults:
        assert os.readlink(bin_dir / plugin.name) == str(target)
    assert not (bin_dir / PLUGINS["registries"].name).exists()  # opt-in: only when named
    loaded = yaml.safe_load(config.read_text())
    assert [p["name"] for p in loaded["providers"]] == [p.name for p in defaults]
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
    assert "not a credprovider link" in refused.stderr and "--force" in refused.stderr
    assert (bin_dir / "ecr-credential-provider").read_text() == "someone else's plugin"
    forced = cli(*args, "--force")
    assert forced.returncode == 0
    assert os.readlink(bin_dir / "ecr-credential-provider") == str(target)
    backups = list(bin_dir.glob("ecr-credential-provider.credprovider-backup-*"))
    assert [b.read_text() for b in backups] == ["someone else's plugin"]
    assert f"the old one kept as {backups[0]}" in forced.stdout


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


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a noexec tmpfs in a namespace of its own")
def test_install_copy_onto_a_noexec_mount_is_refused_before_any_copy(
    tmp_path: Path, target: Path
) -> None:
    """--copy into a bin dir whose filesystem is mounted noexec (COS's /var): nothing copied
    there could run, so the install is refused at its plan, nothing written (before: 50 MB
    copied, then every plugin failing its start check); without --copy the links name the bundle,
    which runs from its own mount."""
    import sys

    from release.bundle import REPO
    from tests.helpers import private

    mount = tmp_path / "var"
    mount.mkdir()
    install = [sys.executable, "-m", "credprovider", "credprovider", "install", "--bin-dir",
               f"{mount}/bin", "--config-out", f"{mount}/c.yaml", "--target", str(target),
               "--providers", "gcp"]  # fmt: skip
    script = (
        'mount -t tmpfs -o noexec noexec "$0" && "$@" --copy; echo "copy $?"; '
        'find "$0" -mindepth 1 | wc -l; "$@"; echo "link $?"'
    )
    done = subprocess.run(
        private(["sh", "-c", script, str(mount), *install]),
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert "copy 1" in lines and "0" in lines, done.stdout + done.stderr
    assert "the bin dir's filesystem is mounted noexec" in done.stdout + done.stderr
    assert "link 0" in lines, done.stdout + done.stderr


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


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"defaultCacheDuration": "5x"}, 'time: unknown unit "x" in duration "5x"'),
        ({"defaultCacheDuration": "-5m"}, "must be greater than or equal to 0"),
        ({"tokenAttributes": {"serviceAccountTokenAudience": "sts.amazonaws.com",
                              "requireServiceAccount": True, "cacheType": "token"}},
         'cacheType: Unsupported value: "token"'),
        ({"args": ["--regon", "us-east-1"]},
         "refuses its args: ecr-credential-provider: error: unrecognized arguments: --regon"),
    ],
)  # fmt: skip
def test_install_never_writes_settings_the_kubelet_or_plugin_refuses(
    tmp_path: Path, settings: dict[str, object], said: str
) -> None:
    """A typo in --provider-settings, over a node's working install (the config its kubelet
    reads): refused before anything changes, with the kubelet's (or the plugin's) words. Written,
    a bad duration or tokenAttributes keeps the kubelet from starting at its next restart, and args
    the plugin refuses fail every pull it matches."""
    plugins, config = tmp_path / "node-bin", tmp_path / "c.yaml"
    common = ("install", "--bin-dir", str(plugins), "--config-out", str(config), "--providers")
    assert cli(*common, "aws", use_bundle=True).returncode == 0
    before = {p.name: p.read_bytes() for p in (config, *plugins.iterdir())}
    done = cli(*common, "aws,gcp", "--force", "--provider-settings", json.dumps({"aws": settings}),
               use_bundle=True)  # fmt: skip
    assert done.returncode == 1
    assert said in done.stderr and "nothing was changed" in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert {p.name: p.read_bytes() for p in (config, *plugins.iterdir())} == before
    assert not list(tmp_path.glob("*backup*"))


def test_install_needs_a_target_from_source(tmp_path: Path) -> None:
    result = cli(
        "install", "--bin-dir", str(tmp_path / "b"), "--config-out", str(tmp_path / "c.yaml")
    )
    assert result.returncode == 1 and "pass --target" in result.stderr


def test_install_refuses_a_target_that_is_not_credprovider(tmp_path: Path) -> None:
    """--target /bin/true: nothing is linked or written, and the line says why."""
    bin_dir, config = tmp_path / "b", tmp_path / "c.yaml"
    result = cli(
        "install", "--bin-dir", str(bin_dir), "--config-out", str(config), "--target", "/bin/true"
    )
    assert result.returncode == 1
    assert "is not a working credprovider executable" in result.stderr
    assert "nothing was installed" in result.stderr
    assert not bin_dir.exists() and not config.exists()


def _install(tmp_path: Path, target: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli(
        "install",
        "--bin-dir",
        str(tmp_path / "plugins"),
        "--config-out",
        str(tmp_path / "c.yaml"),
        "--target",
        str(target),
        "--providers",
        "aws,gcp",
        "--json",
        *extra,
    )


def test_install_is_all_or_nothing_and_lists_every_step(tmp_path: Path, target: Path) -> None:
    """A config with other content is refused: no link is made, and --json lists each step."""
    write(tmp_path / "c.yaml", "# the operator's own config\n")
    result = _install(tmp_path, target)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["applied"] is False
    assert [(c["action"], c["refused"] is not None) for c in report["changes"]] == [
        ("link", False),
        ("link", False),
        ("write", True),
    ]
    assert "nothing was changed: 1 step(s) refused" in result.stderr
    assert not (tmp_path / "plugins").exists()
    assert (tmp_path / "c.yaml").read_text() == "# the operator's own config\n"
    forced = json.loads(_install(tmp_path, target, "--force").stdout)
    assert forced["applied"] is True and forced["errors"] == []
    backup = Path(forced["changes"][2]["backup"])
    assert backup.read_text() == "# the operator's own config\n"
    assert len(forced["checked"]) == 2, forced["checked"]


def test_install_does_not_turn_a_linked_config_into_a_file_without_force(
    tmp_path: Path, target: Path
) -> None:
    """A config that is a link (into config management's tree) holding other providers: adding
    ours would replace the link with a file, and what config management writes would no longer
    reach the kubelet. Refused without --force, naming the link's target to write instead."""
    managed = tmp_path / "managed" / "providers.yaml"
    managed.parent.mkdir()
    theirs = {"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig",
              "providers": [{"name": "their-plugin", "matchImages": ["r.example.com"],
                             "defaultCacheDuration": "1m",
                             "apiVersion": "credentialprovider.kubelet.k8s.io/v1"}]}  # fmt: skip
    managed.write_text(yaml.safe_dump(theirs))
    (tmp_path / "c.yaml").symlink_to("managed/providers.yaml")  # relative, as ln -s makes it
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "their-plugin").symlink_to(target)
    before = managed.read_text()
    refused = _install(tmp_path, target)
    assert refused.returncode == 1
    [config] = [c for c in json.loads(refused.stdout)["changes"] if c["action"] == "write"]
    assert config["refused"] == (
        f"it is a link to {managed}, which writing would replace with a file: pass --force to "
        f"replace the link (it is kept as a backup), or give --config-out {managed}"
    )
    assert (tmp_path / "c.yaml").is_symlink() and managed.read_text() == before
    done = cli("install", "--bin-dir", str(tmp_path / "plugins"), "--config-out", str(managed),
               "--target", str(target), "--providers", "aws,gcp")  # fmt: skip
    assert done.returncode == 0, done.stderr
    names = [p["name"] for p in yaml.safe_load((tmp_path / "c.yaml").read_text())["providers"]]
    assert names == ["their-plugin", "ecr-credential-provider", "auth-provider-gcp"]
    assert (tmp_path / "c.yaml").is_symlink()


def test_install_upgrades_links_into_an_older_bundle_without_force(
    tmp_path: Path, target: Path
) -> None:
    old = fake_bundle(tmp_path / "credprovider-0.1.0", "0.1.0")
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "ecr-credential-provider").symlink_to(old)
    (plugins / "auth-provider-gcp").symlink_to(old)
    result = _install(tmp_path, target)
    assert result.returncode == 0, result.stderr
    changes = json.loads(result.stdout)["changes"]
    assert [c["action"] for c in changes] == ["upgrade", "upgrade", "write"]
    assert "upgrade from 0.1.0 to 0.2.0" in changes[0]["detail"]
    assert os.readlink(plugins / "ecr-credential-provider") == str(target)
    assert not list(plugins.glob("*backup*"))


def test_install_copy_compares_version_and_content(tmp_path: Path) -> None:
    """--copy: the same bundle again is unchanged; another version replaces the copy (an upgrade,
    no --force), and the links never point at nothing."""
    first = fake_bundle(tmp_path / "v1", "0.1.0")
    assert _install(tmp_path, first, "--copy").returncode == 0
    again = json.loads(_install(tmp_path, first, "--copy").stdout)["changes"]
    assert again[0]["action"] == "unchanged"
    second = fake_bundle(tmp_path / "v2", "0.2.0")
    upgraded = _install(tmp_path, second, "--copy")
    assert upgraded.returncode == 0, upgraded.stderr
    copy = json.loads(upgraded.stdout)["changes"][0]
    assert copy["action"] == "upgrade" and "upgrade from 0.1.0 to 0.2.0" in copy["detail"]
    linked = subprocess.run(
        [str(tmp_path / "plugins" / "ecr-credential-provider"), "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert linked.stdout == "ecr-credential-provider version 0.2.0 (credprovider)\n"
    found = sorted(p.name for p in (tmp_path / "plugins").iterdir())
    # the copy it replaced is kept for credprovider undo (only the last change's: the next
    # change's record replaces it)
    assert found[0] == ".credprovider" and found[2:] == [
        "auth-provider-gcp",
        "ecr-credential-provider",
    ]
    kept = tmp_path / "plugins" / found[1]
    assert found[1].startswith(".credprovider.credprovider-backup-")
    assert "0.1.0" in (kept / "credprovider").read_text()


@pytest.mark.parametrize(
    ("flags", "providers", "removed", "azure_args"),
    [
        (
            "--cloud-provider=aws --feature-gates=DisableKubeletCloudCredentialProviders=false,Other=true",
            ["aws"],
            [
                "--cloud-provider=aws",
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
    """The gates are rewritten in the KubeletConfiguration; a credential provider path there is
    a key no KubeletConfiguration has: the kubelet ignores it, so the providers of that file are
    not on the node and are not merged (only the flag names the config the kubelet reads)."""
    old = write(
        tmp_path / "old.yaml",
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        "- {name: corp-login, matchImages: [registry.corp.example], defaultCacheDuration: 1m, "
        "apiVersion: credentialprovider.kubelet.k8s.io/v1}\n",
    )
    kubelet_config = write(
        tmp_path / "kubelet.yaml",
        "apiVersion: kubelet.config.k8s.io/v1beta1\n"
        "kind: KubeletConfiguration\nfeatureGates:\n  DisableKubeletCloudCredentialProviders: true\n"
        f"imageCredentialProviderConfigPath: {old}\n",
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
    assert (
        f"{kubelet_config} sets imageCredentialProviderConfigPath, which no KubeletConfiguration "
        "has: the kubelet ignores it (the setting is the flag --image-credential-provider-config)"
    ) in notes
    assert "corp-login" not in notes
    assert [p["name"] for p in yaml.safe_load(plan["config"])["providers"]] == [
        "ecr-credential-provider"
    ]
    with_flag = json.loads(
        cli(
            "migrate",
            f"--kubelet-flags=--cloud-provider=aws --image-credential-provider-config={old}",
            "--json",
        ).stdout
    )
    assert [p["name"] for p in yaml.safe_load(with_flag["config"])["providers"]] == [
        "corp-login",
        "ecr-credential-provider",
    ]
    assert plan["files"] == {
        str(kubelet_config): "apiVersion: kubelet.config.k8s.io/v1beta1\n"
        f"kind: KubeletConfiguration\nfeatureGates: {{}}\nimageCredentialProviderConfigPath: {old}\n"
    }


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
    assert unknown.returncode == 2 and unknown.stderr == (
        "credprovider migrate: --providers takes a comma list of aws, azure, gcp, registries "
        "(not gce)\n"
    )


@pytest.mark.parametrize(
    "providers", ["ecr", "aws,ecr", ",", "aws,registry", "ecr-credential-provider"]
)
def test_install_names_a_provider_it_does_not_know_in_one_line(
    tmp_path: Path, providers: str
) -> None:
    """An operator's typo in --providers (a registry's name, a plugin's short name): one line
    naming the choices, exit 2, nothing written (it was a KeyError traceback for ``ecr``)."""
    done = cli(
        "install", "--providers", providers, "--bin-dir", str(tmp_path),
        "--config-out", str(tmp_path / "c.yaml"),
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr.startswith(
            "credprovider install: --providers takes a comma list of aws, azure, gcp, registries"
        )
        and len(done.stderr.splitlines()) == 1
    )
    assert list(tmp_path.iterdir()) == []
    if providers == "ecr-credential-provider":  # the plugin's name: its key said
        assert "ecr-credential-provider is the plugin of aws)" in done.stderr


@pytest.mark.parametrize(
    ("bin_dir", "config_out", "said"),
    [
        ("f", "c.yaml", "{tmp}/f is not a directory: nothing was changed"),
        ("f/bin", "c.yaml", "{tmp}/f is not a directory, so {tmp}/f/bin cannot be made in it"),
        ("bin", "f/c.yaml", "{tmp}/f is not a directory: nothing was changed"),
        ("bin", "f/d/c.yaml", "{tmp}/f is not a directory, so {tmp}/f/d cannot be made in it"),
    ],
)
def test_a_file_where_a_directory_goes_is_said_as_such(
    tmp_path: Path, target: Path, bin_dir: str, config_out: str, said: str
) -> None:
    """A typo that names a file as the bin dir, or a path under a file: one line naming the file
    (not "a read-only file system?", nor the journal's path beside the config), nothing made."""
    (tmp_path / "f").write_text("theirs\n")
    done = cli("install", "--providers", "aws", "--bin-dir", f"{tmp_path}/{bin_dir}",
               "--config-out", f"{tmp_path}/{config_out}", "--target", str(target))  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("credprovider install: " + said.format(tmp=tmp_path))
    assert len(done.stderr.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "f"]
    if bin_dir == "bin":
        done = cli("migrate", "--kubelet-flags=--cloud-provider=aws", "--bin-dir",
                   f"{tmp_path}/bin", "--config-out", f"{tmp_path}/{config_out}",
                   "--write")  # fmt: skip
        assert done.returncode == 1
        assert done.stderr.startswith("credprovider migrate: " + said.format(tmp=tmp_path))
        assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "f"]


@pytest.mark.skipif(os.geteuid() != 0, reason="root installing from another user's bundle")
@pytest.mark.parametrize("who", ["owner", "group", "others"])
def test_root_never_links_the_plugins_into_a_bundle_another_user_can_change(
    tmp_path: Path, target: Path, who: str
) -> None:
    """A bundle unpacked in a user's home (owned by them, or writable by their group, or by
    anyone: a umask of 000): root's install linked the kubelet's plugins into it, and that user
    then ran code as root at the next pull. Refused, nothing made; --copy puts a copy that is
    root's in the bin dir, writable by no one else (the copy kept the source's g+w and o+w)."""
    bundle = target.parent
    for path in (bundle, *bundle.rglob("*")):
        if who == "owner":
            os.lchown(path, 65534, 65534)
        elif not path.is_symlink():
            os.chown(path, 0, 65534)
            path.chmod(path.stat().st_mode | (0o020 if who == "group" else 0o002))
    args = ["install", "--providers", "aws", "--bin-dir", str(tmp_path / "bin"),
            "--config-out", str(tmp_path / "c.yaml"), "--target", str(target)]  # fmt: skip
    done = cli(*args)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert (
        done.stderr.startswith(
            f"credprovider install: nothing was changed: the bundle {bundle} is not root's alone ("
        )
        and "install --copy" in done.stderr
    ), done.stderr
    assert not (tmp_path / "bin").exists() and not (tmp_path / "c.yaml").exists()
    done = cli(*args, "--copy")
    assert done.returncode == 0, done.stderr
    copy = tmp_path / "bin" / ".credprovider" / "credprovider"
    assert untrusted(str(copy), user=0) == ""  # root's, its group root, no one else writes it
    loose = [
        str(path)
        for path in (copy.parent, *copy.parent.rglob("*"))
        if not path.is_symlink() and path.lstat().st_mode & 0o6022
    ]
    assert loose == []


@pytest.mark.skipif(os.geteuid() != 0, reason="a kubelet's directories are root's")
def test_install_under_a_loose_umask_makes_no_directory_others_can_change(
    tmp_path: Path, target: Path
) -> None:
    """Run with umask 000 (a root shell some images start with), install made the kubelet's new
    bin dir and config directory 0777: anyone could replace a plugin there, and the kubelet runs
    it as root. Each directory a change makes is 0755, whatever the umask; so is the copy's."""
    for extra in ((), ("--copy",)):
        out = tmp_path / ("copy" if extra else "link")
        done = cli(
            "install", "--providers", "aws", "--bin-dir", f"{out}/deep/bin",
            "--config-out", f"{out}/etc/cp/c.yaml", "--target", str(target), *extra,
            use_bundle=True, wrapper=["sh", "-c", 'umask 000 && exec "$@"', "sh"],
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        made = [p for p in out.rglob("*") if p.is_dir() and not p.is_symlink()]
        assert made and {oct(p.stat().st_mode & 0o777) for p in made} == {"0o755"}, made
        assert oct((out / "etc/cp/c.yaml").stat().st_mode & 0o777) == "0o644"


@pytest.mark.skipif(os.geteuid() != 0, reason="a kubelet's directories are root's")
@pytest.mark.parametrize("where", ["bin dir", "config"])
def test_root_puts_nothing_the_kubelet_runs_where_others_can_change_it(
    tmp_path: Path, target: Path, where: str
) -> None:
    """A bin dir (or the config's directory) any user may write in: install linked the plugins
    there, and migrate --write wrote the config there, for the kubelet to run as root whatever
    another user put in its place. Refused, nothing made; a directory with the sticky bit (as
    /tmp) is not refused, since others cannot replace what root put there."""
    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o777)
    open_dir.chmod(0o777)
    safe = tmp_path / "safe"
    bin_dir = open_dir / "bin" if where == "bin dir" else safe / "bin"
    config = safe / "c.yaml" if where == "bin dir" else open_dir / "c.yaml"
    said = (
        f"nothing was changed: {bin_dir if where == 'bin dir' else open_dir} is not root's alone "
        f"({open_dir} is writable by others (mode drwxrwxrwx)): the kubelet runs as root what it "
        "finds there"
    )
    for args in (
        ("install", "--providers", "aws", "--target", str(target)),
        ("migrate", "--kubelet-flags=--cloud-provider=aws", "--write"),
    ):
        done = cli(*args, "--bin-dir", str(bin_dir), "--config-out", str(config), use_bundle=True)
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        assert done.stderr.startswith(f"credprovider {args[0]}: {said}"), done.stderr
        assert not safe.exists() and list(open_dir.iterdir()) == []
    open_dir.chmod(0o1777)  # sticky: as /tmp
    done = cli("install", "--providers", "aws", "--target", str(target), "--bin-dir",
               str(bin_dir), "--config-out", str(config), use_bundle=True)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_providers_are_taken_in_any_case(tmp_path: Path, target: Path) -> None:
    """``--providers AWS,Gcp`` is aws and gcp: the keys have one spelling, in lower case."""
    done = cli("install", "--providers", "AWS,Gcp", "--bin-dir", str(tmp_path / "bin"),
               "--config-out", str(tmp_path / "c.yaml"), "--target", str(target))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "bin").iterdir()) == [
        "auth-provider-gcp", "ecr-credential-provider"]  # fmt: skip


def test_install_as_adds_a_second_provider_of_a_plugin_beside_the_first(
    tmp_path: Path, target: Path
) -> None:
    """#33: a second identity for the same plugin: install --as NAME links NAME and adds its entry
    to the config, keeping every provider already there (a backup of the old config is kept)."""
    bin_dir, config = tmp_path / "plugins", tmp_path / "etc" / "credential-providers.yaml"
    common = ["--bin-dir", str(bin_dir), "--config-out", str(config), "--target", str(target)]
    assert cli("install", "--providers", "aws", *common).returncode == 0
    before = yaml.safe_load(config.read_text())["providers"]
    added = cli("install", "--as", "ecr-credential-provider-prod", *common)
    assert added.returncode == 0, added.stderr
    assert f"added provider ecr-credential-provider-prod to {config}" in added.stdout
    assert os.readlink(bin_dir / "ecr-credential-provider-prod") == str(target)
    providers = yaml.safe_load(config.read_text())["providers"]
    assert providers[0] == before[0]
    assert providers[1] == {**before[0], "name": "ecr-credential-provider-prod"}
    assert len(list(config.parent.glob(f"{config.name}.credprovider-backup-*"))) == 1
    # validate knows the suffixed provider as ECR's plugin, and says the two overlap
    verdict = json.loads(cli("validate", str(config), "--json").stdout)
    assert any(
        w.startswith(
            "providers 'ecr-credential-provider' and 'ecr-credential-provider-prod' both match "
            "images such as "
        )
        for w in verdict["warnings"]
    ), verdict["warnings"]
    again = cli("install", "--as", "ecr-credential-provider-prod", *common)
    assert again.returncode == 0 and "unchanged" in again.stdout and "added" not in again.stdout


@pytest.mark.parametrize(
    "name", ["ecr-credential-provider", "ecr-credential-providerx", "nope-prod", "../x-prod"]
)
def test_install_as_takes_only_a_suffixed_plugin_name(
    tmp_path: Path, target: Path, name: str
) -> None:
    result = cli(
        "install", "--as", name, "--bin-dir", str(tmp_path / "b"),
        "--config-out", str(tmp_path / "c.yaml"), "--target", str(target),
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"credprovider install: --as {name!r} is not a plugin name with a suffix: give "
        "<plugin name>-<suffix>, e.g. ecr-credential-provider-prod\n"
    )
    assert not (tmp_path / "b").exists() and not (tmp_path / "c.yaml").exists()


def test_install_as_refuses_a_config_that_is_not_text_in_one_line(
    tmp_path: Path, target: Path
) -> None:
    """A binary file where the config should be: the usual refusal, not a traceback."""
    config = tmp_path / "c.yaml"
    config.write_bytes(b"\xff\xfe\x00not yaml")
    result = cli(
        "install", "--as", "ecr-credential-provider-prod", "--bin-dir", str(tmp_path / "b"),
        "--config-out", str(config), "--target", str(target),
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr == (
        f"credprovider install: nothing was changed: 1 step(s) refused (first: refused: replace "
        f"{config}: it exists with other content: pass --force to replace it (a backup is kept))\n"
    )
    assert config.read_bytes() == b"\xff\xfe\x00not yaml" and not (tmp_path / "b").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="a node of the test's own (mount namespace)")
def test_token_attributes_are_checked_for_this_nodes_kubelet(tmp_path: Path) -> None:
    """A node whose kubelet is 1.33 (its binary, in the kubeadm node's layout, says so; none
    running): tokenAttributes need its feature gate on (off by default until 1.34), or the
    kubelet refuses the config and does not start. install refuses them before anything changes
    and validate (this node's config) says so, as doctor does; with the gate in its flags, both
    take them. The version and the gate are read as doctor reads them."""
    import sys

    from tests.helpers import node_script

    target = fake_bundle(tmp_path / "bundle", "0.1.0")
    settings = json.dumps({"aws": {"tokenAttributes": {
        "serviceAccountTokenAudience": "sts.amazonaws.com", "cacheType": "ServiceAccount",
        "requireServiceAccount": True}}})  # fmt: skip
    flags = (f"--image-credential-provider-config={tmp_path}/c.yaml "
             f"--image-credential-provider-bin-dir={tmp_path}/bin")  # fmt: skip
    tool = f"{sys.executable} -m credprovider credprovider"
    install = (f"{tool} install --bin-dir {tmp_path}/bin --config-out {tmp_path}/c.yaml "
               f"--providers aws --target {target} --provider-settings '{settings}'")  # fmt: skip
    gate = "--feature-gates=KubeletServiceAccountTokenForCredentialProviders=true"
    script = f"""
mount -t tmpfs -o mode=755 t /usr/local/bin
printf '#!/bin/sh\\necho Kubernetes v1.33.2\\n' > /usr/local/bin/kubelet
chmod 755 /usr/local/bin/kubelet
mount -t tmpfs -o mode=755 t /var/lib
mkdir /var/lib/kubelet
echo 'KUBELET_KUBEADM_ARGS="{flags}"' > /var/lib/kubelet/kubeadm-flags.env
{install}; echo "install: $?"; ls {tmp_path} | grep -c yaml
echo 'KUBELET_KUBEADM_ARGS="{flags} {gate}"' > /var/lib/kubelet/kubeadm-flags.env
{install} >/dev/null; echo "gated: $?"
strace -f -qq -e trace=openat,open -o {tmp_path}/trace {install} >/dev/null 2>&1
echo "flags read: $(grep -c kubeadm-flags.env {tmp_path}/trace)"
{tool} validate >/dev/null; echo "validate gated: $?"
echo 'KUBELET_KUBEADM_ARGS="{flags}"' > /var/lib/kubelet/kubeadm-flags.env
{tool} validate; echo "validate: $?"
{tool} validate {tmp_path}/c.yaml >/dev/null; echo "validate named: $?"
cp {tmp_path}/c.yaml {tmp_path}/elsewhere.yaml
{tool} validate {tmp_path}/elsewhere.yaml >/dev/null; echo "validate elsewhere: $?"
"""
    done = node_script(script)
    lines = (done.stdout + done.stderr).splitlines()
    refusal = (
        "tokenAttributes is not supported when KubeletServiceAccountTokenForCredentialProviders "
        "feature gate is disabled"
    )
    installed = lines.index("install: 1")
    assert lines[installed + 1] == "0", lines  # no config written
    assert any(refusal + "; nothing is written that it would refuse" in line for line in lines)
    assert "gated: 0" in lines and "validate gated: 0" in lines, lines
    # one reading of the node decides the run: its flags file read once (a default path, the gate,
    # whether the flags name what was installed)
    assert "flags read: 1" in lines or not shutil.which("strace"), lines
    # its config named by its path too; a copy no kubelet here reads: the current rules
    assert "validate: 1" in lines and "validate named: 1" in lines, lines
    assert "validate elsewhere: 0" in lines, lines
    assert any(line.startswith("invalid: ") and refusal in line for line in lines), lines


@pytest.mark.parametrize("long", ["--as", "--config-out", "--bin-dir"])
def test_a_name_too_long_to_write_changes_nothing_and_leaves_no_journal(
    tmp_path: Path, target: Path, long: str
) -> None:
    """``--as ecr-credential-provider-<250 letters>``: the link's name is too long for any file
    system; install failed at that op, every time, and the journal it left made every later
    install fail as well ("cannot write .../credprovider: File name too long"). Every name a
    change makes (its temporary and backup names too) is checked before anything is written."""
    name = "x" * 240
    values = {
        "--as": ("--as", f"ecr-credential-provider-{name[:232]}"),
        "--config-out": ("--config-out", f"{tmp_path}/cfg/{name}.yaml"),
        "--bin-dir": ("--bin-dir", f"{tmp_path}/{name}"),
    }
    args = {"--bin-dir": f"{tmp_path}/bin", "--config-out": f"{tmp_path}/cfg/c.yaml"}
    option, value = values[long]
    args[option] = value
    flat = [word for pair in args.items() for word in pair]
    done = cli("install", "--providers", "aws", "--target", str(target), *flat, use_bundle=True)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr.startswith("credprovider install: nothing was changed: "), done.stderr
    assert "is too long (a name in it is " in done.stderr and "give a shorter name" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]
    # nothing is left in the way of the next install
    again = cli("install", "--providers", "aws", "--target", str(target), "--bin-dir",
                f"{tmp_path}/bin", "--config-out", f"{tmp_path}/cfg/c.yaml")  # fmt: skip
    assert again.returncode == 0, again.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs root")
def test_an_immutable_config_says_so_and_the_node_is_left_as_it_was(
    tmp_path: Path, target: Path
) -> None:
    """A config made immutable (``chattr +i``, as some hardening does): root's install was told
    "[Errno 1] Operation not permitted: 'c.yaml' -> 'c.yaml.credprovider-backup-...'", and the
    next run "cannot write ... as uid 0: run it as root"; the plugins it had linked stayed, with
    a journal that every later run could not finish. Each says now what refused root, and puts
    back what it had done (change/abort.py): the node as it was; once mended, an install works."""
    config = tmp_path / "cfg" / "c.yaml"
    config.parent.mkdir()
    config.write_text("apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\n"
                      "providers: []\n")  # fmt: skip
    if subprocess.run(["chattr", "+i", str(config)], capture_output=True).returncode != 0:
        pytest.skip("this file system keeps no immutable flag")
    args = ("install", "--providers", "aws", "--target", str(target), "--bin-dir",
            f"{tmp_path}/bin", "--config-out", str(config))  # fmt: skip
    try:
        first, second = cli(*args, use_bundle=True), cli(*args, use_bundle=True)
    finally:
        subprocess.run(["chattr", "-i", str(config)], check=True)
    refused = (
        ": Operation not permitted, even as root (is a file there immutable, "
        f"'lsattr {config.parent}' showing an 'i'? or a security module refusing it?)"
    )
    for run in (first, second):
        assert run.returncode == 1 and refused in run.stderr, run.stderr
        assert run.stderr.endswith(
            ": nothing was changed (what it had changed, 1 path, put back as it was)\n"
        ), run.stderr
    assert "as uid 0" not in first.stderr + second.stderr
    assert not (tmp_path / "bin").exists()
    assert [p.name for p in config.parent.iterdir()] == ["c.yaml"]  # no backup, no journal
    third = cli(*args, use_bundle=True)
    assert third.returncode == 0, third.stderr
    assert "earlier run" not in third.stderr
    assert "ecr-credential-provider" in config.read_text()


def test_a_config_that_gives_a_secret_is_written_for_root_alone(
    tmp_path: Path, target: Path
) -> None:
    """--provider-settings (the chart's providerSettings) giving the plugin a static key in its
    env: install wrote it into a 0644 config, which every user of the node could read. A config
    that gives a secret is written 0600; validate warns of one others may read."""
    config = tmp_path / "c.yaml"
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    settings = json.dumps({"aws": {"env": {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
                                           "AWS_SECRET_ACCESS_KEY": secret}}})  # fmt: skip
    done = cli("install", "--providers", "aws", "--bin-dir", f"{tmp_path}/bin", "--config-out",
               str(config), "--target", str(target), "--provider-settings", settings)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert oct(config.stat().st_mode & 0o777) == "0o600"
    assert secret not in done.stdout + done.stderr
    checked = cli("validate", str(config))
    assert checked.returncode == 0 and "gives a secret" not in checked.stdout, checked.stdout
    config.chmod(0o644)
    checked = cli("validate", str(config))
    assert (
        "provider 'ecr-credential-provider': env 'AWS_SECRET_ACCESS_KEY' gives a secret in "
        f"{config}, which others may read (mode -rw-r--r--): chmod 600 {config}"
    ) in checked.stdout, checked.stdout
    assert secret not in checked.stdout + checked.stderr
    # without one, the config is the usual 0644
    plain = tmp_path / "plain.yaml"
    done = cli("install", "--providers", "aws", "--bin-dir", f"{tmp_path}/bin", "--config-out",
               str(plain), "--target", str(target))  # fmt: skip
    assert done.returncode == 0 and oct(plain.stat().st_mode & 0o777) == "0o644"


def test_install_dry_run_says_what_it_would_do_and_changes_nothing(
    tmp_path: Path, target: Path
) -> None:
    """An operator could not see what install would do before it did it (only migrate without
    --write, undo --dry-run and agent plan said so). --dry-run plans and checks as install does,
    prints each step and the flags, and changes nothing: not even a change a killed run left,
    which it names, or one it would refuse (exit 1)."""
    from tests.unit.tool.test_agent_apply import tree

    node = tmp_path / "node"
    (node / "etc").mkdir(parents=True)
    args = ("install", "--providers", "aws,gcp", "--target", str(target), "--bin-dir",
            f"{node}/bin", "--config-out", f"{node}/etc/c.yaml", "--dry-run")  # fmt: skip
    before = tree(str(node))
    done = cli(*args)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.splitlines() == [
        "install would (nothing was changed):",
        f"  link {node}/bin/ecr-credential-provider -> {target}",
        f"  link {node}/bin/auth-provider-gcp -> {target}",
        f"  write {node}/etc/c.yaml",
        "then add to the kubelet's flags:",
        f"  --image-credential-provider-config={node}/etc/c.yaml",
        f"  --image-credential-provider-bin-dir={node}/bin",
    ]
    assert tree(str(node)) == before
    journal = node / "etc/.c.yaml.credprovider-journal"
    journal.write_text('{"change": "install", "ops": []}')
    journal.chmod(0o600)
    (node / "etc/c.yaml").write_text("theirs: true\n")
    before = tree(str(node))
    refused = cli(*args, "--json")
    said = cli(*args, "--force", "--json")
    assert tree(str(node)) == before
    assert refused.returncode == 1 and "pass --force to replace it" in refused.stderr
    assert said.returncode == 0, said.stderr
    planned = json.loads(said.stdout)
    assert (planned["applied"], planned["dryRun"], planned["finishesFirst"]) == (
        False, True, str(journal),
    )  # fmt: skip
    assert [c["action"] for c in planned["changes"]] == ["link", "link", "write"]
    assert planned["changes"][2]["backup"].startswith(f"{node}/etc/c.yaml.credprovider-backup-")
    assert (
        "first finish the install an earlier run left part done (0 step(s) left"
        in cli(*args, "--force").stdout
    )
    # a journal install would refuse to finish: so does its dry run, with the same line
    shadow = base64.b64encode(b"root::0:0:99999:7:::\n").decode()
    journal.write_text(json.dumps({"change": "install", "ops": [
        {"kind": "file", "path": "/etc/shadow", "data": shadow, "backup": None}]}))  # fmt: skip
    forged = cli(*args, "--force")
    assert (forged.returncode, forged.stdout) == (1, ""), forged.stdout
    assert f"credprovider install: {journal} is not a change credprovider journals" in (
        forged.stderr
    ), forged.stderr
    assert os.path.isdir(node / "etc") and journal.exists()

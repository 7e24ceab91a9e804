"""``credprovider doctor``: discovery without flags (a running kubelet, each distribution's layout
under --root) and the chain's checks, each seeded fault caught with its fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from credprovider.tool.node.layouts import LAYOUTS, Layout
from emulators.aws import FakeEcr, ecr_env
from emulators.http import FakeServer
from release.bundle import BUNDLE_DIR
from tests.helpers import (
    config_file,
    fake_kubelet,
    private,
    provider_entry,
    require_bundle,
    run_cli,
)
from tests.integration.cli.conftest import doctor

CONFIG_TEXT = json.dumps(
    {
        "apiVersion": "kubelet.config.k8s.io/v1",
        "kind": "CredentialProviderConfig",
        "providers": [provider_entry()],
    }
)


def failures(report: dict[str, Any]) -> list[str]:
    return [c["message"] for c in report["checks"] if c["status"] == "fail"]


def _put(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


@pytest.mark.parametrize("layout", LAYOUTS, ids=[layout.name for layout in LAYOUTS])
def test_each_distribution_layout_is_found_under_root(tmp_path: Path, layout: Layout) -> None:
    root = tmp_path / "image"
    if layout.flag_files:  # kubeadm: the flags are in a flag file
        config, bin_dir = "/etc/kubernetes/credential-providers.json", "/opt/credential-providers"
        _put(
            root,
            layout.flag_files[0],
            f'KUBELET_KUBEADM_ARGS="--image-credential-provider-config={config} --image-credential-provider-bin-dir={bin_dir}"\n',
        )
    else:
        config, bin_dir = layout.config, layout.bin_dirs[0]
    (root / bin_dir.lstrip("/")).mkdir(parents=True, exist_ok=True)
    if config:
        _put(root, config, CONFIG_TEXT)
    _, report = doctor("--root", str(root), "--offline")
    assert report["foundBy"].startswith(f"layout {layout.name}")
    assert (report["config"], report["binDir"]) == (config or None, bin_dir)
    if config:  # read under --root, reported as the node names it
        assert any(c["area"] == "config" and c["status"] == "pass" for c in report["checks"])


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("", "--root '' does not exist"),  # os.path.abspath('') would be the working directory
        ("missing", "does not exist"),
        ("file", "is a regular file, not a directory"),
    ],
)
def test_a_root_that_is_no_directory_is_a_usage_error(
    tmp_path: Path, given: str, said: str
) -> None:
    """A typo in --root would read another tree (the working directory, for an empty one) as the
    node: one line, exit 2, nothing read."""
    (tmp_path / "file").write_text("")
    root = str(tmp_path / given) if given else ""
    done = run_cli("doctor", "--root", root, "--offline")
    assert (done.returncode, done.stdout) == (2, "")
    assert said in done.stderr and len(done.stderr.splitlines()) == 1


def test_an_empty_root_says_what_to_name(tmp_path: Path) -> None:
    code, report = doctor("--root", str(tmp_path), "--offline")
    assert code == 1
    assert failures(report) == [
        "no running kubelet and no known layout names a credential provider config"
    ]


@pytest.fixture
def node(tmp_path: Path, ecr: tuple[FakeEcr, FakeServer]) -> Iterator[dict[str, Path]]:
    """A 'kubelet' process (argv[0] kubelet) with the credential flags, a --config file with a
    staticPodPath and feature gates, a static pod, and the ECR emulator's settings in its
    environment (which its plugins inherit, and this tool's environment does not have)."""
    bin_dir, pods = tmp_path / "bin", tmp_path / "manifests"
    bin_dir.mkdir()
    pods.mkdir()
    # EKS's patterns: no :443 forms
    config = config_file(
        tmp_path,
        provider_entry(
            matchImages=["*.dkr.ecr.*.amazonaws.com"], args=[f"--cache-dir={tmp_path / 'cache'}"]
        ),
    )
    kubelet_config = tmp_path / "kubelet.yaml"
    kubelet_config.write_text(
        f"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        f"staticPodPath: {pods}\nfeatureGates:\n  KubeletServiceAccountTokenForCredentialProviders: true\n"
    )
    (pods / "app.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: app}\nspec:\n  containers:\n"
        "  - name: app\n    image: 123456789012.dkr.ecr.us-west-2.amazonaws.com:443/team/app\n"
        "  - name: side\n    image: registry.k8s.io/pause:3.10\n"
    )
    process = fake_kubelet(
        [
            f"--image-credential-provider-config={config}",
            "--image-credential-provider-bin-dir", str(bin_dir),
            f"--config={kubelet_config}",
        ],
        {**os.environ, **ecr_env(ecr[1].url)},
    )  # fmt: skip
    try:
        yield {
            "config": config,
            "bin_dir": bin_dir,
            "root": tmp_path,
            "pid": Path(str(process.pid)),
        }
    finally:
        process.kill()
        process.wait()


def test_the_running_kubelet_is_found_and_its_faults_caught(node: dict[str, Path]) -> None:
    code, report = doctor("--offline")
    assert report["kubeletPid"] == int(str(node["pid"]))
    assert (report["config"], report["binDir"]) == (str(node["config"]), str(node["bin_dir"]))
    assert (
        report["sources"]["image-credential-provider-config"]
        == "--image-credential-provider-config"
    )
    assert report["featureGates"] == {"KubeletServiceAccountTokenForCredentialProviders": True}
    assert code == 1
    found = failures(report)
    # the static pod's ECR image with :443, which the shipped patterns (no port) do not claim
    assert (
        "123456789012.dkr.ecr.us-west-2.amazonaws.com:443/team/app: no provider claims it, "
        "although ecr-credential-provider serves its host" in found
    )
    assert any("ecr-credential-provider" in line and "bin" in line for line in found)  # no binary
    infos = [c["message"] for c in report["checks"] if c["status"] == "info"]
    assert "registry.k8s.io/pause:3.10: no provider claims it (pulled anonymously)" in infos


def test_a_config_changed_after_the_kubelet_started(node: dict[str, Path]) -> None:
    later = time.time() + 30
    os.utime(node["config"], (later, later))
    _, report = doctor("--offline")
    assert any("changed after the kubelet started" in line for line in failures(report))


def test_a_cache_directory_another_user_can_write(node: dict[str, Path]) -> None:
    cache = node["root"] / "cache"
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)
    _, report = doctor("--offline")
    (line,) = [c for c in report["checks"] if c["area"] == "cache"]
    assert line["status"] == "fail" and "mode 777" in line["message"]


def test_as_an_unprivileged_user_it_says_what_it_could_not_read(node: dict[str, Path]) -> None:
    for path in (node["root"], *node["root"].parents):
        if path != Path("/"):
            path.chmod(path.stat().st_mode | 0o005)
    node["config"].chmod(0o644)
    command = [
        "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
        sys.executable, "-m", "credprovider", "credprovider", "doctor", "--json", "--offline",
    ]  # fmt: skip
    result = subprocess.run(
        private(command),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": "/"},
    )
    assert "Traceback" not in result.stderr and result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    assert report["kubeletPid"] == int(str(node["pid"]))
    warnings = [c["message"] for c in report["checks"] if c["status"] == "warn"]
    assert any("environ" in line and "as uid 65534" in line for line in warnings)


def test_a_dry_run_through_the_bundle_and_a_copied_plugin(
    node: dict[str, Path], ecr: tuple[FakeEcr, FakeServer]
) -> None:
    require_bundle()
    fake, _ = ecr
    plugin = node["bin_dir"] / "ecr-credential-provider"
    plugin.symlink_to(BUNDLE_DIR / "ecr-credential-provider")
    image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app"
    result = run_cli("doctor", "--json", "--image", image)  # the kubelet's environment reaches ECR
    report = json.loads(result.stdout)
    (answer,) = [
        c for c in report["checks"] if c["area"] == "image" and c["message"].startswith(image + ":")
    ]
    assert answer["status"] == "pass" and answer["provider"] == "ecr-credential-provider"
    assert fake.password not in result.stdout and "(user AWS, password " in answer["message"]
    assert not (node["root"] / "cache").exists()  # the dry run wrote no cache
    plugin.unlink()
    shutil.copy(BUNDLE_DIR / "ecr-credential-provider", plugin)  # the operator's mistake
    code, report = doctor("--offline")
    assert code == 1
    assert any(
        c["area"] == "binary" and "ecr-credential-provider" in c["message"]
        for c in report["checks"]
        if c["status"] == "fail"
    )


@pytest.mark.parametrize("kind", ["fifo", "directory", "huge"])
def test_a_hostile_config_file_never_hangs_or_crashes(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "image"
    config = root / "etc/eks/image-credential-provider/config.json"
    config.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(config)  # a reader would block for ever
    elif kind == "directory":
        config.mkdir()
    else:
        config.write_bytes(b"[" * (5 << 20))
    started = time.monotonic()
    code, report = doctor("--root", str(root), "--offline")
    assert time.monotonic() - started < 60 and code == 1
    assert [c["area"] for c in report["checks"] if c["status"] == "fail"] == ["config"]


def test_static_pods_behind_a_special_file_are_skipped(node: dict[str, Path]) -> None:
    kubelet_yaml = node["root"] / "kubelet.yaml"
    kubelet_yaml.write_text(kubelet_yaml.read_text().replace(
        str(node["root"] / "manifests"), "/dev/zero"
    ))  # fmt: skip
    _, report = doctor("--offline")
    assert report["kubeletPid"] == int(str(node["pid"]))
    assert not [c for c in report["checks"] if c["area"] == "image"]


@pytest.mark.parametrize(
    "args", [["--cache-dir", "/var/cache/ecr"], ["--cache-dir=/var/cache/ecr"]]
)
def test_the_cache_directory_is_read_from_the_args_as_the_plugin_reads_them(
    tmp_path: Path, args: list[str]
) -> None:
    root = tmp_path / "image"
    _put(root, LAYOUTS[0].config, config_file(tmp_path, provider_entry(args=args)).read_text())
    (root / "var/cache/ecr").mkdir(parents=True)
    (root / "var/cache/ecr").chmod(0o777)
    _, report = doctor("--root", str(root), "--offline")
    (line,) = [c for c in report["checks"] if c["area"] == "cache"]
    assert line["status"] == "fail" and line["message"].startswith("cache /var/cache/ecr: ")


def test_the_cache_entries_are_judged_as_the_plugins_judge_them(node: dict[str, Path]) -> None:
    """Entries written by the plugins' own cache code pass; expired or corrupt ones are counted
    (the plugin replaces them); one another user planted, or one others can read, fails."""
    from credprovider.runtime.api import AuthConfig
    from credprovider.runtime.cachestore import CacheEntry, open_cache
    from credprovider.runtime.provider import CacheScope, Credentials

    cache = node["root"] / "cache"
    directory = open_cache(str(cache))
    now = time.time()
    for number, lifetime in ((1, 3600), (2, 7200)):
        registry = f"12345678901{number}.dkr.ecr.us-west-2.amazonaws.com"
        scope = CacheScope("ecr-credential-provider", registry, {"n": str(number)}, (registry,))
        creds = Credentials(
            {registry: AuthConfig("AWS", "hunter2-password")}, "Registry", now + lifetime
        )
        assert CacheEntry(directory, scope).store(creds, now)
    fresh = sorted(cache.glob("*.json"))
    expired = json.loads(fresh[0].read_text()) | {"expiresAt": now - 60}
    (cache / "expired.json").write_text(json.dumps(expired))
    (cache / "torn.json").write_text('{"version": 1, "prov')
    for name in ("expired.json", "torn.json"):
        (cache / name).chmod(0o600)
    _, report = doctor("--offline")
    [(status, message)] = [
        (c["status"], c["message"]) for c in report["checks"] if c["area"] == "cache"
    ]
    assert status == "pass", message
    assert message.endswith(
        "2 fresh entries, 2 not served and replaced at the next fetch (1 expired, expiring, or "
        "valid for longer than any credential is; 1 not JSON)"
    )
    assert "hunter2" not in json.dumps(report)
    planted, shared = cache / "planted.json", cache / "shared.json"
    planted.write_bytes(fresh[0].read_bytes())
    os.chown(planted, 65534, 65534)
    shared.write_bytes(fresh[1].read_bytes())
    shared.chmod(0o644)
    _, report = doctor("--offline")
    failed = sorted(
        c["message"] for c in report["checks"] if c["area"] == "cache" and c["status"] == "fail"
    )
    assert failed == [
        f"cache {cache}: planted.json: owned by uid 65534 (planted?)",
        f"cache {cache}: shared.json: mode 644, credentials others can read",
    ]


def test_config_dir_drop_ins_are_merged_in_lexical_order(tmp_path: Path) -> None:
    """--config, then every *.conf under --config-dir (subdirectories too) in lexical order: the
    last to set a field wins, flags over all. A huge drop-in tree is not walked to its end."""
    pods = {name: tmp_path / name for name in ("base", "early", "late")}
    for directory in pods.values():
        directory.mkdir()
    (pods["late"] / "p.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - {name: c, image: 123456789012.dkr.ecr.us-west-2.amazonaws.com/late:v1}\n"
    )
    head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    (tmp_path / "kubelet.yaml").write_text(f"{head}staticPodPath: {pods['base']}\n")
    drop_ins = tmp_path / "kubelet.conf.d"
    (drop_ins / "20-sub").mkdir(parents=True)
    (drop_ins / "10-early.conf").write_text(f"{head}staticPodPath: {pods['early']}\n")
    (drop_ins / "20-sub" / "30-late.conf").write_text(
        f"{head}staticPodPath: {pods['late']}\nfeatureGates: {{KubeletServiceAccountTokenForCredentialProviders: false}}\n"
    )
    (drop_ins / "99-ignored.yaml").write_text(f"{head}staticPodPath: /nowhere\n")
    config = config_file(tmp_path, provider_entry())
    flags = [
        f"--config={tmp_path / 'kubelet.yaml'}",
        f"--config-dir={drop_ins}",
        f"--image-credential-provider-config={config}",
        f"--image-credential-provider-bin-dir={tmp_path}",
    ]
    kubelet = fake_kubelet(flags, os.environ)
    try:
        _, report = doctor("--offline")
    finally:
        kubelet.kill()
        kubelet.wait()
    assert report["featureGates"] == {"KubeletServiceAccountTokenForCredentialProviders": False}
    assert report["sources"]["staticPodPath"] == str(drop_ins / "20-sub" / "30-late.conf")
    images = [c["message"] for c in report["checks"] if c["area"] == "image"]
    assert images == [  # the late drop-in's pods; the bin dir holds no plugin
        "1 image(s) it claims get no credentials while its plugin does not start: "
        "123456789012.dkr.ecr.us-west-2.amazonaws.com/late:v1"
    ]
    crowd = drop_ins / "00-crowd"
    crowd.mkdir()
    for number in range(12_000):
        (crowd / f"{number}.txt").touch()
    kubelet = fake_kubelet(flags, os.environ)
    try:
        started = time.monotonic()
        _, report = doctor("--offline")
    finally:
        kubelet.kill()
        kubelet.wait()
    assert time.monotonic() - started < 60
    notes = [c["message"] for c in report["checks"] if c["status"] == "info"]
    assert (
        f"--config-dir {drop_ins} holds more than 10000 names: only those met first were read"
        in notes
    )


def test_the_checklist_puts_the_node_first_then_each_provider(node: dict[str, Path]) -> None:
    result = run_cli("doctor", "--offline")
    assert result.returncode == 1 and result.stderr == ""
    lines = result.stdout.splitlines()
    sections = [line for line in lines if not line.startswith(" ")]
    assert sections == [
        "node:",
        "config:",
        "image:",
        "kubelet:",
        "provider ecr-credential-provider:",
        "FAILED: 2 failed, 2 warning(s)",
    ]
    # validate's lints, on the config the kubelet uses: EKS's patterns miss forms of ECR hosts
    # (the cache dir the args name is made by the plugin: no warning)
    config = lines[lines.index("config:") + 1 : lines.index("image:")]
    warned = [line for line in config if line.startswith("  WARN ")]
    assert [line.split(": ", 1)[1][:40] for line in warned] == [
        "matchImages do not cover FIPS, dual-stac",
        "matchImages do not cover images that nam",
    ]
    assert config[config.index(warned[0]) + 1] == (
        f"       fix: fix that provider in {node['config']} (validate says the same)"
    )
    mine = lines[lines.index("provider ecr-credential-provider:") + 1 :]
    assert mine[0].startswith("  binary   FAIL provider 'ecr-credential-provider': ")
    assert mine[1] == "       fix: reinstall the plugins (credprovider install)"
    assert lines[lines.index("image:") + 1] == (
        "  FAIL 123456789012.dkr.ecr.us-west-2.amazonaws.com:443/team/app: no provider claims it, "
        "although ecr-credential-provider serves its host"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="a fake kubelet needs root (a pid namespace)")
def test_a_kubelet_left_on_a_built_in_cloud_is_said(tmp_path: Path) -> None:
    """KEP-2395's pairing, read from the running kubelet's flags (its version unknown here: the
    fake is no kubelet binary): one line with the command that fixes it."""
    config = config_file(tmp_path, provider_entry())
    flags = [
        f"--image-credential-provider-config={config}",
        f"--image-credential-provider-bin-dir={tmp_path}",
        "--cloud-provider=aws",
        "--feature-gates=DisableKubeletCloudCredentialProviders=false",
    ]
    kubelet = fake_kubelet(flags, os.environ)
    try:
        _, report = doctor("--offline")
    finally:
        kubelet.kill()
        kubelet.wait()
    said = [(c["status"], c["message"]) for c in report["checks"] if c["area"] == "kubelet"]
    assert (
        "warn",
        "the kubelet runs --cloud-provider=aws: a kubelet 1.31 or newer does not start with it "
        "(its version is not known here)",
    ) in said
    assert (
        "warn",
        "--feature-gates sets DisableKubeletCloudCredentialProviders=false, turning the built-in "
        "registry logins back on where they remain",
    ) in said


def test_a_token_audience_not_asked_is_said_on_a_line_of_its_own() -> None:
    """Offline, doctor asks the API server nothing: each provider's token audience is one line
    saying so (its area, longer than the others, still set off by a space), with the grant as
    its fix in --json."""
    from release.bundle import REPO

    config = str(REPO / "config/examples/aws-two-accounts.yaml")
    done = run_cli("doctor", "--offline", "--config", config, "--bin-dir", "/nonexistent")
    lines = [line for line in done.stdout.splitlines() if "not asked of the API server" in line]
    assert len(lines) == 2 and all(
        line.startswith("  service-account info not asked of the API server: ") for line in lines
    ), done.stdout
    found = json.loads(run_cli("doctor", "--offline", "--json", "--config", config,
                               "--bin-dir", "/nonexistent").stdout)  # fmt: skip
    [fix, _] = [c["fix"] for c in found["checks"] if c["message"].startswith("not asked")]
    assert fix.startswith("grant it: an RBAC rule with verb request-serviceaccounts-token-audience")


def test_a_plugin_refusing_its_settings_is_fixed_in_its_settings_not_by_reinstalling(
    tmp_path: Path,
) -> None:
    """A plugin that starts and refuses what it reads (here an azure.json a hand edit cut short)
    was told to "reinstall the plugins": no install mends it. The fix names the provider's args
    and env in the config, and the file its line names."""
    require_bundle()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "acr-credential-provider").symlink_to(BUNDLE_DIR / "acr-credential-provider")
    azure_json = tmp_path / "azure.json"
    azure_json.write_text('{"cloud": "AzurePublicCloud", "tenantId": ')
    azure_json.chmod(0o600)
    config = config_file(
        tmp_path,
        provider_entry(name="acr-credential-provider", matchImages=["*.azurecr.io"],
                       args=[str(azure_json)]),
    )  # fmt: skip
    done = run_cli("doctor", "--offline", "--config", str(config), "--bin-dir", str(bin_dir),
                   use_bundle=True)  # fmt: skip
    lines = done.stdout.splitlines()
    failed = next(i for i, line in enumerate(lines) if line.startswith("  binary   FAIL "))
    assert f"invalid cloud config: {azure_json} is neither JSON" in lines[failed]
    assert lines[failed + 1] == (
        f"       fix: fix that provider's args or env in {config}, or the file they name that "
        "its line says (validate --bin-dir checks it again)"
    )
    assert done.returncode == 1


def test_a_node_under_a_root_is_not_judged_by_this_machines_settings(tmp_path: Path) -> None:
    """Under --root the node's files are under the root, and the paths its config names are the
    node's: the start check read them on this machine instead (a broken AWS config here failed
    the node's plugin). The plugin is checked on its args alone there."""
    require_bundle()
    root = tmp_path / "node"
    shutil.copytree(BUNDLE_DIR.resolve(), root / "opt/cp", symlinks=True)
    (root / "bin").mkdir()
    (root / "bin/ecr-credential-provider").symlink_to("/opt/cp/credprovider")
    broken = tmp_path / "aws-config"  # a path of this machine's, not the node's
    broken.write_text("[default\n")
    (root / "etc").mkdir()
    config_file(root / "etc", provider_entry(
        name="ecr-credential-provider", matchImages=["*.dkr.ecr.*.amazonaws.com"],
        env=[{"name": "AWS_CONFIG_FILE", "value": str(broken)}],
    ))  # fmt: skip
    _, report = doctor("--root", str(root), "--config", "/etc/c.json", "--bin-dir", "/bin",
                       "--offline")  # fmt: skip
    binary = [c for c in report["checks"] if c["area"] == "binary"]
    assert [c["status"] for c in binary] == ["pass"], binary

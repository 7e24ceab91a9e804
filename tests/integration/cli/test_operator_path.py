"""The operator's whole path through the built bundle, as the README and docs/operators.md walk it:
install -> validate -> get/explain/match -> a mistake -> upgrade, as root; then every subcommand as
an unprivileged user against root-only files and directories, where the only true answer is "cannot
read X as uid N; run this as root" (exit 2), never a kubelet verdict and never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from release.bundle import BUNDLE_DIR, REPO
from tests.helpers import CONFIG_DIR, private, require_bundle

NOBODY = 65534
ECR_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app:v1"


def tool(*args: str, uid: int = 0) -> subprocess.CompletedProcess[str]:
    """The bundle's credprovider, as root or (setpriv) as ``uid`` with no groups."""
    become = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"] if uid else []
    return subprocess.run(
        private([*become, str(BUNDLE_DIR / "credprovider"), *args]),
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"},
        check=False,
    )


@pytest.fixture
def node() -> Iterator[Path]:
    """A node's /etc/kubernetes stand-in that every user may traverse (pytest's tmp_path is 0700)."""
    require_bundle()
    if not (BUNDLE_DIR / "credprovider").resolve().is_relative_to(REPO):
        pytest.skip("the bundle is outside the repository")
    root = Path(tempfile.mkdtemp(prefix="credprovider-node-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root)


def test_a_new_operator_as_root(node: Path) -> None:
    bin_dir, config = node / "image-credential-provider", node / "config.yaml"
    installed = tool("install", "--bin-dir", str(bin_dir), "--config-out", str(config), "--json")
    assert installed.returncode == 0, installed.stderr
    report = json.loads(installed.stdout)
    assert report["applied"] and report["errors"] == [] and len(report["checked"]) == 3
    valid = tool("validate", str(config), "--bin-dir", str(bin_dir))
    assert valid.returncode == 0 and valid.stdout.startswith("valid: 3 provider(s)"), valid.stdout
    explained = json.loads(tool("explain", ECR_IMAGE, "--config", str(config), "--json").stdout)
    assert explained["plugin"] == "ecr-credential-provider"
    assert tool("match", "*.dkr.ecr.*.amazonaws.com", ECR_IMAGE).returncode == 0

    # The mistake: a copy of the launcher instead of a link. validate and install both say so.
    copied = bin_dir / "ecr-credential-provider"
    copied.unlink()
    shutil.copy(BUNDLE_DIR / "credprovider", copied)
    broken = tool("validate", str(config), "--bin-dir", str(bin_dir), "--json")
    assert broken.returncode == 1
    (error,) = json.loads(broken.stdout)["errors"]
    assert "_internal is missing" in error and "every pull it matches fails" in error

    # install again: the copy is not credprovider's link, so it needs --force (and is kept)
    again = tool("install", "--bin-dir", str(bin_dir), "--config-out", str(config))
    assert again.returncode == 1 and "nothing was changed" in again.stderr
    forced = tool("install", "--bin-dir", str(bin_dir), "--config-out", str(config), "--force")
    assert forced.returncode == 0, forced.stderr
    assert list(bin_dir.glob("ecr-credential-provider.credprovider-backup-*"))
    assert tool("validate", str(config), "--bin-dir", str(bin_dir)).returncode == 0


def test_an_operator_migrates_a_kubeadm_node(node: Path) -> None:
    """docs/operators.md's migration: read the plan, install what it says, --write, validate; the
    same --write as an unprivileged user changes nothing and says to run it as root."""
    old_config = node / "old.yaml"
    shutil.copy(CONFIG_DIR / "gcp.yaml", old_config)
    bin_dir = node / "bin"  # the node runs our GCP plugin today
    bin_dir.mkdir()
    (bin_dir / "auth-provider-gcp").symlink_to(BUNDLE_DIR / "auth-provider-gcp")
    flags = node / "kubeadm-flags.env"
    flags.write_text(
        'KUBELET_KUBEADM_ARGS="--cloud-provider=aws '
        f'--image-credential-provider-config={old_config} --image-credential-provider-bin-dir={bin_dir}"\n'
    )
    before = flags.read_text()
    config = node / "credential-providers.yaml"
    migrate = ["migrate", "--kubelet-flags-file", str(flags), "--config-out", str(config)]
    shown = tool(*migrate)
    assert shown.returncode == 0, shown.stderr
    assert f"edit {flags}:" in shown.stdout and "nothing was written" in shown.stdout
    assert flags.read_text() == before and not config.exists()

    as_nobody = tool(*migrate, "--write", uid=NOBODY)
    assert (as_nobody.returncode, as_nobody.stdout) == (2, ""), as_nobody
    assert f"cannot write in {node} as uid {NOBODY}" in as_nobody.stderr
    assert "run this command as root" in as_nobody.stderr
    assert flags.read_text() == before and not config.exists()

    plan = json.loads(tool(*migrate, "--json").stdout)
    installed = tool(*plan["install"])
    assert installed.returncode == 0, installed.stderr
    written = tool(*migrate, "--write")
    assert written.returncode == 0, written.stderr
    assert f"edited {flags}:" in written.stdout and f"wrote {config}" in written.stdout
    assert flags.read_text().count("--image-credential-provider-config=") == 1
    assert f"--image-credential-provider-config={config}" in flags.read_text()
    valid = tool("validate", str(config), "--bin-dir", str(bin_dir))
    assert valid.returncode == 0, valid.stdout
    assert valid.stdout.startswith("valid: 2 provider(s)"), valid.stdout
    # install again (an upgrade, a second run): the merged config is left as it is
    again = tool(*plan["install"])
    assert again.returncode == 0 and f"unchanged {config}" in again.stdout, again.stderr


def test_install_needs_root_where_root_owns_the_place(node: Path) -> None:
    locked = node / "locked"
    locked.mkdir(mode=0o755)
    result = tool(
        "install",
        "--bin-dir",
        str(locked / "bin"),
        "--config-out",
        str(locked / "c.yaml"),
        uid=NOBODY,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"credprovider install: cannot write in {locked} as uid {NOBODY} (permission denied): "
        "run this command as root, as the kubelet runs\n"
    )
    assert list(locked.iterdir()) == []


def test_every_subcommand_as_an_unprivileged_user(node: Path) -> None:
    secret_config = node / "config.yaml"  # 0600, as on many nodes
    shutil.copy(CONFIG_DIR / "aws.yaml", secret_config)
    secret_config.chmod(0o600)
    private_dir = node / "config.d"  # 0700
    private_dir.mkdir(mode=0o700)
    shutil.copy(CONFIG_DIR / "aws.yaml", private_dir / "aws.yaml")
    flags = node / "kubeadm-flags.env"
    flags.write_text('KUBELET_KUBEADM_ARGS="--cloud-provider=aws"\n')
    flags.chmod(0o600)
    bin_dir = node / "bin"
    bin_dir.mkdir()
    (bin_dir / "ecr-credential-provider").symlink_to(BUNDLE_DIR / "ecr-credential-provider")

    runs = {
        "validate file": (["validate", str(secret_config)], secret_config),
        "validate dir": (["validate", str(private_dir)], private_dir),
        "validate in dir": (["validate", str(private_dir / "aws.yaml")], private_dir / "aws.yaml"),
        "get": (
            ["get", ECR_IMAGE, "--config", str(secret_config), "--bin-dir", str(bin_dir)],
            secret_config,
        ),
        "explain": (["explain", ECR_IMAGE, "--config", str(private_dir)], private_dir),
        "migrate": (["migrate", "--kubelet-flags-file", str(flags)], flags),
    }
    for name, (args, path) in runs.items():
        result = tool(*args, uid=NOBODY)
        assert (result.returncode, result.stdout) == (2, ""), (name, result)
        assert result.stderr.startswith(f"credprovider {args[0]}: cannot read "), (name, result)
        assert f"as uid {NOBODY} (permission denied)" in result.stderr, (name, result.stderr)
        assert "run this command as root" in result.stderr
        assert "kubelet would not start" not in result.stderr and "invalid" not in result.stderr
        assert "Traceback" not in result.stderr
        assert str(path).startswith(str(node))
    # as root, the same files are what they are
    assert tool("validate", str(secret_config)).returncode == 0
    assert tool("validate", str(private_dir)).returncode == 0
    # a readable config with a readable bin dir works as any user: the plugin starts as it
    secret_config.chmod(0o644)
    checked = tool("validate", str(secret_config), "--bin-dir", str(bin_dir), uid=NOBODY)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "answers 'ecr-credential-provider version" in checked.stdout


def on_node(etc_default: Path, *args: str, uid: int = 0) -> subprocess.CompletedProcess[str]:
    """The bundle's credprovider with no paths given, on a node whose /etc/default is
    ``etc_default`` (bind-mounted in the run's own mount namespace: the host's is untouched)."""
    become = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"] if uid else []
    command = [
        "sh", "-c", 'mount --bind "$0" /etc/default && exec "$@"', str(etc_default),
        *become, str(BUNDLE_DIR / "credprovider"), *args,
    ]  # fmt: skip
    return subprocess.run(
        private(command),
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"},
        check=False,
    )


def test_a_flags_file_this_user_cannot_read_is_no_verdict(node: Path) -> None:
    """A kubeadm node whose /etc/default/kubelet (0600) names a config the kubelet refuses: root
    finds it and says the kubelet would not start; an unprivileged user gets "cannot read" and
    exit 2 from every command that looks for the node's config, never a verdict on a default path."""
    etc_default = node / "default"
    etc_default.mkdir()
    broken = node / "broken.yaml"
    broken.write_text("kind: CredentialProviderConfig\napiVersion: nope/v1\nproviders: []\n")
    (node / "bin").mkdir()
    flags = etc_default / "kubelet"
    flags.write_text(
        f"KUBELET_EXTRA_ARGS=--image-credential-provider-config={broken} "
        f"--image-credential-provider-bin-dir={node / 'bin'}\n"
    )
    flags.chmod(0o600)
    as_root = on_node(etc_default, "validate")
    assert as_root.returncode == 1, as_root
    assert as_root.stdout.startswith("invalid: "), as_root.stdout
    assert f"PATH {broken} (layout kubeadm" in as_root.stderr
    for args in (["validate"], ["get", ECR_IMAGE], ["explain", ECR_IMAGE]):
        result = on_node(etc_default, *args, uid=NOBODY)
        assert (result.returncode, result.stdout) == (2, ""), (args, result)
        assert result.stderr == (
            f"credprovider {args[0]}: cannot read /etc/default/kubelet as uid {NOBODY} (permission "
            "denied): run this command as root, as the kubelet runs\n"
        ), (args, result.stderr)


def test_odd_paths_never_hang_or_crash(node: Path) -> None:
    """A FIFO, a device or a directory where a file belongs: one line, at once."""
    fifo = node / "config.fifo"
    os.mkfifo(fifo)
    for args in (
        ["validate", str(fifo)],
        ["validate", "/dev/zero"],
        ["migrate", "--kubelet-flags-file", str(fifo)],
        [
            "get",
            ECR_IMAGE,
            "--config",
            str(CONFIG_DIR),
            "--bin-dir",
            str(node),
            "--sa-token-file",
            "/dev/zero",
        ],
    ):
        result = tool(*args)
        assert result.returncode == 1, (args, result)
        assert "not a regular file" in result.stdout + result.stderr, (args, result)
        assert "Traceback" not in result.stderr

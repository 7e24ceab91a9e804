"""What used to end in a traceback ends in one line (issue #46's walk): ``agent plan --files-only``
without its paths, and ``install`` as an unprivileged user into root's private directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from release.bundle import REPO
from tests.helpers import private, run_cli
from tests.integration.cli.conftest import fake_bundle


def test_files_only_without_its_paths_is_one_line(tmp_path: Path) -> None:
    for action in ("plan", "apply", "uninstall"):
        extra = ["--bundle", str(fake_bundle(tmp_path / action, "0.1.0").parent)]
        given = {"apply": [*extra, "--providers", "aws"], "plan": ["--providers", "aws"]}
        done = run_cli("agent", action, "--root", str(tmp_path), "--files-only",
                       *given.get(action, []))  # fmt: skip
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (
            f"credprovider agent {action}: --files-only needs --bin-dir and --config\n"
        )


def test_files_only_paths_are_the_nodes_absolute_ones(tmp_path: Path) -> None:
    """--bin-dir and --config are node paths under --root, as the kubelet's flags name them: a
    relative one (planned as "bin/ecr-credential-provider" once) is a usage line, nothing read."""
    for option, given in (("--bin-dir", "bin"), ("--config", "cfg.yaml")):
        paths = {"--bin-dir": "/etc/cp/bin", "--config": "/etc/cp/c.yaml", option: given}
        done = run_cli("agent", "plan", "--root", str(tmp_path), "--files-only", "--providers",
                       "aws", *(part for pair in paths.items() for part in pair))  # fmt: skip
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr.splitlines()[-1] == (
            f"credprovider agent plan: error: argument {option}: '{given}' is relative: give the "
            "path as the kubelet's flag names it, from /"
        )


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make root's private directory")
def test_install_into_roots_private_directory_as_nobody_is_one_line(tmp_path: Path) -> None:
    for path in (tmp_path, *tmp_path.parents):  # pytest's are 0700: let nobody walk to priv
        if path != Path("/"):
            path.chmod(path.stat().st_mode | 0o005)
    private_dir = tmp_path / "priv"
    private_dir.mkdir(mode=0o700)
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0")
    for path in (tmp_path / "bundle", bundle.parent / "_internal", bundle):
        path.chmod(0o755)
    done = subprocess.run(
        private(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                 sys.executable, "-m", "credprovider", "credprovider", "install",
                 "--bin-dir", str(private_dir / "bin"), "--config-out", str(private_dir / "c.yaml"),
                 "--providers", "aws", "--target", str(bundle)]),
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), "HOME": "/"},
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"cannot write in {private_dir} as uid 65534" in done.stderr


def test_a_mistyped_platform_is_refused_with_the_closest_name(tmp_path: Path) -> None:
    done = run_cli("agent", "plan", "--root", str(tmp_path), "--platform", "kubeadmm")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1] == (
        "credprovider agent plan: error: argument --platform: invalid choice: 'kubeadmm' (choose "
        "from 'kubeadm', 'kubeadm-rpm', 'k3s', 'rke2', 'k0s', 'eks', 'aks', 'gke', 'auto'); did "
        "you mean 'kubeadm'?"
    )
    # a platform and --files-only, which follows none
    both = run_cli("agent", "plan", "--root", str(tmp_path), "--platform", "k3s", "--files-only",
                   "--bin-dir", "/x", "--config", "/y")  # fmt: skip
    assert (both.returncode, both.stderr) == (
        2, "credprovider agent plan: --files-only follows no platform: leave --platform out\n",
    )  # fmt: skip


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e9"])
@pytest.mark.parametrize(
    "command",
    [
        ["fleet", "uninstall", "--namespace", "ns", "--daemonset", "ds", "--timeout"],
        ["agent", "uninstall", "--root", "/nonexistent", "--health-timeout"],
    ],
    ids=["fleet uninstall --timeout", "agent uninstall --health-timeout"],
)
def test_a_wait_that_never_ends_or_never_waits_is_a_usage_error(
    command: list[str], value: str
) -> None:
    """Before: fleet uninstall --timeout nan never ended, listing nodes in a hot loop."""
    done = run_cli(*command, value)
    assert (done.returncode, done.stdout) == (2, ""), done
    assert "give seconds from 0 to 86400 (a day)" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("env", "said"),
    [
        (
            '{"AWS_PROFILE": "prod\\u0000"}',
            "aws.env 'AWS_PROFILE' holds a NUL byte, which no environment can: the kubelet cannot "
            "run the plugin with it, and every pull it matches fails",
        ),
        (
            '{"AWS_REGOIN": "eu-west-1"}',
            "aws.env 'AWS_REGOIN' is read by no plugin, and 'AWS_REGION', which this one reads, "
            "differs from it only by one slip of a letter: did you mean 'AWS_REGION'? (as given, "
            "it does nothing)",
        ),
    ],
    ids=["a NUL byte", "a slip in a name"],
)
def test_an_env_setting_the_plugin_never_sees_as_meant_changes_nothing(
    tmp_path: Path, env: str, said: str
) -> None:
    """The chart's providerSettings as the agent takes it (through the bundle): an env value the
    kubelet could never hand the plugin, or a name one slip from one the plugin reads, is one line
    before anything is read or written."""
    from tests.unit.tool.test_agent_apply import kubeadm

    root = kubeadm(tmp_path)
    before = sorted(str(p) for p in Path(root).rglob("*"))
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    done = run_cli(
        "agent", "apply", "--root", root, "--bundle", str(bundle), "--providers", "aws",
        "--provider-settings", f'{{"aws": {{"env": {env}}}}}', use_bundle=True,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"credprovider agent apply: --provider-settings: {said}\n"
    assert sorted(str(p) for p in Path(root).rglob("*")) == before


def test_migrate_leaves_the_opt_in_plugin_to_install(tmp_path: Path) -> None:
    """migrate --providers registries planned a config the kubelet refuses (``matchImages: []``)
    and proposed an install that needs settings migrate never takes: one usage line instead."""
    flags = tmp_path / "kubeadm-flags.env"
    flags.write_text('KUBELET_KUBEADM_ARGS="--cloud-provider=external"\n')
    for write in ((), ("--write",)):
        done = run_cli("migrate", "--kubelet-flags-file", str(flags), "--providers",
                       "aws,registries", "--config-out", str(tmp_path / "c.yaml"),
                       *write)  # fmt: skip
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (
            "credprovider migrate: --providers registries: registry-credential-provider names no "
            "registry of its own, so migrate (the in-tree clouds' move) cannot write its entry: "
            "install it with its settings (credprovider install --providers registries "
            "--provider-settings JSON, docs/registries.md)\n"
        )
    assert flags.read_text() == 'KUBELET_KUBEADM_ARGS="--cloud-provider=external"\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kubeadm-flags.env"]


@pytest.mark.parametrize(
    "args",
    [
        ("install", "--config-out=~/cp.yaml", "--bin-dir", "BIN"),
        ("migrate", "--write", "--config-out", "~/cp.yaml"),
        ("validate", "~/cp.yaml"),
    ],
    ids=["after '='", "quoted", "a positional"],
)
def test_a_path_from_home_the_shell_left_as_it_was_is_refused(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """bash leaves ``--config-out=~/cp.yaml`` as it is (it expands '~' only at a word's start),
    and the tool took it as a directory named '~' under this one: install made ``./~/cp.yaml``.
    Refused as usage, naming the path meant, before anything is read or made."""
    home = tmp_path / "home"
    home.mkdir()
    bin_dir = tmp_path / "bin"
    done = run_cli(
        *(str(bin_dir) if arg == "BIN" else arg for arg in args),
        env={"HOME": str(home)},
        cwd=tmp_path,
        use_bundle=True,
    )
    given = next(arg for arg in args if "~" in arg)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1] == (
        f"credprovider {args[0]}: error: '{given}': '~' reached credprovider unexpanded (the shell "
        "expands it only at the start of a word, not after '=' or in quotes): give the full path, "
        f"'{home}/cp.yaml'"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    # a name from '~' no user has is a file's name as given (the kubelet's message for it)
    missing = run_cli("validate", "~no-such-user-here.yaml", cwd=tmp_path)
    assert (
        missing.returncode == 1 and "stat ~no-such-user-here.yaml: no such file" in missing.stdout
    )


def test_a_directory_removed_under_the_shell_is_said_not_a_traceback(tmp_path: Path) -> None:
    """The operator's shell sits in a directory since removed (a deleted checkout, an unpacked
    bundle's directory gone): a relative path was a FileNotFoundError traceback from argparse's
    type, or an internal error. One line now, saying to cd to a directory that exists; what
    needs no relative path still works."""
    config = tmp_path / "c.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        "  - name: auth-provider-gcp\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        "    matchImages: [gcr.io]\n    defaultCacheDuration: 1m\n    args: [get-credentials]\n"
    )
    gone = ["sh", "-c", 'cd "$0" && mkdir gone && cd gone && rmdir "$0/gone" && exec "$@"',
            str(tmp_path)]  # fmt: skip
    said = "the current directory no longer exists (removed since this shell entered it)"
    install = run_cli("install", "--bin-dir", "bin", "--config-out", str(config),
                      "--providers", "aws", use_bundle=True, wrapper=gone)  # fmt: skip
    assert install.returncode == 2 and f"argument --bin-dir: 'bin' is relative, and {said}" in (
        install.stderr
    ), install.stderr
    validate = run_cli("validate", "c.yaml", use_bundle=True, wrapper=gone)
    assert validate.returncode == 1 and validate.stdout.startswith(
        'invalid: unable to access path "c.yaml": stat c.yaml: no such file or directory (the '
        "current directory no longer exists: cd to one that exists)"
    ), validate.stdout
    get = run_cli("get", "gcr.io/a/b", "--config", str(config), "--bin-dir", "relbin",
                  "--environment", "this", use_bundle=True, wrapper=gone)  # fmt: skip
    assert (
        get.returncode == 2
        and get.stderr
        == f"credprovider get: {said}, so no relative path can be read: cd to a directory that exists\n"
    ), get.stderr
    absolute = run_cli("validate", str(config), use_bundle=True, wrapper=gone)
    assert absolute.returncode == 0, absolute.stdout + absolute.stderr
    for done in (install, validate, get, absolute):
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["migrate", "--kubelet-flags", "--cloud-provider=aws --node-ip=10.0.0.5"],
        ["migrate", "--kubelet-flags", "--cloud-provider=gce"],
        ["get", "gcr.io/p/app", "--timeout", "-5s"],
    ],
    ids=["flags", "one-flag", "get-timeout"],
)
def test_a_value_that_starts_with_a_dash_says_to_give_it_after_equals(argv: list[str]) -> None:
    """``--kubelet-flags "--cloud-provider=aws ..."`` (a space where the help writes '='): argparse
    read the value as an option and said only "argument --kubelet-flags: expected one argument".
    The line says how to give it; given so, it is taken."""
    option, value = argv[-2], argv[-1]
    done = run_cli(*argv)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.splitlines()[-1].endswith(
        f"error: {option} '{value}': a value that starts with '-' is read as an option of its "
        f"own; give it after '=': {option}='{value}'"
    ), done.stderr
    taken = run_cli(*argv[:-2], f"{option}={value}")
    assert "a value that starts with '-'" not in taken.stderr
    assert "expected one argument" not in taken.stderr


def test_an_option_missing_its_value_before_another_is_not_taken_for_one() -> None:
    """``--kubelet-flags --write``: the value left out, not a dashed one (argparse's line)."""
    done = run_cli("migrate", "--kubelet-flags", "--write")
    assert done.returncode == 2
    assert "argument --kubelet-flags: expected one argument" in done.stderr

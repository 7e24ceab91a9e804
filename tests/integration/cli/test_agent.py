"""``credprovider agent`` as the DaemonSet runs it: plan, apply and uninstall on a node root, the
restart through a command (here a script standing in for systemctl, as the sandbox's does) and the
kubelet's health asked over HTTP (a loopback server answering as /healthz)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from credprovider.tool.agent.bootstrap import CONFIG_TEXT
from emulators.http import FakeResponse, serve
from release.bundle import REPO
from tests.helpers import bundle_as_nobody
from tests.helpers import run_cli as cli
from tests.integration.cli.conftest import fake_bundle
from tests.unit.tool.test_agent_apply import kubeadm, tree


def restart_command(tmp_path: Path) -> str:
    """A stand-in for systemctl: records the unit it restarts."""
    script = tmp_path / "systemctl"
    script.write_text(f'#!/bin/sh\necho "$1" >> {tmp_path / "restarts"}\n')
    script.chmod(0o755)
    return f"{script} {{unit}}"


def restarts(tmp_path: Path) -> list[str]:
    path = tmp_path / "restarts"
    return path.read_text().split() if path.exists() else []


def test_plan_apply_and_uninstall_through_the_cli(tmp_path: Path) -> None:
    root = kubeadm(tmp_path / "node")
    before = tree(root)
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    planned = cli("agent", "plan", "--root", root, "--providers", "aws", "--json")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert (plan["platform"], plan["restart"], plan["changesKubeletInput"]) == (
        "kubeadm", "kubelet", True,
    )  # fmt: skip
    assert tree(root) == before  # plan changes nothing

    statuses = [200]
    with serve(lambda request: FakeResponse.text("ok", status=statuses[0])) as kubelet:
        common = [
            "--root", root, "--restart-command", restart_command(tmp_path),
            "--healthz", f"{kubelet.url}/healthz", "--health-timeout", "2",
        ]  # fmt: skip
        applied = cli("agent", "apply", "--bundle", str(bundle), "--providers", "aws", *common)
        assert applied.returncode == 0, applied.stderr
        assert applied.stdout.splitlines()[0] == "installed"
        assert "  restarted kubelet" in applied.stdout.splitlines()
        assert restarts(tmp_path) == ["kubelet"]
        assert kubelet.requests[-1].path == "/healthz"

        again = cli("agent", "apply", "--bundle", str(bundle), "--providers", "aws", *common)
        assert (again.returncode, again.stdout) == (0, "unchanged\n")
        assert restarts(tmp_path) == ["kubelet"]  # a pod restart restarts nothing

        undone = cli("agent", "uninstall", *common)
        assert undone.returncode == 0, undone.stderr
        assert undone.stdout.splitlines()[0] == "uninstalled"
        assert tree(root) == before
        assert restarts(tmp_path) == ["kubelet", "kubelet"]

        # a kubelet that does not come back: rolled back, exit 1
        statuses[0] = 500
        failed = cli("agent", "apply", "--bundle", str(bundle), "--providers", "aws", *common)
        assert failed.returncode == 1
        first = failed.stdout.splitlines()[0]
        assert first.startswith("rolled back: the kubelet was not healthy after the restart (")
        assert "/healthz answered 500 for 2s)" in first
        assert restarts(tmp_path) == ["kubelet"] * 4


def test_a_refused_node_exits_1_and_says_why(tmp_path: Path) -> None:
    root = tmp_path / "node"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text("ID=talos\n")
    planned = cli("agent", "plan", "--root", str(root))
    assert planned.returncode == 1
    assert planned.stdout.splitlines()[1].startswith("  nothing would change: Talos is configured")


def test_apply_refuses_a_health_endpoint_off_the_node(tmp_path: Path) -> None:
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    done = cli(
        "agent", "apply", "--root", str(tmp_path), "--bundle", str(bundle),
        "--healthz", "http://example.com/healthz",
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "credprovider agent apply: --healthz is the kubelet's on 127.0.0.1\n"


def test_a_state_file_that_is_not_the_agents_stops_it_with_one_line(tmp_path: Path) -> None:
    root = kubeadm(tmp_path / "node")
    state = Path(root) / "var/lib/credprovider/agent/state.json"
    state.parent.mkdir(parents=True)
    state.write_text('{"originals": [')
    before = tree(root)
    done = cli("agent", "uninstall", "--root", root, "--restart-command", "false {unit}")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(
        "credprovider agent uninstall: /var/lib/credprovider/agent/state.json is not the agent's"
    )
    assert len(done.stderr.splitlines()) == 1 and tree(root) == before


def test_files_only_places_and_restarts_nothing_then_run_stays_until_stopped(
    tmp_path: Path,
) -> None:
    """The chart's default mode: only the mounted directories (no /etc/os-release, no unit), the
    paths given; no restart; ``run`` stays up after installing and exits 0 on SIGTERM."""
    import signal
    import subprocess
    import sys
    import time

    root = tmp_path / "host"
    (root / "etc/kubernetes").mkdir(parents=True)
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    paths = [
        "--root", str(root), "--files-only", "--bin-dir", "/etc/kubernetes/credential-providers",
        "--config", "/etc/kubernetes/credential-providers.yaml",
        "--restart-command", restart_command(tmp_path),
    ]  # fmt: skip
    planned = cli("agent", "plan", "--providers", "aws", *paths[:7], "--json")
    plan = json.loads(planned.stdout)
    assert (plan["platform"], plan["restart"]) == ("files only", "")
    assert plan["notes"][-1] == "the kubelet reads the new config at its next start"
    runner = subprocess.Popen(
        [sys.executable, "-m", "credprovider", "agent", "run", "--bundle", str(bundle),
         "--providers", "aws", *paths],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    config = root / "etc/kubernetes/credential-providers.yaml"
    deadline = time.monotonic() + 30
    while not config.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    assert runner.poll() is None  # installed, and staying
    runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=30)
    assert (runner.returncode, out.splitlines()[0], err) == (0, "installed", "")
    link = root / "etc/kubernetes/credential-providers/ecr-credential-provider"
    assert link.is_symlink() and restarts(tmp_path) == []
    undone = cli("agent", "uninstall", *paths)
    assert undone.returncode == 0, undone.stderr
    # the node as it was, but for the bootstrap where the config and the plugins were: the
    # kubelet's flags, set at provisioning, name them (/run: a node's tmpfs, where its lock is)
    assert sorted(p.name for p in root.rglob("*") if p.parts[len(root.parts)] != "run") == [
        "credential-providers", "credential-providers.yaml", "credprovider-bootstrap", "etc",
        "kubernetes",
    ]  # fmt: skip
    assert config.read_text() == CONFIG_TEXT
    assert restarts(tmp_path) == []


def test_an_operator_without_root_is_told_to_run_it_as_root() -> None:
    """Through the bundle as nobody, on a node directory nobody may write in: one line saying
    what and why, and nothing changed."""
    import os
    import shutil
    import tempfile

    import pytest

    from tests.helpers import require_bundle

    if os.geteuid() != 0:
        pytest.skip("switching to nobody needs root")
    require_bundle()
    place = Path(tempfile.mkdtemp(prefix="agent-", dir="/tmp"))  # pytest's tmp is root's only
    try:
        place.chmod(0o755)
        root = place / "node"
        (root / "etc/rancher/k3s").mkdir(parents=True)
        bundle = fake_bundle(place / "bundle", "0.1.0").parent
        for path in [root, *root.rglob("*"), bundle, *bundle.rglob("*")]:
            path.chmod(0o755)
        before = tree(str(root))
        done = bundle_as_nobody(
            "agent", "apply", "--root", str(root), "--bundle", str(bundle), "--providers", "aws",
            "--restart-command", "true {unit}", timeout=60,
        )  # fmt: skip
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        assert done.stderr == (
            f"credprovider agent apply: cannot write {root}/var as uid 65534: "
            "run it as root (the chart's pod does)\n"
        )
        assert tree(str(root)) == before
    finally:
        shutil.rmtree(place, ignore_errors=True)


def test_the_readiness_probe_says_ready_only_for_the_agents_file(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    waiting = cli("agent", "ready", "--ready-file", str(ready))
    assert (waiting.returncode, waiting.stdout) == (1, "")
    assert waiting.stderr == f"not ready: {ready} does not exist yet (see the pod's log)\n"
    ready.touch()
    assert cli("agent", "ready", "--ready-file", str(ready)).returncode == 0


def test_run_with_a_node_refuses_what_it_cannot_honour_before_the_api_server(
    tmp_path: Path,
) -> None:
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    common = ["agent", "run", "--node", "n1", "--root", str(tmp_path), "--bundle", str(bundle)]
    for more, said in (
        (["--slots", "0"], "credprovider agent run: --slots is from 1 to 5000\n"),
        # a typo's billion slots was a list of a billion Lease names, each tried in turn
        (["--slots", "1000000000"], "credprovider agent run: --slots is from 1 to 5000\n"),
        (["--lease-seconds", "5"],
         "credprovider agent run: --lease-seconds is from 15 to 86400 (a day)\n"),
        (["--lease-seconds", "99999999999"],
         "credprovider agent run: --lease-seconds is from 15 to 86400 (a day)\n"),
        (["--metrics", "ftp://x"], "credprovider agent run: --metrics is an http:// or https:// URL, or ''\n"),
        (["--ready-file", str(tmp_path / "no" / "r")],
         f"credprovider agent run: --ready-file {tmp_path}/no/r: its directory does not exist\n"),
    ):  # fmt: skip
        done = cli(*common, *more)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", said)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    done = cli(*common, "--kubeconfig", str(kubeconfig))
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"credprovider agent run: {kubeconfig} is not a kubeconfig (a YAML mapping with clusters)\n"
    )
    assert not (tmp_path / "var").exists()  # nothing placed on the node


def test_apply_restarts_over_systemds_socket_and_refuses_one_that_does_not_answer(
    tmp_path: Path,
) -> None:
    from emulators.systemd import standin_systemd

    root = kubeadm(tmp_path / "node")
    before = tree(root)
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    socket_path = tmp_path / "private"
    with serve(lambda request: FakeResponse.text("ok")) as kubelet:
        common = ["--root", root, "--healthz", f"{kubelet.url}/healthz", "--health-timeout", "10"]
        silent = cli(
            "agent", "apply", "--bundle", str(bundle), "--providers", "aws",
            "--systemd-socket", str(socket_path), *common,
        )  # fmt: skip
        assert (silent.returncode, silent.stdout) == (1, "")
        assert silent.stderr.startswith(
            f"credprovider agent apply: nothing answers on --systemd-socket {socket_path} "
        )
        assert silent.stderr.endswith(": nothing is changed\n")
        assert tree(root) == before
        restarted: list[str] = []
        with standin_systemd(
            socket_path, lambda unit: restarted.append(unit) or "done", root=Path(root)
        ) as systemd:
            applied = cli(
                "agent", "apply", "--bundle", str(bundle), "--providers", "aws",
                "--systemd-socket", str(socket_path), *common,
            )  # fmt: skip
            assert applied.returncode == 0, applied.stderr
            assert restarted == ["kubelet"]
            assert ("RestartUnit", ("kubelet", "replace")) in systemd.calls
            undone = cli("agent", "uninstall", "--systemd-socket", str(socket_path), *common)
            assert undone.returncode == 0, undone.stderr
            assert restarted == ["kubelet", "kubelet"]
    assert tree(root) == before


def test_fleet_status_with_a_kubeconfig_this_user_cannot_read_is_one_line(tmp_path: Path) -> None:
    """Through the bundle, as an operator without root naming root's kubeconfig."""
    import os

    import pytest

    from tests.helpers import require_bundle

    require_bundle()
    if os.geteuid() != 0:
        pytest.skip("switching to nobody needs root")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    kubeconfig.chmod(0o600)
    tmp_path.chmod(0o755)
    done = bundle_as_nobody("fleet", "status", "--kubeconfig", str(kubeconfig), timeout=60)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"credprovider fleet status: cannot read the kubeconfig {kubeconfig} as uid 65534 "
        "(permission denied): name one this user may read with --kubeconfig\n"
    )


def test_sigterm_during_a_change_lets_it_finish_then_exits(tmp_path: Path) -> None:
    """A DaemonSet roll's SIGTERM arrives while the kubelet restarts: the change (restart, health
    confirmed) ends first, the agent says what it did and exits 0; the node is whole (uninstall
    puts it back byte for byte)."""
    root = kubeadm(tmp_path / "node")
    before = tree(root)
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    started = tmp_path / "restarting"
    slow = tmp_path / "slow-systemctl"
    slow.write_text(f'#!/bin/sh\ntouch {started}\nsleep 3\necho "$1" >> {tmp_path / "restarts"}\n')
    slow.chmod(0o755)
    with serve(lambda request: FakeResponse.text("ok")) as kubelet:
        common = ["--root", root, "--healthz", f"{kubelet.url}/healthz", "--health-timeout", "5"]
        agent = subprocess.Popen(
            [sys.executable, "-m", "credprovider", "credprovider", "agent", "run", "--bundle",
             str(bundle), "--providers", "aws", "--restart-command", f"{slow} {{unit}}", *common],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO), "NODE_NAME": ""},
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        agent.send_signal(signal.SIGTERM)  # mid-restart
        out, err = agent.communicate(timeout=60)
        assert agent.returncode == 0, err
        assert out.splitlines()[0] == "installed", out + err
        assert "SIGTERM: finishing the change under way first" in err
        assert restarts(tmp_path) == ["kubelet"]
        undone = cli("agent", "uninstall", *common, "--restart-command", "true {unit}")
    assert undone.returncode == 0, undone.stderr
    assert tree(root) == before


def test_uninstall_over_a_hand_edited_flags_file_takes_out_only_the_agents_flags(
    tmp_path: Path,
) -> None:
    """An operator adds --max-pods=200 to /etc/default/kubelet after the agent wrote it: uninstall
    keeps that edit and takes the agent's two flags out (the config and plugins they name are
    removed, so leaving them would stop the kubelet at its next start)."""
    from credprovider.tool.node.flagfiles import flags_from_file

    root = kubeadm(tmp_path / "node")
    flags = Path(root, "etc/default/kubelet")
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    with serve(lambda request: FakeResponse.text("ok")) as kubelet:
        common = ["--root", root, "--restart-command", restart_command(tmp_path),
                  "--healthz", f"{kubelet.url}/healthz", "--health-timeout", "10"]  # fmt: skip
        assert cli("agent", "apply", "--bundle", str(bundle), "--providers", "aws",
                   *common).returncode == 0  # fmt: skip
        written = flags.read_text()
        assert "--image-credential-provider-config" in written
        flags.write_text(written.replace("--v=2", "--v=2 --max-pods=200"))
        undone = cli("agent", "uninstall", *common)
    assert undone.returncode == 0, undone.stderr
    assert "only the agent's flags were taken out of it, the edit kept" in undone.stdout
    assert flags_from_file(flags.read_text()).split() == ["--v=2", "--max-pods=200"]
    assert not Path(root, "etc/kubernetes/image-credential-provider-config.yaml").exists()
    assert not Path(root, "var/lib/credprovider").exists()
    assert restarts(tmp_path) == ["kubelet", "kubelet"]


def test_uninstall_with_a_kubelet_that_does_not_come_back_is_rolled_back(tmp_path: Path) -> None:
    """Without the agent's files the kubelet is not healthy (nothing answers its /healthz): the
    files are put back as uninstall found them, the kubelet restarted again, exit 1; a later
    uninstall, the kubelet healthy, takes the node back byte for byte."""
    root = kubeadm(tmp_path / "node")
    before = tree(root)
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    statuses = [200]
    with serve(lambda request: FakeResponse.text("ok", status=statuses[0])) as kubelet:
        common = ["--root", root, "--restart-command", restart_command(tmp_path),
                  "--healthz", f"{kubelet.url}/healthz", "--health-timeout", "2"]  # fmt: skip
        assert cli("agent", "apply", "--bundle", str(bundle), "--providers", "aws",
                   *common).returncode == 0  # fmt: skip
        installed = tree(root)
        statuses[0] = 500
        failed = cli("agent", "uninstall", *common)
        assert failed.returncode == 1, failed.stdout + failed.stderr
        assert failed.stdout.startswith("rolled back: the kubelet was not healthy after the "
                                        "uninstall's restart")  # fmt: skip
        assert tree(root) == installed
        assert restarts(tmp_path) == ["kubelet"] * 3
        statuses[0] = 200
        done = cli("agent", "uninstall", *common)
    assert done.returncode == 0, done.stderr
    assert tree(root) == before


def test_files_only_in_the_charts_default_paths_keeps_to_its_own_directory(
    tmp_path: Path,
) -> None:
    """The chart's mode files by default (credprovider.paths AGENT_BIN_DIR, AGENT_CONFIG): the
    bin dir and the config in the agent's own directory, the one the pod mounts; uninstall
    leaves it as the hostPath made it (empty)."""
    from credprovider.paths import AGENT_BIN_DIR, AGENT_CONFIG, AGENT_HOME

    root = tmp_path / "host"
    (root / "var/lib/credprovider").mkdir(parents=True)  # the chart's hostPath (DirectoryOrCreate)
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    paths = ["--root", str(root), "--files-only", "--bin-dir", AGENT_BIN_DIR, "--config",
             AGENT_CONFIG, "--restart-command", restart_command(tmp_path)]  # fmt: skip
    applied = cli("agent", "apply", "--bundle", str(bundle), "--providers", "aws,gcp", *paths)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines()[0] == "installed"
    written = {p.relative_to(root).as_posix() for p in root.rglob("*")}
    assert {p for p in written if not p.startswith(("var/lib/credprovider", "run"))} == {
        "var", "var/lib",
    }  # fmt: skip
    link = root / AGENT_BIN_DIR.lstrip("/") / "auth-provider-gcp"
    assert os.readlink(link) == f"{AGENT_HOME}/current/auth-provider-gcp"
    config = yaml.safe_load((root / AGENT_CONFIG.lstrip("/")).read_text())
    assert [p["name"] for p in config["providers"]] == [
        "ecr-credential-provider", "auth-provider-gcp",
    ]  # fmt: skip
    undone = cli("agent", "uninstall", *paths)
    assert undone.returncode == 0, undone.stderr
    left = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    # the bootstrap, where the kubelet's flags (set at provisioning) look: it still starts
    assert [p for p in left if not p.startswith("run")] == [
        "var", "var/lib", "var/lib/credprovider", "var/lib/credprovider/agent",
        "var/lib/credprovider/agent/bin", "var/lib/credprovider/agent/bin/credprovider-bootstrap",
        "var/lib/credprovider/agent/config.yaml",
    ]  # fmt: skip
    assert "is left as the bootstrap (credprovider-bootstrap)" in undone.stdout
    assert restarts(tmp_path) == []


def test_a_change_by_hand_to_the_agents_paths_is_refused(tmp_path: Path) -> None:
    """On a node the agent changed, install or migrate --write run by hand (through the bundle,
    as on the node itself: its /etc and /var/lib are the node's) would fight the agent over its
    config, flags file or links: refused in one line naming the path and what to do instead,
    nothing changed. An install to paths of its own still goes ahead."""
    import pytest

    from release.bundle import BUNDLE_DIR
    from tests.helpers import private, require_bundle
    from tests.reliability.agentnode import agent_node

    if os.geteuid() != 0:
        pytest.skip("the node's /etc and /var/lib mounted over this one's needs root")
    require_bundle()
    with agent_node(tmp_path) as (root, bundle, options):
        applied = cli("agent", "apply", "--bundle", str(bundle), "--providers", "aws", *options)
        assert applied.returncode == 0, applied.stderr

        def by_hand(*argv: str) -> subprocess.CompletedProcess[str]:
            mounts = 'mount --bind "$0/etc" /etc && mount --bind "$0/var/lib" /var/lib'
            return subprocess.run(
                private(["sh", "-c", f'{mounts} && exec "$@"', str(root),
                         str(BUNDLE_DIR / "credprovider"), *argv]),
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip

        config = "/etc/kubernetes/image-credential-provider-config.yaml"
        before = tree(str(root))
        for argv, path in [
            (["install", "--providers", "aws,gcp", "--bin-dir", "/var/lib/credprovider/agent/bin",
              "--config-out", config], "/var/lib/credprovider/agent/bin/ecr-credential-provider"),
            (["install", "--providers", "aws,gcp", "--bin-dir", "/etc/by-hand",
              "--config-out", config], config),
            (["migrate", "--write", "--providers", "aws", "--kubelet-flags-file",
              "/etc/default/kubelet", "--config-out", "/etc/kubernetes/by-hand.yaml"],
             "/etc/default/kubelet"),
        ]:  # fmt: skip
            done = by_hand(*argv)
            assert (done.returncode, done.stdout) == (1, ""), (argv, done.stdout, done.stderr)
            assert len(done.stderr.splitlines()) == 1, done.stderr
            assert f"{path} is the chart's agent's (its state " in done.stderr, (argv, done.stderr)
            assert "credprovider agent uninstall first" in done.stderr
            assert tree(str(root)) == before, argv
        # paths of its own: not the agent's to fight over
        done = by_hand("install", "--providers", "aws", "--bin-dir", "/etc/by-hand/bin",
                       "--config-out", "/etc/by-hand/config.yaml")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert (root / "etc/by-hand/config.yaml").is_file()


def test_settings_a_plugin_refuses_change_nothing(tmp_path: Path) -> None:
    """providerSettings whose args the plugin refuses (a typo): the agent starts each plugin from
    the bundle with them before it changes anything, so no node is left whose pulls all fail (the
    kubelet would start with that config and only the dry run after the restart would say so)."""
    from release.bundle import BUNDLE_DIR

    root = kubeadm(tmp_path / "node")
    before = tree(root)
    settings = json.dumps({"aws": {"args": ["--regon", "us-east-1"]}})
    done = cli(
        "agent", "apply", "--root", root, "--bundle", str(BUNDLE_DIR.resolve()), "--providers",
        "aws", "--provider-settings", settings, "--restart-command", restart_command(tmp_path),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("refused: ") and first.endswith("; nothing is changed"), first
    assert "ecr-credential-provider refuses its args: ecr-credential-provider: error: " in first
    assert "unrecognized arguments: --regon" in first
    assert tree(root) == before and restarts(tmp_path) == []
    # agent plan, run from the bundle, says so first, as apply would
    planned = cli("agent", "plan", "--root", root, "--providers", "aws", "--provider-settings",
                  settings, use_bundle=True)  # fmt: skip
    assert planned.returncode == 1, planned.stderr
    said = planned.stdout.splitlines()[1]
    assert said.startswith("  nothing would change: ") and said.endswith("would fail"), said
    assert "/ecr-credential-provider refuses its args" in said
    assert "unrecognized arguments: --regon" in said
    assert tree(root) == before


def test_the_pods_own_settings_files_never_refuse_a_nodes_config(tmp_path: Path) -> None:
    """The agent starts each plugin from the bundle before it changes the node, with its args
    and env alone: the files they name are the node's, not those of the pod (or machine) the
    agent runs in. A broken AWS config in the agent's own environment must not refuse the node's
    change, as install on this machine rightly would (test_render.py)."""
    from release.bundle import BUNDLE_DIR

    root = kubeadm(tmp_path / "node")
    (tmp_path / "aws-config").write_text("[default\n")
    with serve(lambda request: FakeResponse.text("ok")) as kubelet:
        done = cli(
            "agent", "apply", "--root", root, "--bundle", str(BUNDLE_DIR.resolve()),
            "--providers", "aws", "--restart-command", restart_command(tmp_path),
            "--healthz", f"{kubelet.url}/healthz", "--health-timeout", "2",
            env={"AWS_CONFIG_FILE": str(tmp_path / "aws-config")},
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "installed"
    assert restarts(tmp_path) == ["kubelet"]

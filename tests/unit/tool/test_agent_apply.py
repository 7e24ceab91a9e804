"""The node agent applying its plan to a fixture node, and taking it off (credprovider/tool/agent/
apply.py): the kubelet restarts only when its input changed, an unhealthy kubelet is rolled back,
a pod restart or an upgrade restarts nothing, and uninstall leaves the node byte for byte as it was
(someone else's later change to a file is reported and kept)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from credprovider.paths import AGENT_EXEC_HOME
from credprovider.tool.agent.apply import apply, load_state
from credprovider.tool.agent.confirm import Outcome
from credprovider.tool.agent.plan import plan_node
from credprovider.tool.agent.platforms import recognize
from credprovider.tool.agent.recovery import plan_finished
from credprovider.tool.agent.state import JOURNAL, STATE
from credprovider.tool.agent.uninstall import uninstall
from credprovider.tool.change.engine import ChangeKind
from credprovider.tool.change.journalformat import read
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.root import NodeRoot
from tests.platformnodes import gke
from tests.unit.tool.test_agent_plan import KUBEADM_NODE, node

A = "/var/lib/credprovider/agent"


def tree(root: str) -> dict[str, tuple[str, str, int]]:
    """Every path under ``root``: its kind, its text (a binary's sha256) or link target, its
    mode. ``/run`` is left out: on a node it is a tmpfs, where the node's lock is
    (change/lock.py), nothing the tool leaves on disk."""
    found = {}
    for directory, dirs, files in os.walk(root):
        if directory == root and "run" in dirs:
            dirs.remove("run")
        for name in [*dirs, *files]:
            path = Path(directory) / name
            relative = "/" + str(path.relative_to(root))
            if path.is_symlink():
                found[relative] = ("link", os.readlink(path), 0)
            elif path.is_dir():
                found[relative] = ("dir", "", path.stat().st_mode)
            else:
                data = path.read_bytes()
                try:
                    shown = data.decode()
                except UnicodeDecodeError:
                    shown = "sha256:" + hashlib.sha256(data).hexdigest()
                found[relative] = ("file", shown, path.stat().st_mode)
    return found


def bundle(tmp_path: Path, version: str) -> Path:
    """A stand-in for the bundle the image carries: the launcher and the plugin names."""
    directory = tmp_path / f"bundle-{version}"
    directory.mkdir(parents=True)
    (directory / "credprovider").write_text(f"launcher {version}\n")
    (directory / "ecr-credential-provider").symlink_to("credprovider")
    return directory


class Service:
    """The node's service manager, as the agent sees it: restarts recorded, health answered."""

    def __init__(self, problem: str | None = None) -> None:
        self.restarts: list[str] = []
        self.problem = problem

    def restart(self, unit: str) -> None:
        self.restarts.append(unit)

    def healthy(self) -> str | None:
        return self.problem


def run(root: str, tmp_path: Path, version: str, service: Service) -> Outcome:
    node = NodeRoot.at(root)
    plan = plan_finished(node, lambda: plan_node(node, ["aws"], version))  # as agent apply plans
    return apply(node, plan, bundle(tmp_path, version), version, service.restart, service.healthy)


def kubeadm(tmp_path: Path) -> str:
    return node(tmp_path, {**KUBEADM_NODE, "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n"})


def test_install_then_a_pod_restart_then_an_upgrade(tmp_path: Path) -> None:
    root = kubeadm(tmp_path)
    service = Service()
    first = run(root, tmp_path, "0.1.0", service)
    assert (first.result, service.restarts) == ("installed", ["kubelet"])
    assert os.readlink(Path(root) / A.lstrip("/") / "current") == "versions/0.1.0"
    link = Path(root) / A.lstrip("/") / "bin/ecr-credential-provider"
    assert os.readlink(link) == f"{A}/current/ecr-credential-provider"
    launcher = Path(root) / A.lstrip("/") / "versions/0.1.0/credprovider"
    assert launcher.read_text() == "launcher 0.1.0\n"
    assert "--image-credential-provider-config=" in (Path(root) / "etc/default/kubelet").read_text()

    # the pod restarts: the plan finds everything in place and nothing happens
    again = run(root, tmp_path / "again", "0.1.0", service)
    assert (again.result, service.restarts) == ("unchanged", ["kubelet"])

    # a new image with the same config: one link re-pointed, no restart
    upgraded = run(root, tmp_path / "upgrade", "0.2.0", service)
    assert upgraded.result == "installed" and upgraded.restarted == []
    assert os.readlink(Path(root) / A.lstrip("/") / "current") == "versions/0.2.0"
    assert load_state(NodeRoot.at(root)).version == "0.2.0"

    # two upgrades on: the current bundle and the one before it stay, older ones go; so does
    # an old one a killed run had renamed away to remove (durable.remove_whole)
    versions = Path(root) / A.lstrip("/") / "versions"
    (versions / ".0.0.9.credprovider-new/_internal").mkdir(parents=True)
    run(root, tmp_path / "third", "0.3.0", service)
    assert sorted(p.name for p in versions.iterdir()) == ["0.2.0", "0.3.0"]
    assert service.restarts == ["kubelet"]  # none of the upgrades restarted the kubelet


def test_an_unhealthy_kubelet_is_rolled_back(tmp_path: Path) -> None:
    root = kubeadm(tmp_path)
    before = tree(root)
    service = Service(problem="/healthz answered 500")
    outcome = run(root, tmp_path, "0.1.0", service)
    assert outcome.result == "rolled back"
    assert "(/healthz answered 500)" in outcome.detail
    assert service.restarts == ["kubelet", "kubelet"]
    after = tree(root)
    for path in ("/etc/default/kubelet", "/etc/kubernetes/image-credential-provider-config.yaml"):
        assert after.get(path) == before.get(path), path


def test_uninstall_leaves_the_node_as_it_was(tmp_path: Path) -> None:
    root = kubeadm(tmp_path)
    before = tree(root)
    service = Service()
    run(root, tmp_path, "0.1.0", service)
    run(root, tmp_path / "upgrade", "0.2.0", service)
    assert tree(root) != before
    outcome = uninstall(NodeRoot.at(root), "kubelet", service.restart)
    assert (outcome.result, outcome.kept) == ("uninstalled", [])
    assert tree(root) == before  # files, links, modes, and no directory left behind
    assert service.restarts == ["kubelet", "kubelet"]


def test_a_config_that_gives_a_secret_is_written_for_root_alone_and_uninstalled(
    tmp_path: Path,
) -> None:
    """The chart's providerSettings giving a static key: the agent wrote the config 0644, for
    every user of the node to read. 0600 now; uninstall still leaves the node as it was."""
    root = kubeadm(tmp_path)
    before = tree(root)
    node, service = NodeRoot.at(root), Service()
    settings = {"aws": {"env": {"AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE"}}}
    plan = plan_finished(node, lambda: plan_node(node, ["aws"], "0.1.0", settings=settings))
    assert plan.config_path is not None and not plan.refused, plan.refused
    done = apply(node, plan, bundle(tmp_path, "0.1.0"), "0.1.0", service.restart, service.healthy)
    assert done.result == "installed"
    assert oct(Path(node.host(plan.config_path)).stat().st_mode & 0o777) == "0o600"
    assert uninstall(node, "kubelet", service.restart).result == "uninstalled"
    assert tree(root) == before


def test_uninstall_keeps_an_edit_someone_made_since(tmp_path: Path) -> None:
    root = kubeadm(tmp_path)
    service = Service()
    run(root, tmp_path, "0.1.0", service)
    flags = Path(root) / "etc/default/kubelet"
    flags.write_text(flags.read_text() + "# edited by hand\n")
    outcome = uninstall(NodeRoot.at(root), "kubelet", service.restart)
    # the edit is kept; only the agent's two flags are taken out (issue #46: they name a config
    # and plugins uninstall removes)
    assert outcome.kept == [] and "/etc/default/kubelet" in outcome.changed
    assert flags.read_text().endswith("# edited by hand\n")
    assert "--image-credential-provider" not in flags.read_text()
    config = Path(root) / "etc/kubernetes/image-credential-provider-config.yaml"
    assert not config.exists()  # it was not there before the install


def test_a_refused_node_is_not_touched(tmp_path: Path) -> None:
    root = node(tmp_path, {"/etc/os-release": "ID=bottlerocket\n"})
    before = tree(root)
    service = Service()
    outcome = run(root, tmp_path, "0.1.0", service)
    assert outcome.result == "refused" and "settings API" in outcome.detail
    assert (tree(root), service.restarts) == (before, [])


def test_a_step_that_fails_partway_is_still_undone_by_uninstall(tmp_path: Path) -> None:
    """The config's directory is a file: apply fails after the bundle and links are placed;
    the state on the node knows them, and uninstall puts the node back."""
    root = node(
        tmp_path,
        {
            **KUBEADM_NODE,
            "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n",
            "/etc/kubernetes": "",
        },
    )
    before = tree(root)
    service = Service()
    with pytest.raises(OSError):
        run(root, tmp_path, "0.1.0", service)
    assert tree(root) != before and service.restarts == []
    # its links and kubelet inputs were one transaction of the one journal: left, as a kill leaves it
    left = read(Path(root, JOURNAL.lstrip("/")))
    assert left is not None and left.change is ChangeKind.AGENT
    paths = [str(op.path) for op in left.ops]
    assert paths[-2:] == ["/etc/kubernetes/image-credential-provider-config.yaml",
                          "/etc/default/kubelet"] and f"{A}/current" in paths  # fmt: skip
    notes = plan_node(NodeRoot.at(root), ["aws"], "0.1.0").notes
    assert any(f"its journal {JOURNAL} is left" in note for note in notes), notes
    undone = uninstall(NodeRoot.at(root), "kubelet", service.restart)
    assert undone.kept == [] and any("is undone with the rest" in n for n in undone.notes)
    assert tree(root) == before


def test_a_change_left_in_the_agent_s_journal_is_finished_by_the_next_apply(
    tmp_path: Path,
) -> None:
    """The same failure, then its cause gone: the next apply finishes the journal (the one
    recovery) before it plans again, says so, and leaves the node as one uninterrupted apply."""
    files = {**KUBEADM_NODE, "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n"}
    reference = node(tmp_path / "reference", files)
    root = node(tmp_path / "node", {**files, "/etc/kubernetes": ""})
    run(reference, tmp_path / "r", "0.1.0", Service())
    with pytest.raises(OSError):  # the config's directory is a file: the journal is left part done
        run(root, tmp_path / "a", "0.1.0", Service())
    assert Path(root, JOURNAL.lstrip("/")).exists()
    Path(root, "etc/kubernetes").unlink()
    service = Service()
    again = run(root, tmp_path / "b", "0.1.0", service)
    assert any("finished the change a killed agent run began" in n for n in again.notes)
    assert not Path(root, JOURNAL.lstrip("/")).exists()
    assert (again.result, service.restarts) == ("installed", ["kubelet"])
    found, wanted = tree(root), tree(reference)
    state, reference_state = (json.loads(t.pop(STATE)[1]) for t in (found, wanted))
    assert found == wanted
    # the directories it made, in the order the two runs found them missing
    assert sorted(state.pop("made_dirs")) == sorted(reference_state.pop("made_dirs"))
    assert state == reference_state


def _files_mode(root: str, tmp_path: Path, version: str) -> Outcome:
    from credprovider.paths import AGENT_BIN_DIR, AGENT_CONFIG
    from credprovider.tool.agent.platforms import files_only

    rules = files_only(AGENT_CONFIG, AGENT_BIN_DIR)
    node = NodeRoot.at(root)
    plan = plan_node(node, ["aws"], version, platform=rules)
    service = Service()
    return apply(node, plan, bundle(tmp_path, version), version, service.restart, service.healthy)


def test_mode_files_replaces_the_provisioned_bootstrap_and_uninstall_puts_it_back(
    tmp_path: Path,
) -> None:
    """docs/fleet.md's provisioning (the bootstrap script, run as it is printed there, under the
    node's root), then the agent, then uninstall: the node's files as provisioning left them, byte
    for byte, and the agent's config never kept the bootstrap's provider beside ours."""
    import subprocess

    import yaml

    from credprovider.paths import AGENT_BIN_DIR, AGENT_CONFIG
    from credprovider.tool.agent.bootstrap import BOOTSTRAP_PROVIDER, provisioning_script
    from credprovider.tool.agent.platforms import files_only

    root = tmp_path / "node"
    script = provisioning_script(f"{root}{AGENT_CONFIG}", f"{root}{AGENT_BIN_DIR}")
    subprocess.run(["sh", "-e"], input=script, text=True, check=True)
    provisioned = tree(str(root))
    assert _files_mode(str(root), tmp_path, "0.1.0").result == "installed"
    config = yaml.safe_load((root / AGENT_CONFIG.lstrip("/")).read_text())
    assert [p["name"] for p in config["providers"]] == ["ecr-credential-provider"]
    assert (root / AGENT_BIN_DIR.lstrip("/") / BOOTSTRAP_PROVIDER).is_file()
    outcome = uninstall(
        NodeRoot.at(str(root)),
        "",
        Service().restart,
        bootstrap=files_only(AGENT_CONFIG, AGENT_BIN_DIR),
    )
    assert outcome.result == "uninstalled" and outcome.kept == []
    assert tree(str(root)) == provisioned


# Each command the provisioning script runs, counted; the Nth kills the script's shell (-9)
# before it runs: a first boot cut short there. Installed in a directory put first on PATH.
_KILLED_AT = """#!/bin/sh
count=0
[ -e "$STEPS" ] && read -r count < "$STEPS"
count=$((count + 1))
echo "$count" > "$STEPS"
[ "$count" = "$KILL_AT" ] && kill -9 "$PPID" && exit 137
exec "/bin/$(basename "$0")" "$@"
"""


def test_the_bootstrap_script_cut_short_at_any_command_leaves_no_half_file(tmp_path: Path) -> None:
    """The provisioning script killed before each command it runs: the config and the plugin are
    each absent or whole (a half config would keep the kubelet from starting, and the script's
    next run, seeing it there, would keep it); a run after it leaves both whole and nothing
    beside them."""
    import subprocess

    from credprovider.paths import AGENT_BIN_DIR, AGENT_CONFIG
    from credprovider.tool.agent.bootstrap import (
        BOOTSTRAP_PROVIDER,
        CONFIG_TEXT,
        PLUGIN_TEXT,
        provisioning_script,
    )  # fmt: skip

    shims = tmp_path / "shims"
    shims.mkdir()
    for name in ("cat", "chmod", "sync", "mv", "rm", "mkdir"):
        (shims / name).write_text(_KILLED_AT)
        (shims / name).chmod(0o755)
    # not the host's sync: this test's files need no flush, and the host's disks are not its own
    (shims / "sync").write_text(_KILLED_AT.replace('exec "/bin/$(basename "$0")" "$@"', "exit 0"))

    def run(root: Path, kill_at: int) -> int:
        steps = root.parent / f"{root.name}.steps"
        script = provisioning_script(f"{root}{AGENT_CONFIG}", f"{root}{AGENT_BIN_DIR}")
        env = {**os.environ, "PATH": f"{shims}:/usr/bin:/bin", "STEPS": str(steps),
               "KILL_AT": str(kill_at)}  # fmt: skip
        subprocess.run(["sh", "-e"], input=script, text=True, env=env, check=False)
        return int(steps.read_text())

    total = run(tmp_path / "whole", 0)
    config, plugin = AGENT_CONFIG.lstrip("/"), f"{AGENT_BIN_DIR.lstrip('/')}/{BOOTSTRAP_PROVIDER}"
    for kill_at in range(1, total + 1):
        root = tmp_path / f"cut-{kill_at}"
        run(root, kill_at)
        for path, text in ((config, CONFIG_TEXT), (plugin, PLUGIN_TEXT)):
            if (root / path).exists():
                assert (root / path).read_text() == text, (kill_at, path)
        if (root / plugin).exists():
            assert stat.S_IMODE((root / plugin).stat().st_mode) == 0o755, kill_at
        run(root, 0)
        assert tree(str(root)) == tree(str(tmp_path / "whole")), kill_at
    assert total >= 8  # mkdir, and rm, cat, chmod, sync, mv for each file


def test_mode_files_uninstall_leaves_the_bootstrap_where_there_was_no_config(
    tmp_path: Path,
) -> None:
    """A node provisioned without the bootstrap (the flags alone): uninstall does not delete the
    config and bin dir the flags name, it leaves the bootstrap there, a config the kubelet starts
    with (its check, as validate makes it, passes)."""
    from credprovider.paths import AGENT_BIN_DIR, AGENT_CONFIG
    from credprovider.tool.agent.bootstrap import BOOTSTRAP_PROVIDER, CONFIG_TEXT, PLUGIN_TEXT
    from credprovider.tool.agent.platforms import files_only
    from credprovider.tool.images.bindir import check_binaries
    from credprovider.tool.kubeconfig.validate import load_config

    root = tmp_path / "node"
    (root / "var/lib/credprovider").mkdir(parents=True)
    assert _files_mode(str(root), tmp_path, "0.1.0").result == "installed"
    outcome = uninstall(
        NodeRoot.at(str(root)),
        "",
        Service().restart,
        bootstrap=files_only(AGENT_CONFIG, AGENT_BIN_DIR),
    )
    assert outcome.result == "uninstalled"
    assert any("left as the bootstrap" in note for note in outcome.notes)
    config = root / AGENT_CONFIG.lstrip("/")
    plugin = root / AGENT_BIN_DIR.lstrip("/") / BOOTSTRAP_PROVIDER
    assert config.read_text() == CONFIG_TEXT and plugin.read_text() == PLUGIN_TEXT
    assert plugin.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in (root / "var/lib/credprovider/agent").iterdir()) == [
        "bin",
        "config.yaml",
    ]  # the agent's own files and state gone
    checked = check_binaries(load_config(str(config)), str(plugin.parent))
    assert checked.stops_kubelet == []
    # and again (a second uninstall, or one after a kill): nothing more, nothing less
    again = uninstall(
        NodeRoot.at(str(root)),
        "",
        Service().restart,
        bootstrap=files_only(AGENT_CONFIG, AGENT_BIN_DIR),
    )
    assert again.result == "uninstalled" and config.read_text() == CONFIG_TEXT


def test_mode_files_uninstall_with_another_bin_dir_changes_nothing(tmp_path: Path) -> None:
    """The bootstrap goes only where the agent linked its plugins: a wrong --bin-dir is refused
    before anything changes (the kubelet's flags name the right one)."""
    from credprovider.paths import AGENT_CONFIG
    from credprovider.tool.agent.platforms import files_only
    from credprovider.tool.errors import NodeChangeError

    root = tmp_path / "node"
    (root / "var/lib/credprovider").mkdir(parents=True)
    assert _files_mode(str(root), tmp_path, "0.1.0").result == "installed"
    before = tree(str(root))
    with pytest.raises(NodeChangeError, match="is not where the agent linked its plugins"):
        uninstall(
            NodeRoot.at(str(root)),
            "",
            Service().restart,
            bootstrap=files_only(AGENT_CONFIG, "/opt/x"),
        )
    assert tree(str(root)) == before


def test_a_migrated_node_keeps_the_external_cloud_provider_after_uninstall(tmp_path: Path) -> None:
    """The agent asked to migrate an in-tree kubeadm node: installed, then unchanged on the next
    run (no longer in-tree), then uninstalled: the node as it was but external, since the in-tree
    flag would stop a kubelet 1.31 or newer; kubeadm's own file is never touched."""
    from credprovider.tool.agent import envfile
    from credprovider.tool.node.kubelet_flags import flag_value

    root = kubeadm(tmp_path)
    generated = Path(root) / "var/lib/kubelet/kubeadm-flags.env"
    generated.write_text('KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 --cloud-provider=aws"\n')
    service = Service()

    def migrate(version: str, where: Path) -> Outcome:
        plan = plan_node(NodeRoot.at(root), ["aws"], version, migrate_in_tree=True)
        return apply(
            NodeRoot.at(root),
            plan,
            bundle(where, version),
            version,
            service.restart,
            service.healthy,
        )

    assert migrate("0.1.0", tmp_path).result == "installed"
    texts = envfile.texts(
        lambda p: (Path(root) / p.lstrip("/")).read_text(), ("/etc/default/kubelet",)
    )
    assert flag_value(envfile.args(texts), "cloud-provider") == "external"
    assert migrate("0.1.0", tmp_path / "again").result == "unchanged"
    outcome = uninstall(NodeRoot.at(root), "kubelet", service.restart)
    assert outcome.result == "uninstalled" and outcome.kept == []
    assert (Path(root) / "etc/default/kubelet").read_text() == (
        'KUBELET_EXTRA_ARGS="--v=2 --cloud-provider=external"\n'
    )
    assert "--cloud-provider=aws" in generated.read_text()


def test_bundles_an_earlier_agent_left_on_a_noexec_home_move_to_the_exec_mount(
    tmp_path: Path,
) -> None:
    """A GKE node where an agent placed its bundles in its home (on COS, a noexec /var): the next
    apply places them on /home/kubernetes/bin's exec mount and re-links the plugins there; the
    old home's bundles are removed one run later (a plugin may still be running from them);
    uninstall leaves the node as it was."""
    root = str(gke().build(tmp_path / "node"))
    before = tree(root)
    service = Service()
    gke_rules, _ = recognize(NodeRoot.at(root))
    assert gke_rules.bundles == AGENT_EXEC_HOME
    earlier = plan_node(NodeRoot.at(root), ["aws"], "0.1.0", replace(gke_rules, bundles=A))
    apply(
        NodeRoot.at(root),
        earlier,
        bundle(tmp_path, "0.1.0"),
        "0.1.0",
        service.restart,
        service.healthy,
    )
    link = Path(root) / "home/kubernetes/bin/ecr-credential-provider"
    assert os.readlink(link) == f"{A}/current/ecr-credential-provider"

    moved = run(root, tmp_path / "moved", "0.2.0", service)
    assert moved.result == "installed", moved.detail
    assert os.readlink(link) == f"{AGENT_EXEC_HOME}/current/ecr-credential-provider"
    state = load_state(NodeRoot.at(root))
    assert (state.bundles, state.retired) == (AGENT_EXEC_HOME, A)
    assert (Path(root) / A.lstrip("/") / "versions/0.1.0").is_dir()  # one run more

    run(root, tmp_path / "later", "0.2.0", service)
    assert not (Path(root) / A.lstrip("/") / "versions").exists()
    assert not (Path(root) / A.lstrip("/") / "current").exists()
    assert load_state(NodeRoot.at(root)).retired == ""

    outcome = uninstall(NodeRoot.at(root), "kubelet", service.restart)
    assert outcome.result == "uninstalled", outcome.detail
    assert tree(root) == before


@pytest.mark.parametrize("home", ["/etc", "/", "/home/kubernetes/bin", "/var/lib/other"])
def test_a_state_naming_another_home_for_its_bundles_is_refused(tmp_path: Path, home: str) -> None:
    """Uninstall removes versions/ and current in the homes the state names: a forged one (the
    node's /etc, say) is refused before anything is read from it."""
    root = kubeadm(tmp_path)
    service = Service()
    run(root, tmp_path, "0.1.0", service)
    state_file = Path(root) / A.lstrip("/") / "state.json"
    state = json.loads(state_file.read_text())
    state["retired"] = home
    state_file.write_text(json.dumps(state))
    (Path(root) / "etc/versions").mkdir()
    with pytest.raises(NodeChangeError, match="is not the agent's state"):
        uninstall(NodeRoot.at(root), "kubelet", service.restart)
    assert (Path(root) / "etc/versions").is_dir()


def test_a_state_an_earlier_agent_wrote_is_uninstalled_byte_for_byte(tmp_path: Path) -> None:
    """An earlier agent kept each copy with the file's own mode and recorded the mode whole
    (``st_mode``); this one keeps copies 0600 and records permission bits. Its state, as the
    earlier agent left it, still puts the node back as it was, modes too."""
    root = kubeadm(tmp_path)
    flags = Path(root) / "etc/default/kubelet"
    flags.chmod(0o640)
    before = tree(root)
    service = Service()
    run(root, tmp_path, "0.1.0", service)
    place = Path(root) / STATE.lstrip("/")
    data = json.loads(place.read_text())
    for kept in data["originals"].values():
        if "file" in kept:
            assert (Path(root) / kept["file"].lstrip("/")).stat().st_mode & 0o777 == 0o600
            (Path(root) / kept["file"].lstrip("/")).chmod(
                kept["mode"]
            )  # as the earlier one kept it
            kept["mode"] |= stat.S_IFREG
    place.write_text(json.dumps(data))
    outcome = uninstall(NodeRoot.at(root), "kubelet", service.restart)
    assert (outcome.result, outcome.kept) == ("uninstalled", [])
    assert tree(root) == before
    assert flags.stat().st_mode & 0o777 == 0o640

"""Each platform's node as its vendor provisions it (tests/platformnodes.py, issue #61): discovery
and ``doctor --root`` name the config and bin dir that platform's kubelet is started with, read
wherever the vendor keeps its flags (inline in the unit, an environment file's variable, a drop-in
that resets ExecStart=, a quoted "$DAEMON_ARGS", a fixed path)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from credprovider.paths import AGENT_BIN_DIR, NODE_CONFIG
from credprovider.tool.agent.plan import plan_node
from credprovider.tool.change.results import Action
from credprovider.tool.node.discovery import discover
from credprovider.tool.node.root import NodeRoot
from release.bundle import REPO
from tests.helpers import bundle_as_nobody
from tests.integration.cli.conftest import doctor
from tests.platformnodes import NODES, PlatformNode, k3s, kops, kubeadm_binaries, rke2


@pytest.mark.parametrize("make", NODES, ids=lambda make: make.__name__)
def test_doctor_names_what_each_platforms_kubelet_is_started_with(
    tmp_path: Path, make: Callable[[], PlatformNode]
) -> None:
    platform = make()
    root = platform.build(tmp_path / "node")
    view = discover(NodeRoot.at(root))
    assert (view.settings.provider_config, view.settings.bin_dir) == (
        platform.config,
        platform.bin_dir,
    ), f"{platform.name} ({platform.source}): found by {view.found_by}"
    _, report = doctor("--root", str(root))
    assert (report["config"], report["binDir"]) == (platform.config, platform.bin_dir), report
    assert "no running kubelet and no known layout" not in str(report)


def test_a_unit_without_its_environment_file_says_systemd_would_not_start_it(
    tmp_path: Path,
) -> None:
    """GKE's unit names /etc/default/kubelet without ``-``: gone, the kubelet never starts (said),
    and nothing of KUBELET_OPTS is taken for its flags (the GKE layout's paths are the guess)."""
    platform = NODES[0]()
    root = platform.build(tmp_path / "node")
    (root / "etc/default/kubelet").unlink()
    view = discover(NodeRoot.at(root))
    assert view.found_by.startswith("layout GKE"), view.found_by
    assert any("EnvironmentFile=/etc/default/kubelet is missing" in n for n in view.notes)
    (root / "etc/default/kubelet").write_text(
        'KUBELET_OPTS="--image-credential-provider-config=/x.yaml '
        '--image-credential-provider-bin-dir=/y"\n'
    )
    (root / "etc/systemd/system/kubelet.service.d").mkdir(parents=True)
    (root / "etc/systemd/system/kubelet.service.d/20-gone.conf").write_text(
        "[Service]\nEnvironmentFile=/etc/gone\n"
    )
    view = discover(NodeRoot.at(root))
    assert (view.settings.provider_config, view.settings.bin_dir) == ("/x.yaml", "/y")
    assert any("EnvironmentFile=/etc/gone is missing" in note for note in view.notes), view.notes


@pytest.mark.parametrize("make", NODES, ids=lambda make: make.__name__)
def test_the_agent_writes_the_file_that_platforms_kubelet_reads_or_says_why_not(
    tmp_path: Path, make: Callable[[], PlatformNode]
) -> None:
    """``agent plan`` (what ``agent apply`` does): on a platform it changes, the config it
    writes is the one the kubelet is started with and the plugins go in its bin dir; on one it
    does not (an image-based or self-managing platform), one line says why and what to do."""
    platform = make()
    root = platform.build(tmp_path / "node")
    plan = plan_node(NodeRoot.at(root), ["aws", "gcp"], "0.1.0")
    if plan.refused:
        refusing = {"OpenShift (RHCOS)", "Talos", "Bottlerocket", "kOps", "Gardener"}
        assert platform.name in refusing, plan.refused
        assert "nothing" in plan.refused or ":" in plan.refused
        return
    assert plan.config_path == platform.config, (platform.name, plan.platform, plan.notes)
    assert plan.bin_dir == platform.bin_dir, (platform.name, plan.platform)
    # every file the kubelet will execute is where the vendor's mounts allow execution
    placed = [step.path for step in plan.steps if step.action is Action.PLACE]
    assert placed and all(platform.executable(path) for path in placed), (platform.name, placed)
    if platform.noexec:
        assert any(note.startswith(f"the bundles go to {plan.bundles}") for note in plan.notes)


def _agent(tmp_path: Path, root: Path, action: str, *more: str) -> CompletedProcess[str]:
    """``credprovider agent ACTION`` on the node under ``root`` through the CLI, its kubelet a
    stand-in that answers healthy, its restarts recorded."""
    from emulators.http import FakeResponse, serve
    from tests.integration.cli.test_agent import cli, restart_command

    with serve(lambda request: FakeResponse.text("ok")) as kubelet:
        return cli(
            "agent", action, "--root", str(root), "--restart-command", restart_command(tmp_path),
            "--healthz", f"{kubelet.url}/healthz", "--health-timeout", "2", *more,
        )  # fmt: skip


def _applied(tmp_path: Path, root: Path) -> None:
    from tests.integration.cli.conftest import fake_bundle

    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    applied = _agent(tmp_path, root, "apply", "--bundle", str(bundle), "--providers", "aws")
    assert applied.returncode == 0, applied.stderr + applied.stdout


def _gke_with_the_agent(tmp_path: Path) -> tuple[PlatformNode, Path]:
    """A GKE node as its vendor provisions it, the agent applied on it through the CLI."""
    platform = NODES[0]()  # GKE
    root = platform.build(tmp_path / "node")
    _applied(tmp_path, root)
    return platform, root


def test_kubeadm_from_binaries_gets_the_flags_where_its_drop_in_reads_them(tmp_path: Path) -> None:
    """kubeadm installed as the Kubernetes docs install it without a package manager: its drop-in
    reads KUBELET_EXTRA_ARGS from /etc/sysconfig/kubelet, on Ubuntu too, where /etc/default is
    there and /etc/sysconfig is not. The agent sets the flags there, so that the kubelet as
    systemd starts it is given what the agent placed (before: it wrote /etc/default/kubelet,
    which this kubelet never reads, and said "installed"); uninstall leaves the node as it was,
    the directory it made gone."""
    from tests.unit.tool.test_agent_apply import tree

    root = kubeadm_binaries().build(tmp_path / "node")
    before = tree(str(root))
    _applied(tmp_path, root)
    assert not (root / "etc/default/kubelet").exists()
    view = discover(NodeRoot.at(root))
    assert view.found_by.startswith("the kubelet's unit"), view.found_by
    assert (view.settings.provider_config, view.settings.bin_dir) == (NODE_CONFIG, AGENT_BIN_DIR)
    written = (root / "etc/sysconfig/kubelet").read_text()
    assert written.startswith("KUBELET_EXTRA_ARGS=") and AGENT_BIN_DIR in written, written
    undone = _agent(tmp_path, root, "uninstall")
    assert undone.returncode == 0, undone.stderr + undone.stdout
    assert tree(str(root)) == before


@pytest.mark.parametrize(("make", "unit"), [(k3s, "k3s-agent"), (rke2, "rke2-agent")])
def test_a_k3s_agent_and_an_rke2_from_its_tarball_are_changed_and_restarted(
    tmp_path: Path, make: Callable[[], PlatformNode], unit: str
) -> None:
    """A k3s agent as k3s' install script leaves it (nothing of k3s' outside its unit in
    /etc/systemd/system) was "not a layout the agent knows"; RKE2 from its tarball (its units in
    /usr/local/lib/systemd/system) had its config written but its service never restarted, and
    k3s and RKE2 give the kubelet the two flags only at their start. Now each is recognised, and
    ``agent apply`` through the CLI restarts its own service; uninstall restarts it again and
    leaves the node as it was."""
    from tests.integration.cli.test_agent import restarts
    from tests.unit.tool.test_agent_apply import tree

    platform = make()
    root = platform.build(tmp_path / "node")
    before = tree(str(root))
    planned = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    assert (planned.platform, planned.refused, planned.restart) == (platform.name, "", unit)
    _applied(tmp_path, root)
    assert restarts(tmp_path) == [unit]
    undone = _agent(tmp_path, root, "uninstall")
    assert undone.returncode == 0, undone.stderr + undone.stdout
    assert restarts(tmp_path) == [unit, unit] and tree(str(root)) == before


def test_k3s_told_other_paths_in_its_own_config_gets_the_plugins_there(tmp_path: Path) -> None:
    """k3s gives its kubelet the config and bin dir its own configuration names
    (/etc/rancher/k3s/config.yaml and its drop-ins, k3s-io/k3s pkg/configfilearg), not always
    its defaults. The agent wrote the defaults, which that kubelet never reads, and said
    installed; doctor found no layout. Now the agent merges into the config named, links the
    plugins where named, restarts k3s and leaves the defaults alone; doctor --root reads the same
    paths, naming the file that named them; uninstall leaves the node as it was."""
    from tests.integration.cli.test_agent import restarts
    from tests.unit.tool.test_agent_apply import tree

    named = "/etc/rancher/k3s/config.yaml.d/50-credentials.yaml"
    config, bin_dir = "/etc/k3s-cp/config.yaml", "/opt/k3s-cp/bin"
    platform = k3s()
    platform.files[named] = (
        f"image-credential-provider-config: {config}\n"
        f"image-credential-provider-bin-dir: {bin_dir}\n"
    )
    platform.files[config] = platform.files.pop(platform.config)
    platform.files[f"{bin_dir}/ecr-credential-provider"] = platform.files.pop(
        platform.executables[0]
    )
    platform = replace(platform, executables=(f"{bin_dir}/ecr-credential-provider",))
    root = platform.build(tmp_path / "node")
    before = tree(str(root))
    _, report = doctor("--root", str(root), "--offline")
    layout = next(c for c in report["checks"] if c["area"] == "node" and "layout" in c["message"])
    assert f"k3s: named in {named}" in layout["message"], layout
    assert report["config"] == config and report["binDir"] == bin_dir, report
    from tests.integration.cli.test_agent import cli

    planned = cli("agent", "plan", "--root", str(root))
    assert (
        f"the k3s configuration names {config} and {bin_dir} (given to the kubelet once both "
        "exist)" in " ".join(planned.stdout.split())
    ), planned.stdout
    _applied(tmp_path, root)
    assert restarts(tmp_path) == ["k3s-agent"]
    assert "credprovider" in (root / config.lstrip("/")).read_text()
    assert (root / bin_dir.lstrip("/") / "ecr-credential-provider").is_symlink()
    assert not (root / "var/lib/rancher/credentialprovider").exists()
    undone = _agent(tmp_path, root, "uninstall")
    assert undone.returncode == 0, undone.stderr + undone.stdout
    assert tree(str(root)) == before


def test_k3s_configuration_this_user_cannot_read_is_no_verdict(tmp_path: Path) -> None:
    """Through the bundle as nobody: k3s' configuration is root's (a drop-in of 0600, as its
    token needs), so where it points the kubelet cannot be told here. ``agent plan`` says so in
    one line with no verdict (exit 2), as doctor does, never the defaults as a guess."""
    import os
    import shutil
    import tempfile

    from tests.helpers import require_bundle

    if os.geteuid() != 0:
        pytest.skip("switching to nobody needs root")
    require_bundle()
    place = Path(tempfile.mkdtemp(prefix="platform-", dir="/tmp"))  # pytest's tmp is root's only
    try:
        platform = k3s()
        named = "/etc/rancher/k3s/config.yaml.d/50-credentials.yaml"
        platform.files[named] = "token: K10secret\nimage-credential-provider-bin-dir: /opt/b\n"
        root = platform.build(place / "node")
        for path in [place, *place.rglob("*")]:
            path.chmod(0o755)
        (root / named.lstrip("/")).chmod(0o600)
        done = bundle_as_nobody("agent", "plan", "--root", str(root), "--providers", "aws")
        assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith(f"credprovider agent plan: cannot read {root}{named} as uid 65534")
        assert "K10secret" not in done.stderr
    finally:
        shutil.rmtree(place)


def test_doctor_on_k3s_without_its_bin_dir_says_the_kubelet_runs_without_plugins(
    tmp_path: Path,
) -> None:
    """k3s passes the kubelet both flags or neither (only when both paths exist as it starts):
    a missing bin dir leaves its kubelet running without plugins, not unable to start."""
    import shutil

    platform = k3s()
    root = platform.build(tmp_path / "node")
    shutil.rmtree(root / platform.bin_dir.lstrip("/"))
    _, report = doctor("--root", str(root), "--offline")
    [binary] = [c for c in report["checks"] if c["area"] == "binary"]
    assert binary["status"] == "fail"
    assert "the platform passes the kubelet neither credential provider flag" in binary["message"]
    assert "would NOT start" not in json.dumps(report)


def test_a_kops_node_without_a_credential_provider_is_still_kops(tmp_path: Path) -> None:
    """nodeup writes /etc/sysconfig/kops-configuration on every node it sets up, and the
    credential provider config only where the cluster has one: a node without it is kOps all the
    same (refused: nodeup writes the kubelet's flags again at every boot)."""
    platform = kops()
    root = platform.build(tmp_path / "node")
    (root / platform.config.lstrip("/")).unlink()
    plan = plan_node(NodeRoot.at(root), ["aws"], "0.1.0")
    assert (plan.platform, plan.evidence) == ("kOps", "/etc/sysconfig/kops-configuration")
    assert plan.refused.startswith("kOps' nodeup rewrites") and plan.steps == []


def test_doctor_says_when_the_platform_wrote_again_what_the_agent_wrote(tmp_path: Path) -> None:
    """GKE writes its config again at every boot (cloud-init runs its configure scripts): the
    agent's providers are gone until its pod merges them again. doctor --root says so, from the
    digests the agent kept, and passes while the files are as the agent wrote them."""
    platform, root = _gke_with_the_agent(tmp_path)
    _, report = doctor("--root", str(root), "--offline")
    said = [c for c in report["checks"] if "credprovider agent wrote" in c["message"]]
    assert [c["status"] for c in said] == ["pass"], said
    # the next boot: GKE's configure script writes its own config again
    (root / platform.config.lstrip("/")).write_text(platform.files[platform.config])
    _, report = doctor("--root", str(root), "--offline")
    said = [c for c in report["checks"] if "credprovider agent wrote" in c["message"]]
    assert [c["status"] for c in said] == ["warn"], said
    assert said[0]["message"].startswith(f"{platform.config} no longer holds what")
    assert "docs/platforms.md" in said[0]["fix"]


def test_a_unit_hidden_from_this_user_gives_no_verdict(tmp_path: Path) -> None:
    """Through the bundle as nobody, on a kOps node whose unit directory only root may read: the
    kubelet's flags are there, hidden, so doctor names what it could not read and gives no
    verdict (exit 2), never a layout's guess for what only root can see."""
    import os
    import shutil
    import tempfile

    from tests.helpers import require_bundle

    if os.geteuid() != 0:
        pytest.skip("switching to nobody needs root")
    require_bundle()
    place = Path(tempfile.mkdtemp(prefix="platform-", dir="/tmp"))  # pytest's tmp is root's only
    try:
        root = NODES[NODES.index(kops)]().build(place / "node")
        for path in [place, *place.rglob("*")]:
            path.chmod(0o755)
        (root / "lib/systemd/system").chmod(0o700)
        done = bundle_as_nobody("doctor", "--root", str(root), "--json")
        assert done.returncode == 2, done.stdout + done.stderr
        report = json.loads(done.stdout)
        said = " ".join(c["message"] for c in report["checks"])
        assert f"cannot read {root}/lib/systemd/system" in said and "as uid 65534" in said, said
        assert report["config"] is None, report
    finally:
        shutil.rmtree(place)


def test_doctor_as_an_operator_on_an_agent_node_says_what_it_cannot_check(tmp_path: Path) -> None:
    """Through the bundle as nobody, on a GKE node the agent changed: the copies it kept are
    root's alone (0600), so whether its files are as it wrote them cannot be checked as this user.
    doctor says so (info: run it as root), never that the state is forged or to remove it; ``agent
    uninstall`` says, under its own name, to run it as root, and changes nothing."""
    import os
    import shutil
    import tempfile

    from tests.helpers import require_bundle
    from tests.unit.tool.test_agent_apply import tree

    if os.geteuid() != 0:
        pytest.skip("switching to nobody needs root")
    require_bundle()
    place = Path(tempfile.mkdtemp(prefix="platform-", dir="/tmp"))  # pytest's tmp is root's only
    try:
        place.chmod(0o755)
        _, root = _gke_with_the_agent(place)
        kept = list((root / "var/lib/credprovider/agent/originals").iterdir())
        assert kept and all(path.stat().st_mode & 0o777 == 0o600 for path in kept), kept
        done = bundle_as_nobody("doctor", "--root", str(root), "--offline", "--json")
        report = json.loads(done.stdout)
        said = [c for c in report["checks"] if "agent" in c["message"]]
        assert [c["status"] for c in said] == ["info"], said
        assert said[0]["message"].startswith("what the agent wrote cannot be checked as this user")
        assert "as uid 65534" in said[0]["message"] and "as root" in said[0]["message"], said
        assert "not the agent's state" not in done.stdout and "remove it" not in done.stdout
        assert done.returncode == 0, done.stdout + done.stderr  # the chain itself was checked
        before = tree(str(root))
        done = bundle_as_nobody("agent", "uninstall", "--root", str(root))
        # what root's copies hold cannot be read here: no verdict, as for every command
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr == (
            f"credprovider agent uninstall: cannot read {kept[0]} as uid 65534 (permission "
            "denied): run this command as root, as the kubelet runs\n"
        )
        assert tree(str(root)) == before
    finally:
        shutil.rmtree(place)


def _doc_rows() -> dict[str, str]:
    """docs/platforms.md's per-platform table: the first cell of each row, and the row."""
    text = (REPO / "docs" / "platforms.md").read_text()
    table = text.split("## Per platform", 1)[1].split("\n\n", 2)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    return {row.split(" | ")[0].lstrip("| ").strip(): row for row in rows[1:]}


@pytest.mark.parametrize("make", NODES, ids=lambda make: make.__name__)
def test_the_docs_table_has_each_platform_as_its_fixture_is(
    make: Callable[[], PlatformNode],
) -> None:
    """Each fixture node has its row in docs/platforms.md, naming the config the platform's
    kubelet is started with (where a row gives a pattern, the fixture's instance of it)."""
    platform = make()
    rows = _doc_rows()
    key = next(
        (
            name
            for name in rows
            if any(platform.name.startswith(part) for part in name.split(" (")[0].split(" / "))
        ),
        None,
    )
    assert key is not None, (platform.name, sorted(rows))
    row = rows[key]
    patterned = {"OpenShift (RHCOS)": "{ecr,gcr,acr}-credential-provider.yaml"}
    assert platform.config in row or patterned.get(key, "\0") in row, (platform.name, row)
    assert platform.bin_dir.rstrip("/") in row or "the agent's own" in row, (platform.name, row)


def test_doctor_says_when_a_killed_change_left_its_journal(tmp_path: Path) -> None:
    """A change killed part way leaves its journal, and the node may hold half of it until the
    next run finishes it: doctor --root says so, for a change by hand (beside the kubelet's
    config) and for the agent's (beside its state), each with the run that finishes it."""
    from credprovider.tool.agent.state import JOURNAL
    from credprovider.tool.change.engine import ChangeKind, Kind, Op
    from credprovider.tool.change.journal import begin
    from credprovider.tool.change.journalformat import journal_for

    platform, root = _gke_with_the_agent(tmp_path)

    def left() -> list[dict[str, str]]:
        _, report = doctor("--root", str(root), "--offline")
        return [c for c in report["checks"] if "killed part way" in c["message"]]

    assert left() == []
    config = root / platform.config.lstrip("/")
    # what the killed run was writing: the agent's own config again, as its journal records it
    again = Op(Kind.FILE, Path(platform.config), config.read_bytes())
    begin(root / JOURNAL.lstrip("/"), [again], ChangeKind.AGENT)
    said = left()
    assert [(c["status"], c["area"]) for c in said] == [("warn", "config")], said
    assert JOURNAL in said[0]["message"] and "delete the agent's pod" in said[0]["fix"]
    (root / JOURNAL.lstrip("/")).unlink()
    by_hand = journal_for(config)
    begin(by_hand, [Op(Kind.FILE, config, config.read_bytes())], ChangeKind.INSTALL)
    said = left()
    assert [(c["status"], c["area"]) for c in said] == [("warn", "node")], said
    assert str(journal_for(platform.config)) in said[0]["message"]
    assert "run the same command again" in said[0]["fix"]


def test_flags_in_a_file_the_kubelets_unit_does_not_read_are_no_pass(tmp_path: Path) -> None:
    """The operator's edit in the wrong file: on kubeadm from binaries (its drop-in reads
    /etc/sysconfig/kubelet), the flags put in /etc/default/kubelet, as a Debian guide says. The
    kubelet as systemd starts it is not given them: doctor fails, names the file and the one its
    unit reads, and fixes with migrate (before: "ok layout kubeadm (kubelet flags in its flag
    files)" and healthy). The same flags in /etc/sysconfig/kubelet pass."""
    root = kubeadm_binaries().build(tmp_path / "node")
    flags = (
        f'KUBELET_EXTRA_ARGS="--image-credential-provider-config={NODE_CONFIG} '
        f'--image-credential-provider-bin-dir={AGENT_BIN_DIR}"\n'
    )
    (root / "etc/default/kubelet").write_text(flags)
    code, report = doctor("--root", str(root), "--offline")
    node = [c for c in report["checks"] if c["area"] == "node"]
    failed = [c for c in node if c["status"] == "fail"]
    assert code == 1 and len(failed) == 1, node
    assert failed[0]["message"].startswith(
        "the kubelet's unit /usr/lib/systemd/system/kubelet.service (as systemd starts it) gives "
        "no --image-credential-provider-config"
    ), failed
    assert "--kubelet-flags-file /var/lib/kubelet/kubeadm-flags.env" in failed[0]["fix"]
    said = [c["message"] for c in node if c["message"].startswith("/etc/default/kubelet gives")]
    assert (
        said
        and "(the unit reads /var/lib/kubelet/kubeadm-flags.env, /etc/sysconfig/kubelet)"
        in (said[0])
    ), node
    (root / "etc/sysconfig").mkdir()
    (root / "etc/sysconfig/kubelet").write_text(flags)
    _, report = doctor("--root", str(root), "--offline")
    assert (report["config"], report["binDir"]) == (NODE_CONFIG, AGENT_BIN_DIR), report
    assert not any("gives --image" in c["message"] for c in report["checks"]), report

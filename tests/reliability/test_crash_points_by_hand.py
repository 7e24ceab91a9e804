"""The crash-point suite for the commands operators run by hand (issue #46): ``credprovider
install`` (a first install, and an upgrade to another target with ``--force``) and ``migrate
--write``, each killed (SIGKILL) at every call that changes the node in turn (the engine's kill
points, ``credprovider/tool/change/failpoint.py``). After each kill, the same command run again
exits 0 and leaves the node as an uninterrupted run does: the same files, links, modes and
contents, no temporary left (a backup a killed run made is kept, as the docs say: the old file's
text, whole).

Both journal their change (the node-change engine, change/engine.py) and finish a killed one
first; the backups they keep carry the time in their names, so "as an uninterrupted run" is
checked with those names set aside and their contents compared. The last test has a killed
install finished by the next, and by the fleet agent."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from credprovider.tool.change.failpoint import FAILPOINT_ENV, KILLED_STATUS
from tests.forkrun import run_cli_forked
from tests.helpers import run_cli
from tests.integration.cli.conftest import fake_bundle
from tests.unit.tool.test_agent_apply import tree

KILLED = (-9, KILLED_STATUS)
BACKUP = re.compile(r"\.credprovider-backup-[0-9TZ.-]+(?:/|$)")
# The time in a backup's name, as the record of the last change names it (undo reads it).
STAMP = re.compile(r"(?<=\.credprovider-backup-)[0-9]{14}(?:\.[0-9]+)?")


def comparable(root: Path) -> tuple[dict[str, Any], list[Any]]:
    """The tree without its backups, and the backups' contents (sorted); the node's own
    directory, which its files name, written ``{node}``."""
    found = {
        path: (kind, STAMP.sub("{time}", _decoded(path, text).replace(str(root), "{node}")), mode)
        for path, (kind, text, mode) in tree(str(root)).items()
    }
    backups = sorted(value for path, value in found.items() if BACKUP.search(path))
    rest = {path: value for path, value in found.items() if not BACKUP.search(path)}
    return rest, backups


def _decoded(path: str, text: str) -> str:
    """The record of the last change with each file's new bytes decoded (they name the node)."""
    if not path.endswith(".credprovider-undo"):
        return text
    record = json.loads(text)
    for op in record["ops"]:
        if "data" in op:
            op["data"] = base64.b64decode(op["data"]).decode()
    return json.dumps(record)


def run(node: Path, argv: list[str], point: int = 0) -> int:
    return armed_run(node, argv, str(point) if point else "")[0]


def armed_run(node: Path, argv: list[str], armed: str) -> tuple[int, str]:
    """``argv`` (``{node}`` in it the node) run with the failure point ``armed`` ("": none): its
    exit status and stderr, which holds no traceback."""
    env = {FAILPOINT_ENV: armed} if armed else {}
    done = run_cli_forked(*[a.replace("{node}", str(node)) for a in argv], env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr


def killed_everywhere(
    tmp: Path,
    prepare: Callable[[Path], None],
    argv: list[str],
    holds: Callable[[Path], bool] = lambda node: True,
) -> int:
    """Kill ``argv`` at each point in turn on a node ``prepare`` made: ``holds`` is true of the
    node an uninterrupted run leaves and of the node at each kill, and the rerun converges on
    what the uninterrupted run leaves (an undo killed once all was done, its last flush, finds
    nothing to undo: exit 1). How many points were covered."""
    reference = tmp / "reference"
    prepare(reference)
    assert run(reference, argv) == 0 and holds(reference)
    expected = comparable(reference)
    point = 1
    while True:
        node = tmp / f"p{point}"
        prepare(node)
        code = run(node, argv, point)
        if code not in KILLED:
            assert code == 0 and point > 3, f"the run ended ({code}) at point {point}"
            return point - 1
        assert holds(node), f"{argv[0]}: after a kill at point {point}"
        done = argv[0] == "undo" and comparable(node) == expected
        assert run(node, argv) == (1 if done else 0), f"rerun after a kill at point {point}"
        files, backups = comparable(node)
        assert files == expected[0], f"rerun after a kill at point {point}"
        assert [b for b in backups if b not in expected[1]] == [], f"point {point}"
        assert not [p for p in files if "credprovider-new" in p], f"point {point}"
        point += 1


def fresh(node: Path) -> None:
    (node / "etc/kubernetes").mkdir(parents=True)


def theirs(node: Path, plugin: str) -> None:
    """A fresh node holding someone else's ``plugin`` in the bin dir and someone else's config."""
    fresh(node)
    (node / "etc/kubernetes/bin").mkdir()
    (node / "etc/kubernetes/bin" / plugin).write_text("#!/bin/sh\ntheirs\n")
    (node / "etc/kubernetes/credential-providers.yaml").write_text("theirs: true\n")


INSTALL = [
    "install", "--providers", "aws,gcp", "--bin-dir", "{node}/etc/kubernetes/bin",
    "--config-out", "{node}/etc/kubernetes/credential-providers.yaml",
]  # fmt: skip


def _config_has_its_plugins(node: Path) -> bool:
    """Each provider the config names has its plugin in the bin dir, there and runnable as the
    link names it: a kubelet started now with the two flags naming them would start."""
    config = node / "etc/kubernetes/credential-providers.yaml"
    if not config.exists():
        return True
    names = re.findall(r"^- name: (\S+)$", config.read_text(), re.MULTILINE)
    return bool(names) and all(
        os.access(node / "etc/kubernetes/bin" / name, os.X_OK) for name in names
    )


def test_install_killed_at_every_point(tmp_path: Path) -> None:
    target = fake_bundle(tmp_path / "target", "0.2.0")
    covered = killed_everywhere(
        tmp_path, fresh, [*INSTALL, "--target", str(target)], _config_has_its_plugins
    )
    print(f"install: {covered} kill points")
    assert covered >= 5


Everywhere = Callable[[Path, Callable[[Path], None], list[str], Callable[[Path], bool]], int]


def copy_and_its_upgrade(tmp_path: Path, everywhere: Everywhere) -> tuple[int, int]:
    """``install --copy`` on a fresh node, then its upgrade to another bundle, each run through
    ``everywhere`` (killed, or failed, at each point in turn): the points each covered."""
    old = fake_bundle(tmp_path / "old", "0.1.0")
    new = fake_bundle(tmp_path / "new", "0.2.0")
    first = everywhere(
        tmp_path / "first", fresh, [*INSTALL, "--copy", "--target", str(old)],
        _config_has_its_plugins,
    )  # fmt: skip

    def installed(node: Path) -> None:
        fresh(node)
        assert run(node, [*INSTALL, "--copy", "--target", str(old)]) == 0

    upgrade = everywhere(
        tmp_path / "upgrade", installed, [*INSTALL, "--copy", "--target", str(new)],
        _config_has_its_plugins,
    )  # fmt: skip
    return first, upgrade


def test_an_install_with_copy_and_its_upgrade_killed_at_every_point(tmp_path: Path) -> None:
    """--copy puts the bundle in the bin dir (a tree op of the engine) before the links into it;
    an upgrade replaces the copy."""
    first, upgrade = copy_and_its_upgrade(tmp_path, killed_everywhere)
    print(f"install --copy: {first} kill points, its upgrade {upgrade}")
    assert first >= 5 and upgrade >= 3


def test_an_upgrade_with_force_killed_at_every_point(tmp_path: Path) -> None:
    old = fake_bundle(tmp_path / "old", "0.1.0")
    new = fake_bundle(tmp_path / "new", "0.2.0")

    def installed(node: Path) -> None:
        fresh(node)
        assert run(node, [*INSTALL, "--target", str(old)]) == 0

    covered = killed_everywhere(
        tmp_path, installed, [*INSTALL, "--target", str(new), "--force"], _config_has_its_plugins
    )
    print(f"install --force: {covered} kill points")
    assert covered >= 3


def _kubeadm_node(node: Path, target: Path) -> None:
    fresh(node)
    (node / "var/lib/kubelet").mkdir(parents=True)
    (node / "var/lib/kubelet/kubeadm-flags.env").write_text(
        'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 --cloud-provider=aws"\n'
    )
    (node / "etc/default").mkdir(parents=True)
    (node / "etc/default/kubelet").write_text("KUBELET_EXTRA_ARGS=--v=2\n")
    assert run(node, [*INSTALL, "--target", str(target)]) == 0  # the plugins first


MIGRATE = [
    "migrate", "--kubelet-flags-file", "{node}/var/lib/kubelet/kubeadm-flags.env",
    "--kubelet-flags-file", "{node}/etc/default/kubelet",
    "--bin-dir", "{node}/etc/kubernetes/bin",
    "--config-out", "{node}/etc/kubernetes/credential-providers.yaml", "--write",
]  # fmt: skip


def test_migrate_write_killed_at_every_point(tmp_path: Path) -> None:
    target = fake_bundle(tmp_path / "target", "0.2.0")
    covered = killed_everywhere(tmp_path, lambda node: _kubeadm_node(node, target), MIGRATE)
    print(f"migrate --write: {covered} kill points")
    assert covered >= 5


def _flags_name_what_is_there(node: Path) -> bool:
    """Every credential provider path the node's kubelet flags name is there: a kubelet started
    now (a power cut, then the boot's start, before any rerun) finds its config and bin dir."""
    flags = " ".join(
        (node / name).read_text()
        for name in ("var/lib/kubelet/kubeadm-flags.env", "etc/default/kubelet")
        if (node / name).exists()
    )
    named = re.findall(r"--image-credential-provider-(?:config|bin-dir)=([^\s\"]+)", flags)
    return all(os.path.exists(path) for path in named)


def test_migrate_write_to_a_new_config_never_leaves_flags_naming_a_missing_one(
    tmp_path: Path,
) -> None:
    """migrate --write to a config not there yet: the flags files were written before the
    config, so a kill (a power cut) between them left flags naming a config that did not exist,
    and the kubelet the boot starts would not start. The config is written first: at every kill
    point the flags name only what is there."""
    target = fake_bundle(tmp_path / "target", "0.2.0")
    argv = [arg.replace("credential-providers.yaml", "new-config.yaml") for arg in MIGRATE]
    covered = killed_everywhere(
        tmp_path, lambda node: _kubeadm_node(node, target), argv, _flags_name_what_is_there
    )
    assert covered >= 5


def test_the_undo_of_that_migrate_never_leaves_flags_naming_a_missing_config(
    tmp_path: Path,
) -> None:
    """Its undo, killed at every point: the flags are put back before the config they name is
    removed (the record's ops reversed), so no kill leaves flags naming a removed config."""
    assert undo_of_a_migrate(tmp_path, killed_everywhere, _flags_name_what_is_there) >= 3


def undo_of_a_migrate(tmp_path: Path, everywhere: Everywhere, holds: Callable[[Path], bool]) -> int:
    """The undo of a migrate --write to a config not there before, run through ``everywhere``
    (killed, or failed, at each point in turn): the points covered."""
    target = fake_bundle(tmp_path / "target", "0.2.0")
    migrate = [arg.replace("credential-providers.yaml", "new-config.yaml") for arg in MIGRATE]

    def migrated(node: Path) -> None:
        _kubeadm_node(node, target)
        assert run(node, migrate) == 0

    undo = ["undo", "--config", "{node}/etc/kubernetes/new-config.yaml", "--force"]
    return everywhere(tmp_path, migrated, undo, holds)


UNDO = ["undo", "--config", "{node}/etc/kubernetes/credential-providers.yaml", "--force"]


def _links_and_flags_hold(node: Path) -> bool:
    """Every plugin link in the bin dir names something there (a bundle copy swapped back at
    one instant), and the flags name only what is there."""
    bin_dir = node / "etc/kubernetes/bin"
    links = [p for p in bin_dir.iterdir() if p.is_symlink()] if bin_dir.is_dir() else []
    return all(p.exists() for p in links) and _flags_name_what_is_there(node)


def test_undo_killed_at_every_point(tmp_path: Path) -> None:
    """``credprovider undo`` (#63) of an upgrade of a --copy install that --force made over
    someone else's plugin and config, and of a migrate --write: killed at every point, the undo
    run again exits 0 and leaves the node as an uninterrupted undo does, byte for byte (the
    backups it put back removed, the record gone)."""
    old = fake_bundle(tmp_path / "old", "0.1.0")
    new = fake_bundle(tmp_path / "new", "0.2.0")

    def upgraded(node: Path) -> None:
        theirs(node, "auth-provider-gcp")
        assert run(node, [*INSTALL, "--copy", "--force", "--target", str(old)]) == 0
        assert run(node, [*INSTALL, "--copy", "--target", str(new)]) == 0

    def migrated(node: Path) -> None:
        _kubeadm_node(node, old)
        assert run(node, MIGRATE) == 0

    covered = {
        name: killed_everywhere(tmp_path / name, prepare, UNDO, _links_and_flags_hold)
        for name, prepare in (("upgrade", upgraded), ("migrate", migrated))
    }
    for name in covered:  # the record is gone with the change it recorded
        left = comparable(tmp_path / name / "reference")[0]
        assert not [path for path in left if path.endswith("credprovider-undo")]
    print(f"undo: {covered} kill points")
    assert min(covered.values()) >= 5


def as_the_host(root: Path, argv: list[str], point: int = 0) -> subprocess.CompletedProcess[str]:
    """``credprovider ARGV`` run as on the node itself: in a mount namespace of its own where the
    node's ``/etc`` is ``root``'s, so that its journal names the node's paths, as a host's
    install writes them for the agent (which reaches them under ``--root``)."""
    from tests.helpers import REPO, private

    done = subprocess.run(
        private(["sh", "-c", 'mount --bind "$0" /etc && exec "$@"', str(root / "etc"),
                 sys.executable, "-m", "credprovider", "credprovider", *argv]),
        capture_output=True, text=True, timeout=180, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), **({FAILPOINT_ENV: str(point)} if point else {})},
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    return done


def killed_after_its_journal(root: Path, install: list[str], journal: Path) -> int:
    """``install`` killed at the first point after its journal is in place: the point."""
    point = 1
    while not journal.exists():
        assert as_the_host(root, install, point).returncode in KILLED, f"ended at {point}"
        point += 1
    return point


def test_a_killed_install_is_finished_by_the_next_install_or_by_the_agent(tmp_path: Path) -> None:
    """One journal for the changes made by hand, and one engine: an install killed after its
    journal is written leaves it beside the kubelet's config. The next install finishes it first
    (said on stderr); so does the fleet agent's apply, reaching the host's paths under its
    ``--root`` (said in its notes), before its own change."""
    from emulators.http import FakeResponse, serve
    from tests.integration.cli.test_agent import restart_command
    from tests.unit.tool.test_agent_apply import kubeadm

    if os.geteuid() != 0:
        pytest.skip("the node's /etc mounted over this one's needs root")
    target = fake_bundle(tmp_path / "target", "0.2.0")
    nodes = []
    for name in ("by-hand", "agent"):
        root = Path(kubeadm(tmp_path / name))
        planned = run_cli("agent", "plan", "--root", str(root), "--providers", "aws", "--json")
        config = json.loads(planned.stdout)["config_path"]
        install = [
            "install", "--providers", "aws", "--bin-dir", "/etc/kubernetes/bin",
            "--config-out", config, "--target", str(target),
        ]  # fmt: skip
        journal = root / config.lstrip("/")
        journal = journal.with_name(f".{journal.name}.credprovider-journal")
        killed_after_its_journal(root, install, journal)
        nodes.append((root, install, journal))

    root, install, journal = nodes[0]
    again = as_the_host(root, install)
    assert again.returncode == 0, again.stderr
    assert (
        "credprovider install: finished the change an earlier run left part done: " in again.stderr
    )
    assert not journal.exists()
    assert os.readlink(root / "etc/kubernetes/bin/ecr-credential-provider") == str(target)

    root, install, journal = nodes[1]
    planned = run_cli("agent", "plan", "--root", str(root), "--providers", "aws", "--json")
    plan = json.loads(planned.stdout)
    assert plan["refused"] == "" and "agent apply finishes it first" in " ".join(plan["notes"])
    assert journal.exists()  # plan changes nothing
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent

    with serve(lambda request: FakeResponse.text("ok")) as kubelet:
        applied = run_cli(
            "agent", "apply", "--root", str(root), "--bundle", str(bundle), "--providers", "aws",
            "--restart-command", restart_command(tmp_path), "--healthz", f"{kubelet.url}/healthz",
        )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    assert (
        "  note: finished the change a killed credprovider install or migrate --write began: "
        in applied.stdout
    ), applied.stdout
    assert not journal.exists()
    # the install's link, finished by the agent, next to the agent's own
    assert os.readlink(root / "etc/kubernetes/bin/ecr-credential-provider") == str(target)


K3S = "var/lib/rancher/credentialprovider"


@pytest.mark.parametrize("copy", [False, True], ids=["link", "copy"])
def test_install_and_undo_on_k3s_never_leave_its_bin_dir_without_the_plugins(
    tmp_path: Path, copy: bool
) -> None:
    """k3s passes the kubelet its bin dir whenever the directory exists beside the config (both
    or neither), and the kubelet does not start while a plugin the config names is missing from
    it. On a node whose config names ecr-credential-provider and which has no bin dir yet,
    ``install --force`` (with ``--copy`` too: the bundle copied into the bin dir before the links
    into it) and then its ``undo``, each killed at every point: at each kill the bin
    dir is not there, or holds a plugin for every provider the config names; the same command
    again ends as an uninterrupted run does."""
    import yaml

    from tests.unit.tool.test_agent_plan import UPSTREAM_ECR

    target = fake_bundle(tmp_path / "target", "0.2.0")
    install = ["install", "--providers", "aws", "--bin-dir", f"{{node}}/{K3S}/bin",
               "--config-out", f"{{node}}/{K3S}/config.yaml", "--force", "--target", str(target)]  # fmt: skip
    install += ["--copy"] if copy else []
    undo = ["undo", "--config", f"{{node}}/{K3S}/config.yaml"]

    def k3s(node: Path) -> None:
        (node / K3S).mkdir(parents=True)
        (node / K3S / "config.yaml").write_text(UPSTREAM_ECR)

    def installed(node: Path) -> None:
        k3s(node)
        assert run(node, install) == 0

    def starts(node: Path) -> bool:
        bin_dir = node / K3S / "bin"
        found = yaml.safe_load((node / K3S / "config.yaml").read_text())
        names = [provider["name"] for provider in found["providers"]]
        return not bin_dir.exists() or all((bin_dir / name).exists() for name in names)

    covered = {
        name: killed_everywhere(tmp_path / name, prepare, argv, starts)
        for name, prepare, argv in (("install", k3s, install), ("undo", installed, undo))
    }
    print(f"k3s: {covered} kill points")
    assert min(covered.values()) >= 5


def test_the_undo_of_an_agents_change_killed_at_every_point(tmp_path: Path) -> None:
    """``credprovider undo`` of the chart's agent's change in mode flags (its config, plugins and
    the kubelet's flags, on a kubeadm node of the test's: test_undo.agent_node), killed at every
    point in turn: at no kill do the kubelet's flags name a config or a plugin that is not there,
    and the undo run again leaves /etc and /var/lib as they were before the agent, byte for byte
    (a kill after all was put back: nothing left to undo, exit 1, or in mode flags no config
    left to name, exit 2)."""
    from tests.integration.cli.test_undo import agent_node

    done = agent_node(tmp_path, None, """
        [ -n "$N" ] || exit 9
        listing > "$N/before"
        agent_apply --providers aws > /dev/null || echo apply-failed
        cp -a "$N/etc" "$N/etc.applied" && cp -a "$N/var-lib" "$N/var-lib.applied"
        point=1
        while [ "$point" -lt 100 ]; do
            rm -rf "$N/etc/"* "$N/var-lib/"* "$N/var-lib/".[!.]*
            # the bundle's copy hard-linked, not copied again (48 MiB a point): the undo only
            # renames over and unlinks, never writes a file in place
            cp -a "$N/etc.applied/." "$N/etc/" && cp -al "$N/var-lib.applied/." "$N/var-lib/"
            CREDPROVIDER_FAILPOINT=$point credprovider undo > /dev/null 2>&1; code=$?
            [ "$code" -eq 0 ] && break
            config=/etc/kubernetes/image-credential-provider-config.yaml
            if grep -q image-credential-provider-config /etc/default/kubelet; then
                [ -f "$config" ] && [ -x /var/lib/credprovider/agent/bin/ecr-credential-provider ] \
                    || echo "point $point: the flags name what is gone"
            fi
            credprovider undo > /dev/null 2>&1; again=$?
            listing | cmp -s "$N/before" - || echo "point $point: not as before ($code, $again)"
            # after all was put back: nothing to undo (1), or no config left to find (2)
            [ "$code" -eq 137 ] && [ "$again" -le 2 ] || echo "point $point: $code then $again"
            point=$((point + 1))
        done
        echo "covered $((point - 1))"
    """)  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[:-1] == [] and lines[-1].startswith("covered "), done.stdout + done.stderr
    covered = int(lines[-1].split()[1])
    print(f"undo of the agent's change: {covered} kill points")
    assert covered >= 10

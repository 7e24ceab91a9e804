"""``credprovider undo`` (issue #63): the last change install or migrate --write made, reversed from
its record byte for byte, as an operator runs it: install, an upgrade (with --copy and with
--force over someone else's files), migrate --write; refused where a path changed since or the
kubelet would not start as the undo leaves it (--force: undone all the same); a forged record
acts on nothing. Killed at every point: tests/reliability/test_crash_points_by_hand.py."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli
from tests.integration.cli.conftest import fake_bundle
from tests.unit.tool.test_agent_apply import tree

CONFIG = "etc/kubernetes/credential-providers.yaml"
RECORD = "etc/kubernetes/.credential-providers.yaml.credprovider-undo"


def install(node: Path, target: Path, *more: str) -> None:
    done = run_cli("install", "--providers", "aws,gcp", "--bin-dir", f"{node}/etc/kubernetes/bin",
                   "--config-out", f"{node}/{CONFIG}", "--target", str(target), *more)  # fmt: skip
    assert done.returncode == 0, done.stderr


def undo(node: Path, *more: str) -> Any:
    return run_cli("undo", "--config", f"{node}/{CONFIG}", *more)


def without_record(node: Path) -> dict[str, Any]:
    return {path: value for path, value in tree(str(node)).items() if path != f"/{RECORD}"}


@pytest.fixture
def node(tmp_path: Path) -> Path:
    (tmp_path / "node/etc/kubernetes").mkdir(parents=True)
    return tmp_path / "node"


def test_an_install_is_undone_byte_for_byte_and_only_once(node: Path, tmp_path: Path) -> None:
    before = tree(str(node))
    install(node, fake_bundle(tmp_path / "b1", "0.1.0"), "--bin-dir", f"{node}/opt/cp/bin")
    assert (node / RECORD).stat().st_mode & 0o777 == 0o600
    dry = undo(node, "--dry-run")
    assert dry.returncode == 0 and "  remove the link" in dry.stdout  # as planned, not done
    assert "removed" not in dry.stdout
    assert (node / CONFIG).exists()  # a dry run changes nothing
    done = undo(node)
    assert done.returncode == 0, done.stderr
    assert f"removed the directory {node}/opt" in done.stdout
    assert tree(str(node)) == before  # links, config, the bin dir it made, the record: gone
    again = undo(node)
    assert again.returncode == 1 and "nothing to undo" in again.stderr
    assert len(again.stderr.splitlines()) == 1


def test_the_config_directory_install_made_goes_once_the_record_does(
    node: Path, tmp_path: Path
) -> None:
    """The config's directory (and the one above it) install made holds its record until the
    undo's commit: removed after it; one someone else came to use since stays, with their file."""
    before = tree(str(node))
    config, bundle = node / "etc/cp/deep/c.yaml", fake_bundle(tmp_path / "b1", "0.1.0")
    for other in (False, True):
        done = run_cli("install", "--providers", "aws", "--bin-dir", f"{node}/etc/kubernetes/bin",
                       "--config-out", str(config), "--target", str(bundle))  # fmt: skip
        assert done.returncode == 0, done.stderr
        if other:
            (config.parent / "theirs.yaml").write_text("theirs\n")
        done = run_cli("undo", "--config", str(config))
        assert done.returncode == 0, done.stderr
        if not other:
            assert f"removed the directory {node}/etc/cp\n" in done.stdout
            assert tree(str(node)) == before
    assert sorted(p.name for p in (node / "etc/cp/deep").iterdir()) == ["theirs.yaml"]


def test_an_upgrade_of_a_copy_is_undone_to_the_copy_before(node: Path, tmp_path: Path) -> None:
    """--copy then an upgrade: the earlier bundle copy comes back byte for byte, and the copy kept
    for the undo goes with it; a later change's record drops an earlier one's kept copy."""
    old, new = fake_bundle(tmp_path / "b1", "0.1.0"), fake_bundle(tmp_path / "b2", "0.2.0")
    install(node, old, "--copy")
    installed = without_record(node)
    install(node, new, "--copy")
    kept = [p for p in (node / "etc/kubernetes/bin").iterdir() if "backup" in p.name]
    assert len(kept) == 1 and "0.1.0" in (kept[0] / "credprovider").read_text()
    done = undo(node, "--json")
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["change"] == "install" and said["done"] and said["refused"] is None
    assert without_record(node) == installed and not (node / RECORD).exists()
    # an upgrade, and another: only the last change's kept copy stays
    install(node, new, "--copy")
    install(node, old, "--copy")
    kept = [p for p in (node / "etc/kubernetes/bin").iterdir() if "backup" in p.name]
    assert len(kept) == 1 and "0.2.0" in (kept[0] / "credprovider").read_text()


def test_files_force_replaced_come_back(node: Path, tmp_path: Path) -> None:
    """install --force over someone else's plugin binary and config: undo puts both back, each
    with its bytes and mode, where install left links and its config."""
    bin_dir = node / "etc/kubernetes/bin"
    bin_dir.mkdir()
    (bin_dir / "ecr-credential-provider").write_bytes(b"\x7fELF theirs")
    (bin_dir / "ecr-credential-provider").chmod(0o750)
    (node / CONFIG).write_text("theirs: true\n")
    before = tree(str(node))
    install(node, fake_bundle(tmp_path / "b1", "0.1.0"), "--force")
    assert (bin_dir / "ecr-credential-provider").is_symlink()
    done = undo(node)
    assert done.returncode == 0, done.stderr
    assert tree(str(node)) == before  # the backups it put back are gone too


def test_links_force_replaced_come_back(node: Path, tmp_path: Path) -> None:
    """install --force over links of someone else's (a plugin linked to another package's binary,
    a config linked into config management's tree): undo re-points each, and the backup install
    kept of each link goes too."""
    bin_dir, theirs = node / "etc/kubernetes/bin", node / "opt/theirs"
    bin_dir.mkdir()
    theirs.mkdir(parents=True)
    (theirs / "ecr-credential-provider").write_bytes(b"\x7fELF theirs")
    (theirs / "providers.yaml").write_text("theirs: true\n")
    (bin_dir / "ecr-credential-provider").symlink_to(theirs / "ecr-credential-provider")
    (node / CONFIG).symlink_to("../../opt/theirs/providers.yaml")
    before = tree(str(node))
    install(node, fake_bundle(tmp_path / "b1", "0.1.0"), "--force")
    assert (node / CONFIG).is_file() and not (node / CONFIG).is_symlink()
    assert [p for p in bin_dir.iterdir() if "backup" in p.name]
    done = undo(node)
    assert done.returncode == 0, done.stderr
    assert f"removed the backup {node}/{CONFIG}.credprovider-backup-" in done.stdout
    assert tree(str(node)) == before  # both links as they were, no backup left beside them


def _kubeadm(node: Path) -> dict[str, Path]:
    files = {
        "kubeadm": node / "var/lib/kubelet/kubeadm-flags.env",
        "extra": node / "etc/default/kubelet",
    }
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    files["kubeadm"].write_text('KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 --cloud-provider=aws"\n')
    files["extra"].write_text("KUBELET_EXTRA_ARGS=--v=2\n")
    files["extra"].chmod(0o640)
    return files


def test_a_migration_is_undone_only_with_force_where_the_kubelet_would_refuse_it(
    node: Path, tmp_path: Path
) -> None:
    """migrate --write moved the node off --cloud-provider=aws: putting that back would stop a
    kubelet 1.31 or newer, and this node's version is not known, so undo refuses (nothing
    changed); --force puts both flags files back byte for byte."""
    files = _kubeadm(node)
    install(node, fake_bundle(tmp_path / "b1", "0.1.0"))
    before = without_record(node)
    migrate = run_cli("migrate", "--kubelet-flags-file", str(files["kubeadm"]),
                      "--kubelet-flags-file", str(files["extra"]),
                      "--bin-dir", f"{node}/etc/kubernetes/bin",
                      "--config-out", f"{node}/{CONFIG}", "--write")  # fmt: skip
    assert migrate.returncode == 0, migrate.stderr
    migrated = tree(str(node))
    refused = undo(node, "--kubelet-flags-file", str(files["kubeadm"]))
    assert refused.returncode == 1
    assert "--cloud-provider=aws" in refused.stderr and "would not start" in refused.stderr
    assert "--force" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert tree(str(node)) == migrated
    done = undo(node, "--force")
    assert done.returncode == 0, done.stderr
    assert without_record(node) == before
    assert "restart the kubelet" in done.stdout


def test_paths_given_relative_are_the_kubelets_absolute_ones(node: Path, tmp_path: Path) -> None:
    """An operator in the node's /etc/kubernetes gives install and migrate relative paths: the
    flags written name absolute ones (the kubelet runs from /, where "bin" is not this bin dir,
    and would not start), the links name the bundle absolutely, and undo, run from elsewhere,
    reads each one's record (it held the relative paths, and was "damaged") and reverses it."""
    files = _kubeadm(node)
    here = node / "etc/kubernetes"
    before = tree(str(node))
    target = os.path.relpath(fake_bundle(tmp_path / "b1", "0.1.0"), here)
    install = ["install", "--providers", "aws", "--bin-dir", "bin",
               "--config-out", "credential-providers.yaml", "--target", target]  # fmt: skip
    done = run_cli(*install, cwd=here)
    assert done.returncode == 0, done.stderr
    assert os.readlink(here / "bin/ecr-credential-provider") == str(tmp_path / "b1/credprovider")
    undone = run_cli("undo", "--config", "etc/kubernetes/credential-providers.yaml", cwd=node)
    assert undone.returncode == 0, undone.stderr
    assert tree(str(node)) == before
    assert run_cli(*install, cwd=here).returncode == 0
    installed = without_record(node)
    migrate = run_cli("migrate", "--kubelet-flags-file", "../../var/lib/kubelet/kubeadm-flags.env",
                      "--bin-dir", "bin", "--config-out", "credential-providers.yaml", "--write",
                      cwd=here)  # fmt: skip
    assert migrate.returncode == 0, migrate.stderr
    flags = files["kubeadm"].read_text()
    assert f"--image-credential-provider-config={here}/credential-providers.yaml " in flags
    assert f"--image-credential-provider-bin-dir={here}/bin" in flags
    undone = run_cli("undo", "--config", f"{here}/credential-providers.yaml", "--force",
                     cwd=tmp_path)  # fmt: skip
    assert undone.returncode == 0, undone.stderr
    assert without_record(node) == installed


def test_a_path_changed_since_is_refused_and_force_puts_it_back(node: Path, tmp_path: Path) -> None:
    before = tree(str(node))
    install(node, fake_bundle(tmp_path / "b1", "0.1.0"))
    (node / CONFIG).write_text((node / CONFIG).read_text() + "# edited by hand\n")
    edited = tree(str(node))
    refused = undo(node)
    assert refused.returncode == 1 and "was changed since the install" in refused.stderr
    assert tree(str(node)) == edited
    assert undo(node, "--force").returncode == 0
    assert tree(str(node)) == before


def flags_naming_the_config(node: Path) -> Path:
    """A flags file giving the kubelet the config and bin dir install writes."""
    flags = node / "etc/default/kubelet"
    flags.parent.mkdir(parents=True)
    flags.write_text(
        f'KUBELET_EXTRA_ARGS="--image-credential-provider-config={node}/{CONFIG} '
        f'--image-credential-provider-bin-dir={node}/etc/kubernetes/bin"\n'
    )
    return flags


def test_flags_naming_the_config_keep_it(node: Path, tmp_path: Path) -> None:
    """The kubelet's flags name the config an undo of the first install would remove: the
    kubelet would not start, so it is refused."""
    flags = flags_naming_the_config(node)
    install(node, fake_bundle(tmp_path / "b1", "0.1.0"))
    refused = undo(node, "--kubelet-flags-file", str(flags))
    assert refused.returncode == 1, refused.stdout
    assert f"{node}/{CONFIG}, which the undo removes" in refused.stderr
    assert (node / CONFIG).exists()


def test_an_upgrade_whose_earlier_bundle_is_gone_is_refused(node: Path, tmp_path: Path) -> None:
    """An upgrade re-pointed the links; the bundle they pointed at before is gone: putting them
    back would leave the kubelet's plugins dangling."""
    flags = flags_naming_the_config(node)
    old = fake_bundle(tmp_path / "b1", "0.1.0")
    install(node, old)
    install(node, fake_bundle(tmp_path / "b2", "0.2.0"))
    for path in sorted(old.parent.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
    refused = undo(node, "--kubelet-flags-file", str(flags))
    assert refused.returncode == 1
    assert "would not hold the plugin ecr-credential-provider" in refused.stderr


def _record(node: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((node / RECORD).read_text())
    return found


def _forge(node: Path, record: dict[str, Any]) -> None:
    (node / RECORD).write_text(json.dumps(record))
    (node / RECORD).chmod(0o600)


@pytest.mark.parametrize(
    "forgery",
    ["a directory removed", "a backup away from its file", "a set-uid backup", "not a backup"],
)
def test_a_forged_record_acts_on_nothing(node: Path, tmp_path: Path, forgery: str) -> None:
    """#62 for the record: the undo refuses, even with --force, and nothing is changed."""
    install(node, fake_bundle(tmp_path / "b1", "0.1.0"))
    record = _record(node)
    victim = node / "etc/ssl"
    victim.mkdir(parents=True)
    (victim / "cert.pem").write_text("theirs\n")
    config = record["ops"][-1]
    if forgery == "a directory removed":
        record["ops"].append({"kind": "file", "path": str(victim), "data": "", "mode": None,
                              "backup": None, "was": {"prior": "absent"}})  # fmt: skip
    elif forgery == "a backup away from its file":
        config["backup"], config["was"] = str(victim / "cert.pem"), {"prior": "kept"}
    else:
        kept = node / f"{CONFIG}.credprovider-backup-20260101000000"
        kept.write_text("x\n")
        kept.chmod(0o4755 if forgery == "a set-uid backup" else 0o644)
        name = kept if forgery == "a set-uid backup" else node / f"{CONFIG}.orig"
        (node / f"{CONFIG}.orig").write_text("x\n")
        config["backup"], config["was"] = str(name), {"prior": "kept"}
    _forge(node, record)
    before = tree(str(node))
    refused = undo(node, "--force")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert len(refused.stderr.splitlines()) == 1 and "nothing was changed" in refused.stderr
    assert tree(str(node)) == before


def test_a_record_someone_else_could_write_is_refused(node: Path, tmp_path: Path) -> None:
    install(node, fake_bundle(tmp_path / "b1", "0.1.0"))
    (node / RECORD).chmod(0o666)
    refused = undo(node)
    assert refused.returncode == 1 and "is not a record credprovider wrote" in refused.stderr


def test_a_path_the_agent_manages_is_left_to_it() -> None:
    """On the node itself (its /var/lib a tmpfs of its own), an install by hand, then the chart's
    agent taking over its config (its state records it): undo would put back a path the agent's
    next start changes again, so it refuses, even with --force, saying what to do instead,
    nothing changed. Where the agent manages none of the change's paths, the undo goes ahead."""
    import subprocess

    from release.bundle import BUNDLE_DIR
    from tests.helpers import private, require_bundle

    require_bundle()
    home = "/var/lib/credprovider/agent"
    install = "credprovider install --providers aws --bin-dir /var/lib/x/bin --config-out /var/lib/x/c.yaml"
    script = (
        f"mount -t tmpfs none /var/lib && mkdir -p /var/lib/x/bin {home} && {install} >/dev/null"
        f' && echo "$1" > {home}/state.json && credprovider undo --config /var/lib/x/c.yaml --force'
        ' ; echo "rc=$?" && ls /var/lib/x'
    )

    def undo_with(state: dict[str, object]) -> subprocess.CompletedProcess[str]:
        tool = BUNDLE_DIR / "credprovider"
        return subprocess.run(
            private(["sh", "-c", f"credprovider() {{ {tool} \"$@\"; }}; {script}", "sh",
                     json.dumps(state)]),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    taken = undo_with(  # the config it took over, written since (another digest)
        {
            "originals": {"/var/lib/x/c.yaml": {"absent": True}},
            "written": {"/var/lib/x/c.yaml": "0" * 64},
        }
    )
    assert "rc=1" in taken.stdout, taken.stdout + taken.stderr
    assert taken.stderr.startswith(
        "credprovider undo: /var/lib/x/c.yaml is the chart's agent's (its state "
    ), taken.stderr
    assert "credprovider agent uninstall first; nothing was changed" in taken.stderr
    assert "c.yaml" in taken.stdout.split("rc=1", 1)[1]  # the config is still there
    apart = undo_with({"originals": {}, "written": {}})
    assert "rc=0" in apart.stdout, apart.stdout + apart.stderr
    assert "c.yaml" not in apart.stdout.split("rc=0", 1)[1]  # undone: the config is gone


def test_the_record_names_what_each_path_was(node: Path, tmp_path: Path) -> None:
    """The record is the journal committed: every op with what its path was before."""
    install(node, fake_bundle(tmp_path / "b1", "0.1.0"))
    record = _record(node)
    assert record["change"] == "install"
    assert {op["was"]["prior"] for op in record["ops"]} == {"absent"}
    data = base64.b64decode(record["ops"][-1]["data"])
    assert data == (node / CONFIG).read_bytes()


def test_through_the_bundle_as_an_unprivileged_operator(request: pytest.FixtureRequest) -> None:
    """The operator's path: the built bundle, run as nobody on a node directory of nobody's (an
    install into a user's own bin dir), install then undo, byte for byte."""
    import subprocess

    from release.bundle import BUNDLE_DIR
    from tests.helpers import private, require_bundle

    require_bundle()
    if os.geteuid() != 0:
        pytest.skip("switching to nobody needs root")
    import shutil
    import tempfile

    place = Path(tempfile.mkdtemp(prefix="undo-", dir="/tmp"))  # a place nobody reaches
    request.addfinalizer(lambda: shutil.rmtree(place, ignore_errors=True))
    (place / "etc/kubernetes").mkdir(parents=True)
    for path in [place, *place.rglob("*")]:
        os.chown(path, 65534, 65534)
    before = tree(str(place))
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    tool = [*as_nobody, str(BUNDLE_DIR / "credprovider")]
    config = f"{place}/{CONFIG}"

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(private([*tool, *argv]), capture_output=True, text=True,
                              timeout=120, check=False)  # fmt: skip

    installed = run("install", "--providers", "aws", "--bin-dir", f"{place}/bin",
                    "--config-out", config, "--target", str(BUNDLE_DIR / "credprovider"))  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    assert (place / RECORD).stat().st_uid == 65534
    done = run("undo", "--config", config)
    assert done.returncode == 0, done.stderr
    assert tree(str(place)) == before


def test_roots_change_undone_by_another_user_is_no_verdict(request: pytest.FixtureRequest) -> None:
    """A record of root's (0600), read by an operator without root: one line saying to run it as
    root, exit 2, nothing changed; not "damaged"."""
    import shutil
    import subprocess
    import tempfile

    from release.bundle import BUNDLE_DIR
    from tests.helpers import private, require_bundle

    require_bundle()
    if os.geteuid() != 0:
        pytest.skip("switching to nobody needs root")
    place = Path(tempfile.mkdtemp(prefix="undo-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(place, ignore_errors=True))
    place.chmod(0o755)
    (place / "etc/kubernetes").mkdir(parents=True)
    install(place, fake_bundle(place / "b1", "0.1.0"))
    before = tree(str(place))
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    done = subprocess.run(
        private([*as_nobody, str(BUNDLE_DIR / "credprovider"), "undo", "--config",
                 f"{place}/{CONFIG}"]),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"cannot read {place}/{RECORD} as uid 65534" in done.stderr
    assert "run this command as root" in done.stderr and len(done.stderr.splitlines()) == 1
    assert tree(str(place)) == before


@pytest.mark.parametrize("running", [False, True])
def test_flags_in_the_kubelets_unit_keep_its_config(tmp_path: Path, running: bool) -> None:
    """The kubelet's flags only in its systemd unit's ExecStart (no flags file): undo reads them
    as systemd starts the kubelet (its next start is what the undo must not break, whether or not
    a kubelet runs now), and refuses to remove the config they name (run as on the node itself,
    its /etc over this one's)."""
    from tests.helpers import fake_kubelet
    from tests.reliability.test_crash_points_by_hand import as_the_host

    if os.geteuid() != 0:
        pytest.skip("the node's /etc mounted over this one's needs root")
    # a kubelet runs, with other flags than its unit's (an edit not yet restarted)
    kubelet = fake_kubelet(["--v=2"], {}) if running else None
    root = tmp_path / "node"
    config, bin_dir = "/etc/kubernetes/by-hand.yaml", "/etc/kubernetes/by-hand-bin"
    unit = root / "etc/systemd/system/kubelet.service"
    unit.parent.mkdir(parents=True)
    unit.write_text(
        f"[Service]\nExecStart=/usr/bin/kubelet --image-credential-provider-config={config} "
        f"--image-credential-provider-bin-dir={bin_dir}\n"
    )
    target = fake_bundle(tmp_path / "b1", "0.1.0")
    installed = as_the_host(root, ["install", "--providers", "aws", "--copy", "--bin-dir",
                                   bin_dir, "--config-out", config, "--target", str(target)])  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    before = tree(str(root))
    try:
        refused = as_the_host(root, ["undo", "--config", config])
    finally:
        if kubelet is not None:
            kubelet.kill()
    assert refused.returncode == 1, refused.stdout
    assert f"--image-credential-provider-config={config}, which the undo removes" in refused.stderr
    assert tree(str(root)) == before


# A node of the agent's, on this machine itself (undo changes only the host's paths): in a mount,
# pid and network namespace of its own, the node's /etc and /var/lib (on disk: the agent refuses
# a tmpfs) bound over this one's from directories of the test's, /lib/systemd/system a tmpfs;
# `listing` says every path there, its mode, kind, size and a link's target, and each file's digest.
AGENT_NODE = """set -e
mount -t tmpfs none /run && ip link set lo up
mount --bind "$N/etc" /etc && mount --bind "$N/var-lib" /var/lib
mount -t tmpfs none /lib/systemd/system && printf '[Service]\\n' > /lib/systemd/system/kubelet.service
listing() { find /var/lib /etc -printf '%p %m %y %s %l\\n' | sort
            find /var/lib /etc -type f -exec sha256sum {} + | sort; }
credprovider() { "$TOOL" "$@"; }
set +e
"""


def agent_node(
    tmp_path: Path, config: str | None, script: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """``script`` run as root on a kubeadm node of the test's (:data:`AGENT_NODE`) whose config,
    if any, is ``config``'s text at /var/lib/x/c.yaml (its ECR plugin beside it); ``$N`` is the
    node's directory, ``$B`` the built bundle, ``agent_apply`` the agent's apply in mode flags (a
    restart by a script, the kubelet's health from a loopback server) and ``agent_files`` in
    mode files (the node's config and bin dir given)."""
    from release.bundle import BUNDLE_DIR
    from tests.helpers import private, require_bundle

    require_bundle()
    node = tmp_path / "node"
    for directory in ("etc/default", "etc/kubernetes", "etc/systemd/system/kubelet.service.d",
                      "var-lib/kubelet", "var-lib/x/bin", "www"):  # fmt: skip
        (node / directory).mkdir(parents=True)
    (node / "etc/default/kubelet").write_text("KUBELET_EXTRA_ARGS=--v=2\n")
    (node / "etc/systemd/system/kubelet.service.d/10-kubeadm.conf").write_text(
        "[Service]\nEnvironmentFile=-/etc/default/kubelet\n"
    )
    (node / "var-lib/kubelet/kubeadm-flags.env").write_text('KUBELET_KUBEADM_ARGS="--v=2"\n')
    if config is not None:
        (node / "var-lib/x/c.yaml").write_text(config)
        (node / "var-lib/x/bin/ecr-credential-provider").write_text("#!/bin/sh\n")
    (node / "www/healthz").write_text("ok\n")
    restart = node / "systemctl"
    restart.write_text(f'#!/bin/sh\necho "$1" >> {node}/restarts\n')
    restart.chmod(0o755)
    helpers = (
        f'(cd "$N/www" && exec {sys.executable} -m http.server 18248 --bind 127.0.0.1 '
        ">/dev/null 2>&1) & sleep 0.5\n"
        'agent_apply() { credprovider agent apply --root / --bundle "$B" --healthz '
        "http://127.0.0.1:18248/healthz --health-timeout 10 --restart-command "
        f'"{restart} {{unit}}" "$@"; }}\n'
        'agent_files() { credprovider agent apply --root / --bundle "$B" --files-only '
        '--config /var/lib/x/c.yaml --bin-dir /var/lib/x/bin "$@"; }\n'
    )
    return subprocess.run(
        private(["sh", "-c", AGENT_NODE + helpers + script]),
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "N": str(node), "B": str(BUNDLE_DIR.resolve()),
             "TOOL": str(BUNDLE_DIR / "credprovider"), **env},
    )  # fmt: skip


HOME = "/var/lib/credprovider/agent"
_GIVEN_FILES = f"--files-only --config {HOME}/config.yaml --bin-dir {HOME}/bin"
# Each mode of the agent: how the node is set up first, the agent's apply, undo's --config, and
# what its plan says of the config or flags (then of the agent's own files).
AGENT_MODES = {
    # its config, plugins and the kubelet's flags (kubeadm's /etc/default/kubelet)
    "flags": ("", "agent_apply --providers aws", "",
              ["put back /etc/default/kubelet from /var/lib/credprovider/agent/originals/",
               "remove /etc/kubernetes/image-credential-provider-config.yaml\n",
               "remove /var/lib/credprovider, made for the agent's home (its state, bundles and "
               "kept copies)\n"]),
    # its provider merged into the config provisioning set up
    "files": ("", "agent_files --providers gcp", " --config /var/lib/x/c.yaml",
              ["remove the link /var/lib/x/bin/auth-provider-gcp\n",
               "put back /var/lib/x/c.yaml from /var/lib/credprovider/agent/originals/",
               "remove /var/lib/credprovider, made for the agent's home (its state, bundles and "
               "kept copies)\n"]),
    # the chart's default: provisioning laid the bootstrap in the agent's home, which stays
    "bootstrap": (
        "echo 'KUBELET_EXTRA_ARGS=--image-credential-provider-config=/var/lib/credprovider/agent/"
        "config.yaml --image-credential-provider-bin-dir=/var/lib/credprovider/agent/bin' > "
        '/etc/default/kubelet && sh -c "$PROVISION"',
        f"credprovider agent apply --root / --bundle \"$B\" {_GIVEN_FILES} --providers aws", "",
        [f"remove the link {HOME}/bin/ecr-credential-provider\n",
         f"put back {HOME}/config.yaml from {HOME}/originals/",
         f"remove the agent's state, bundles and kept copies from {HOME}\n"]),
}  # fmt: skip


@pytest.mark.parametrize("mode", sorted(AGENT_MODES))
def test_after_an_agent_apply_undo_puts_the_node_back_byte_for_byte(
    tmp_path: Path, mode: str
) -> None:
    """The chart's agent changed the node (:data:`AGENT_MODES`): no change by hand is recorded,
    and undo is the agent's uninstall by hand, nothing restarted. As another user it gives no
    verdict; --dry-run says the plan and changes nothing; the undo puts /etc and /var/lib back
    byte for byte (the bootstrap provisioning laid included, which the kubelet's flags name); a
    second finds nothing to undo. It said "nothing to undo" and named agent uninstall."""
    from credprovider.tool.agent.bootstrap import provisioning_script
    from tests.unit.tool.test_agent_plan import UPSTREAM_ECR

    setup, apply, config, said = AGENT_MODES[mode]
    done = agent_node(tmp_path, UPSTREAM_ECR if mode == "files" else None, f"""
        {setup or ":"}
        listing > "$N/before"
        {apply} > /dev/null || echo apply-failed
        listing > "$N/applied"
        setpriv --reuid=65534 --regid=65534 --clear-groups "$TOOL" undo{config}
        echo "nobody=$?"
        credprovider undo{config} --dry-run; echo "dry=$?"
        listing | cmp -s "$N/applied" - && echo unchanged
        credprovider undo{config}; echo "undo=$?"
        listing | diff "$N/before" - && echo same
        credprovider undo{config}; echo "again=$?"
    """, PROVISION=provisioning_script())  # fmt: skip
    out = done.stdout
    # as another user: no verdict (exit 2), nothing changed; the agent's copies are root's alone
    assert "apply-failed" not in out and "nobody=2\n" in out, out + done.stderr
    assert "as uid 65534 (permission denied): run this command as root" in done.stderr
    assert "dry=0\nunchanged\n" in out, out + done.stderr
    # after it, nothing: no record, no agent's state (and in mode flags no config to name)
    assert f"undo=0\nsame\nagain={2 if mode == 'flags' else 1}\n" in out, out + done.stderr
    plan = out.split("nobody=2\n")[1].split("dry=0")[0]
    undone = out.split("unchanged\n")[1].split("undo=0")[0]
    whose = "the chart's agent's change (its state /var/lib/credprovider/agent/state.json):"
    assert plan.startswith(f"would undo {whose}\n"), plan
    assert undone.startswith(f"undid {whose}\n"), undone
    for line in said:
        assert f"  {line}" in plan, plan
        assert f"  {planned_as_done(line)}" in undone, undone
    assert "take the node out of the agent's nodeSelector" in undone
    restarts = tmp_path / "node/restarts"  # the apply's, in mode flags; never the undo's
    assert (restarts.read_text().split() if restarts.exists() else []) == (
        ["kubelet"] if mode == "flags" else []
    )
    [line] = done.stderr.splitlines()[-1:]
    assert line.startswith(
        "credprovider undo: give --config (no running kubelet"
        if mode == "flags"
        else "credprovider undo: nothing to undo (an undone change is not kept): no change by "
        "install, migrate --write or the chart's agent is recorded beside "
    ), line


def planned_as_done(line: str) -> str:
    """A plan's line as the undo says it once done (``remove X``: ``removed X``)."""
    verb, _, rest = line.partition(" ")
    return f"{dict(remove='removed').get(verb, verb)} {rest}"


def test_an_agents_change_the_kubelet_would_not_start_without_is_undone_only_with_force(
    tmp_path: Path,
) -> None:
    """Mode files on a node that had no config: the agent wrote the one provisioning's flags name.
    Undoing it byte for byte removes it, so the kubelet would not start: refused, nothing changed
    (agent uninstall --files-only leaves a bootstrap there instead); --force undoes it."""
    flags = (
        "KUBELET_EXTRA_ARGS=--image-credential-provider-config=/var/lib/x/c.yaml "
        "--image-credential-provider-bin-dir=/var/lib/x/bin"
    )
    done = agent_node(tmp_path, None, f"""
        echo '{flags}' > /etc/default/kubelet
        listing > "$N/before"
        agent_files --providers gcp > /dev/null || echo apply-failed
        listing > "$N/applied"
        credprovider undo --config /var/lib/x/c.yaml; echo "undo=$?"
        listing | cmp -s "$N/applied" - && echo unchanged
        credprovider undo --config /var/lib/x/c.yaml --force --json; echo "force=$?"
        listing | diff "$N/before" - && echo same
    """)  # fmt: skip
    assert "undo=1\nunchanged\n" in done.stdout and "force=0\nsame" in done.stdout, (
        done.stdout + done.stderr
    )
    assert done.stderr.splitlines() == [
        "credprovider undo: the kubelet's flags give --image-credential-provider-config="
        "/var/lib/x/c.yaml, which the undo removes: it would not start: pass --force to undo it "
        "all the same, or run credprovider agent uninstall --files-only, which leaves a bootstrap "
        "config at /var/lib/x/c.yaml for the kubelet to start with; nothing was changed"
    ]
    report = json.loads(done.stdout.split("unchanged\n")[1].split("force=0")[0])
    assert (report["change"], report["done"], report["refused"]) == ("agent", True, None)
    assert "removed /var/lib/x/c.yaml" in report["steps"] and report["kept"] == []


def test_what_was_edited_since_the_agent_wrote_it_survives_its_undo(tmp_path: Path) -> None:
    """Mode flags, then an operator's edits: a --max-pods added to the flags file the agent
    wrote, and a line added to its config. The undo takes only the agent's two flags out of the
    flags file (the edit kept) and keeps the config as edited, saying both in its plan and once
    done; the rest goes as before (its home, its plugins)."""
    done = agent_node(tmp_path, None, """
        agent_apply --providers aws > /dev/null || echo apply-failed
        sed -i 's/--v=2/--v=2 --max-pods=50/' /etc/default/kubelet
        echo '# mine' >> /etc/kubernetes/image-credential-provider-config.yaml
        credprovider undo --dry-run; echo "dry=$?"
        credprovider undo --json; echo "undo=$?"
        cat /etc/default/kubelet; tail -n 1 /etc/kubernetes/image-credential-provider-config.yaml
        ls /var/lib/credprovider 2>&1 | head -n 1
    """)  # fmt: skip
    out = done.stdout
    assert "apply-failed" not in out and "dry=0\n" in out, out + done.stderr
    plan = out.split("dry=0\n")[0]
    edit = "/etc/default/kubelet: the agent's flags out, the edit made since it wrote it kept"
    kept = (
        "/etc/kubernetes/image-credential-provider-config.yaml was changed since the agent wrote "
        "it: kept as it is"
    )
    assert f"  edit {edit}\n" in plan and f"  {kept}\n" in plan, plan
    report = json.loads(out.split("dry=0\n")[1].split("undo=0")[0])
    assert f"edited {edit}" in report["steps"] and report["kept"] == [kept], report
    after = out.split("undo=0\n")[1].splitlines()
    assert after[0] == 'KUBELET_EXTRA_ARGS="--v=2 --max-pods=50"', after
    assert after[1] == "# mine" and "No such file or directory" in after[2], after


@pytest.mark.parametrize(
    "state",
    [
        {"originals": {"/etc": {"absent": True}}, "written": {}},
        {"originals": {"/var/lib/x/c.yaml": {"file": "/etc/shadow", "mode": 0o644}}},
        {"originals": {"/var/lib/x/c.yaml": {"link": "/etc/shadow"}}, "written": {}, "x": 1},
    ],
    ids=["etc-removed", "shadow-copied", "unknown-field"],
)
def test_a_forged_agent_state_acts_on_nothing(tmp_path: Path, state: dict[str, Any]) -> None:
    """The agent's state is read as hostile input by undo as by the agent (statecheck.load): a
    forged one (naming /etc to remove, /etc/shadow as a kept copy) is refused in one line,
    nothing changed."""
    done = agent_node(tmp_path, "kept: as it is\n", """
        mkdir -p /var/lib/credprovider/agent && printf %s "$STATE" > "/var/lib/credprovider/agent/state.json"
        listing > "$N/before"
        credprovider undo --config /var/lib/x/c.yaml; echo "rc=$?"
        listing | diff "$N/before" - && echo same
    """, STATE=json.dumps(state))  # fmt: skip
    assert done.stdout.split() == ["rc=1", "same"], done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(
        "credprovider undo: /var/lib/credprovider/agent/state.json is not the agent's state ("
    ) and line.endswith(
        "nothing is changed; restore it, or remove it to make the agent start afresh"
    )

"""Red team, ``--root`` (docs/security.md): a node's filesystem mounted somewhere (the agent's
``/host``, ``doctor --root``) holds links and ``..`` that name its own places; resolved in the
tool's filesystem they would name others. Each row of the table plants one on a kubeadm node
whose absolute links point at a sentinel directory *outside* the root (so that a resolution in the
wrong filesystem lands there, and nowhere else on this machine). After ``agent apply``, ``agent
uninstall`` and ``doctor --root`` the sentinel is byte for byte as it was, and the kubelet's flags
file is back as it was. A forged ``state.json`` (a copy from outside, a path climbing out, a link
placed outside) is refused with one line and changes nothing.

Through the bundle when it is built (make test, CI), else from source."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from release.bundle import BUNDLE_DIR
from tests.helpers import REPO, run_cli
from tests.integration.cli.conftest import fake_bundle
from tests.reliability.agentnode import agent_node
from tests.unit.tool.test_agent_apply import kubeadm, tree

AGENT_HOME = "var/lib/credprovider/agent"
SECRET = "outside-secret-provider"


def cli(*args: str) -> tuple[int, str, str]:
    done = run_cli(*args, use_bundle=(BUNDLE_DIR / "credprovider").exists())
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout, done.stderr


def sentinel(tmp_path: Path) -> Path:
    """A directory outside the root, with a config a leak would show and a file a leak would
    delete or overwrite."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "image-credential-provider-config.yaml").write_text(json.dumps({
        "apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig",
        "providers": [{"name": SECRET, "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
                       "matchImages": ["x.example.com"], "defaultCacheDuration": "1h"}],
    }))  # fmt: skip
    (outside / "kubelet").write_text("KUBELET_EXTRA_ARGS=--outside\n")
    (outside / "victim").write_text("keep me\n")
    return outside


def replace_with_link(root: Path, node_path: str, target: str) -> None:
    place = root / node_path.lstrip("/")
    if place.is_dir():
        for child in place.iterdir():
            child.unlink()
        place.rmdir()
    place.parent.mkdir(parents=True, exist_ok=True)
    place.symlink_to(target)


Plant = Callable[[Path, Path], None]
# Each row: what is planted on the node (root, outside).
ROWS: dict[str, Plant] = {
    "/etc/kubernetes -> outside (absolute)": lambda r, o: replace_with_link(
        r, "/etc/kubernetes", str(o)
    ),
    "/etc/default -> outside (absolute)": lambda r, o: replace_with_link(r, "/etc/default", str(o)),
    "/var/lib/credprovider -> outside (absolute)": lambda r, o: replace_with_link(
        r, "/var/lib/credprovider", str(o)
    ),
    "the agent's bin dir -> outside (absolute)": lambda r, o: replace_with_link(
        r, f"/{AGENT_HOME}/bin", str(o)
    ),
    "/etc/kubernetes -> ../../../.. outside (relative)": lambda r, o: replace_with_link(
        r, "/etc/kubernetes", "../" * 30 + str(o).lstrip("/")
    ),
}


@pytest.mark.parametrize("row", ROWS)
def test_apply_and_uninstall_stay_inside_the_root(tmp_path: Path, row: str) -> None:
    outside = sentinel(tmp_path)
    with agent_node(tmp_path) as (root, bundle, common):
        ROWS[row](root, outside)
        kept, flags_before = tree(str(outside)), _flags(root)
        code, out, err = cli(
            "agent", "apply", "--bundle", str(bundle), "--providers", "aws", *common
        )
        assert (code, out.splitlines()[0]) == (0, "installed"), out + err
        assert tree(str(outside)) == kept, "apply wrote outside the root"
        code, out, err = cli("agent", "uninstall", *common)
    assert (code, out.splitlines()[:1]) == (0, ["uninstalled"]), err
    assert tree(str(outside)) == kept, "uninstall wrote outside the root"
    assert _flags(root) == flags_before


def _flags(root: Path) -> str:
    """The kubelet's flags file as the node reads it (its own links resolved inside the root)."""
    from credprovider.tool.node.root import NodeRoot

    place = NodeRoot.at(root).host("/etc/default/kubelet")
    return place.read_text() if place.exists() else ""


def test_files_only_paths_climbing_out_stay_inside(tmp_path: Path) -> None:
    outside = sentinel(tmp_path)
    root = tmp_path / "node"
    root.mkdir()
    kept = tree(str(outside))
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    code, _, err = cli(
        "agent", "apply", "--root", str(root), "--bundle", str(bundle), "--providers", "aws",
        "--files-only", "--config", "/../outside/image-credential-provider-config.yaml",
        "--bin-dir", "/../outside/bin",
    )  # fmt: skip
    assert code == 0, err
    assert tree(str(outside)) == kept
    assert (root / "outside/image-credential-provider-config.yaml").is_file()
    assert (root / "outside/bin/ecr-credential-provider").is_symlink()


@pytest.mark.parametrize(
    "named",
    [
        "/" + "../" * 30 + "outside/image-credential-provider-config.yaml",
        "/etc/kubernetes/image-credential-provider-config.yaml",  # through a link to outside
    ],
)
def test_doctor_root_reads_nothing_outside(tmp_path: Path, named: str) -> None:
    outside = sentinel(tmp_path)
    root = Path(kubeadm(tmp_path / "node"))
    replace_with_link(root, "/etc/kubernetes", str(outside))
    relative = named.replace("outside", os.path.relpath(outside, "/")) if ".." in named else named
    (root / "var/lib/kubelet/kubeadm-flags.env").write_text(
        f'KUBELET_KUBEADM_ARGS="--image-credential-provider-config={relative} '
        f'--image-credential-provider-bin-dir=/usr/libexec/bin"\n'
    )
    _, out, err = cli("doctor", "--root", str(root), "--json")
    assert SECRET not in out + err
    report = json.loads(out)
    assert report["config"] == relative


def forged_state(root: Path, state: dict[str, object]) -> None:
    place = root / AGENT_HOME / "state.json"
    place.parent.mkdir(parents=True, exist_ok=True)
    place.write_text(json.dumps({"version": "0.1.0", "written": {}, **state}))


FORGED = {
    "a copy from outside over the flags file": lambda o: {
        "originals": {"/etc/default/kubelet": {"file": f"/../../../..{o}/kubelet", "mode": 420}}
    },
    "a path climbing out, to delete": lambda o: {
        "originals": {f"/../../../..{o}/victim": {"absent": True}}
    },
    "a link placed outside": lambda o: {
        "originals": {f"/../../../..{o}/newlink": {"link": "/etc/shadow"}}
    },
    "a kept copy outside the agent's directory": lambda o: {
        "originals": {"/etc/default/kubelet": {"file": "etc/passwd", "mode": 420}}
    },
    "a made directory climbing out": lambda o: {
        "originals": {}, "made_dirs": [f"/../../../..{o}"]
    },
    # #62: each of these passed validation, and uninstall deleted or overwrote it (exit 0)
    "the whole root, to delete": lambda o: {"originals": {"/": {"absent": True}}},
    "the node's /etc, to delete": lambda o: {"originals": {"/etc": {"absent": True}}},
    "a directory of the node, to delete": lambda o: {
        "originals": {"/var/lib/kubelet": {"absent": True}}
    },
    "a set-uid copy": lambda o: {
        "originals": {"/etc/default/kubelet": {"file": "originals/etc/default/kubelet",
                                               "mode": 0o104755}}
    },
    "a rollback copy over /etc": lambda o: {
        "originals": {}, "before": {"/etc": {"absent": True, "written": None}}
    },
    # a file of the node's the agent never changes: its kubelet's unit, deleted or made a link
    "the kubelet's unit, to delete": lambda o: {
        "originals": {UNIT: {"absent": True}}
    },
    "the kubelet's unit, made a link": lambda o: {
        "originals": {UNIT: {"link": f"{o}/evil.service"}}
    },
    "the kubelet's unit, put back by a rollback": lambda o: {
        "originals": {}, "before": {UNIT: {"absent": True, "written": None}}
    },
}  # fmt: skip
UNIT = "/lib/systemd/system/kubelet.service"  # in the kubeadm fixture node


@pytest.mark.parametrize("row", FORGED)
def test_a_forged_state_changes_nothing(tmp_path: Path, row: str) -> None:
    outside = sentinel(tmp_path)
    root = Path(kubeadm(tmp_path / "node"))
    forged_state(root, FORGED[row](outside))
    kept, node_before = tree(str(outside)), tree(str(root))
    code, out, err = cli(
        "agent", "uninstall", "--root", str(root), "--restart-command", "true {unit}"
    )
    assert (code, out) == (1, "")
    assert len(err.splitlines()) == 1 and "is not the agent's state" in err
    assert tree(str(outside)) == kept
    assert tree(str(root)) == node_before


def test_a_state_naming_a_file_it_never_wrote_or_others_may_write_changes_nothing(
    tmp_path: Path,
) -> None:
    """#62: a state saying the agent wrote the kubelet's unit (with the unit's own digest) and
    that nothing was there before had uninstall delete the unit; a state others may write is not
    one the agent wrote. Both are refused in one line, the node as it was."""
    root = Path(kubeadm(tmp_path / "node"))
    unit = (root / UNIT.lstrip("/")).read_bytes()
    forged_state(
        root,
        {"originals": {UNIT: {"absent": True}},
         "written": {UNIT: hashlib.sha256(unit).hexdigest()}},
    )  # fmt: skip
    for mode, says in ((0o600, "holds neither a config nor flags"), (0o666, "writable by others")):
        (root / AGENT_HOME.lstrip("/") / "state.json").chmod(mode)
        node_before = tree(str(root))
        code, out, err = cli(
            "agent", "uninstall", "--root", str(root), "--restart-command", "true {unit}"
        )
        assert (code, out) == (1, "") and len(err.splitlines()) == 1
        assert "is not the agent's state" in err and says in err, err
        assert tree(str(root)) == node_before


def test_a_link_through_the_root_is_followed_inside_it_by_uninstall(tmp_path: Path) -> None:
    """A state path through a node link (``/etc/kubernetes`` -> outside, absolute): uninstall
    removes the file the node names, inside the root, never the one outside."""
    outside = sentinel(tmp_path)
    root = Path(kubeadm(tmp_path / "node"))
    replace_with_link(root, "/etc/kubernetes", str(outside))
    plugin = "ecr-credential-provider"  # a plugin's link the agent made (a path of its own)
    (outside / plugin).write_text("the host's own\n")
    inside = root / str(outside).lstrip("/") / plugin
    inside.parent.mkdir(parents=True)
    inside.symlink_to("/var/lib/credprovider/agent/current/credprovider")
    forged_state(root, {"originals": {f"/etc/kubernetes/{plugin}": {"absent": True}}})
    kept = tree(str(outside))
    code, _, err = cli(
        "agent", "uninstall", "--root", str(root), "--restart-command", "true {unit}"
    )
    assert code == 0, err
    assert tree(str(outside)) == kept and not os.path.lexists(inside)


def _fifo(copy: Path, outside: Path) -> None:
    os.mkfifo(copy)


def _sparse(copy: Path, outside: Path) -> None:
    with copy.open("wb") as grown:
        grown.truncate(2 * 1024**3)


def _link_outside(copy: Path, outside: Path) -> None:
    copy.symlink_to(outside / "victim")


@contextlib.contextmanager
def _agent_installed(tmp_path: Path) -> Iterator[tuple[Path, Path, list[str]]]:
    """A kubeadm node with a flags file, the agent installed on it through the CLI: its root, the
    bundle, and the options every agent command there takes (a stand-in kubelet answering its
    /healthz while this lasts)."""
    with agent_node(tmp_path) as (root, bundle, common):
        code, out, err = cli(
            "agent", "apply", "--bundle", str(bundle), "--providers", "aws", *common
        )
        assert code == 0, out + err
        yield root, bundle, common


# #62/#63: what a kept copy of the agent's can be made into; each was read as the original (a FIFO
# held uninstall for ever, 2 GiB was read whole, a directory stopped it half-way).
COPIES: dict[str, Callable[[Path, Path], None]] = {
    "a FIFO": _fifo,
    "a 2 GiB sparse file": _sparse,
    "a directory": lambda copy, outside: copy.mkdir(),
    "a link to a file outside": _link_outside,
    "a file others may write": lambda copy, outside: (
        copy.write_text("KUBELET_EXTRA_ARGS=--forged\n"),
        copy.chmod(0o666),
    ),
}


@pytest.mark.parametrize("made", COPIES)
def test_a_kept_copy_that_is_not_what_the_agent_kept_changes_nothing(
    tmp_path: Path, made: str
) -> None:
    """The agent's kept copies are read as hostile input, like its state: one changed into
    something it never keeps is refused, in one line, before anything changes."""
    outside = sentinel(tmp_path)
    with _agent_installed(tmp_path) as (root, bundle, common):
        copies = sorted((root / AGENT_HOME / "originals").iterdir())
        assert copies, "the agent kept no copy of the flags file it edited"
        for copy in copies:
            copy.unlink()
            COPIES[made](copy, outside)
        for err in _both_refuse(root, outside, bundle, common):
            assert "is not the agent's state" in err and "originals/" in err, err  # which copy


def _both_refuse(root: Path, outside: Path, bundle: Path, common: list[str]) -> list[str]:
    """``agent uninstall`` and ``agent apply`` each refuse (exit 1, nothing on stdout, one line on
    stderr) with nothing changed under ``root`` or ``outside``: what each said."""
    kept, node_before = tree(str(outside)), _listing(root)
    said = []
    for command in ("uninstall", "apply"):
        extra = ["--bundle", str(bundle), "--providers", "aws"] if command == "apply" else []
        code, out, err = cli("agent", command, *extra, *common)
        assert (code, out) == (1, ""), f"agent {command}: {out}{err}"
        assert len(err.splitlines()) == 1, err
        assert tree(str(outside)) == kept and _listing(root) == node_before
        said.append(err)
    return said


def _listing(root: Path) -> dict[str, tuple[int, int, int, bytes]]:
    """Every path under ``root`` as :func:`tree` sees it, without opening a FIFO or reading a
    planted 2 GiB file: its lstat (mode, size, mtime) and a small regular file's bytes (``/run``,
    where the node's lock is, left out as :func:`tree` leaves it)."""
    found = {}
    for directory, dirs, files in os.walk(root):
        if Path(directory) == root and "run" in dirs:
            dirs.remove("run")
        for name in [*dirs, *files]:
            path = Path(directory, name)
            info = path.lstat()
            small = stat.S_ISREG(info.st_mode) and info.st_size < 1 << 20
            data = path.read_bytes() if small else b""
            found[str(path)] = (info.st_mode, info.st_size, info.st_mtime_ns, data)
    return found


def test_a_flags_file_grown_to_gigabytes_since_is_left_without_being_read(tmp_path: Path) -> None:
    """The kubelet flags file the agent wrote, replaced since by a 2 GiB file: uninstall reports
    it as someone else's and leaves it, under a 1 GiB address space (it was read whole, twice:
    once for the rollback's copy, once for its digest)."""
    import subprocess

    from tests.helpers import private

    with _agent_installed(tmp_path) as (root, _, common):
        flags = root / "etc/default/kubelet"
        flags.unlink()
        _sparse(flags, tmp_path)
        tool = BUNDLE_DIR / "credprovider"
        command = (
            [str(tool)] if tool.exists() else [sys.executable, "-m", "credprovider", "credprovider"]
        )
        done = subprocess.run(
            private(["prlimit", f"--as={1 << 30}", "--", *command, "agent", "uninstall", *common]),
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stdout + done.stderr  # 1: a file was kept
    assert "/etc/default/kubelet" in done.stdout and "kept" in done.stdout, done.stdout
    assert flags.stat().st_size == 2 * 1024**3
    assert not (root / AGENT_HOME / "before").exists()  # no rollback copy of it was made


def _journal_op(kind: str, path: str, **more: object) -> dict[str, object]:
    return {"kind": kind, "path": path, "backup": None, **more}


def _data(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


# #62/#63: the agent's journal (the one format, change "agent") read as hostile input: only its
# links and the kubelet inputs its state records, with the bytes whose digest it recorded.
JOURNALS: dict[str, Callable[[Path], object]] = {
    "the node's /etc/shadow written": lambda o: {"change": "agent", "ops": [
        _journal_op("file", "/etc/shadow", data=_data("root::0:0:::::\n"), mode=None)]},
    "the kubelet's flags, with bytes the agent never recorded": lambda o: {"change": "agent",
        "ops": [_journal_op("file", "/etc/default/kubelet", data=_data("--forged\n"), mode=None)]},
    "a set-uid file": lambda o: {"change": "agent", "ops": [
        _journal_op("file", "/etc/default/kubelet", data=_data("x\n"), mode=0o4755)]},
    "a link the agent never placed": lambda o: {"change": "agent", "ops": [
        _journal_op("link", "/usr/local/bin/kubelet", target=f"{o}/victim")]},
    "the kubelet's plugin linked to a program outside": lambda o: {"change": "agent", "ops": [
        _journal_op("link", f"/{AGENT_HOME}/bin/ecr-credential-provider", target=f"{o}/victim")]},
    "a plugin linked to a 100 KB name": lambda o: {"change": "agent", "ops": [
        _journal_op("link", f"/{AGENT_HOME}/bin/ecr-credential-provider", target="x" * 100_000)]},
    "the agent's current linked out of its versions": lambda o: {"change": "agent", "ops": [
        _journal_op("link", f"/{AGENT_HOME}/current", target="../../../../etc")]},
    "a copy over the node's /etc/kubernetes": lambda o: {"change": "agent", "ops": [
        _journal_op("tree", "/etc/kubernetes", source=str(o), links=True)]},
    "the whole root, to delete": lambda o: {"change": "agent", "ops": [
        _journal_op("absent", "/")]},
    "a directory of the node, to delete": lambda o: {"change": "agent", "ops": [
        _journal_op("absent", "/var/lib/kubelet")]},
    "a change by hand in the agent's place": lambda o: {"change": "install", "ops": [
        _journal_op("link", "/usr/local/bin/kubelet", target=f"{o}/victim")]},
    "40 MiB": lambda o: "x" * (40 << 20),
}  # fmt: skip


@pytest.mark.parametrize("row", JOURNALS)
def test_a_forged_agent_journal_changes_nothing(tmp_path: Path, row: str) -> None:
    """A journal beside the agent's state that the agent never wrote: ``agent apply`` (which
    would finish it) and ``agent uninstall`` (which would give it up) each refuse it in one line,
    and nothing on the node or outside it changes."""
    outside = sentinel(tmp_path)
    with _agent_installed(tmp_path) as (root, bundle, common):
        journal = root / AGENT_HOME / ".state.json.credprovider-journal"
        forged = JOURNALS[row](outside)
        journal.write_text(forged if isinstance(forged, str) else json.dumps(forged))
        journal.chmod(0o600)
        for err in _both_refuse(root, outside, bundle, common):
            assert ".state.json.credprovider-journal" in err and "nothing was changed" in err, err
            assert len(err) < 1000, err[:300]  # what it quotes of the journal is an excerpt

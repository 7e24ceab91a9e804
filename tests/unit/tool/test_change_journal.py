"""The node-change engine and its intent journal (credprovider/tool/change/engine.py, journal.py);
install and migrate --write killed at each of their points is
tests/reliability/test_crash_points_by_hand.py, the agent's tests/reliability/test_crash_points.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from credprovider.tool.change.engine import Kind, Op, perform
from credprovider.tool.change.journal import begin, journal_for, pending, recover, run
from credprovider.tool.errors import NodeChangeError


def test_an_interrupted_change_is_finished_and_the_journal_removed(tmp_path: Path) -> None:
    done, left = tmp_path / "done.env", tmp_path / "left.env"
    done.write_text("new\n")  # written before the kill
    left.write_text("old\n")  # not yet
    journal = journal_for(str(tmp_path / "config.yaml"))
    begin(journal, [Op(Kind.FILE, done, b"new\n"), Op(Kind.FILE, left, b"new\n")])
    assert journal.name == ".config.yaml.credprovider-journal"
    assert journal.stat().st_mode & 0o777 == 0o600
    before = done.stat().st_ino
    assert [op.path for op in recover(journal)] == [left]
    assert left.read_text() == "new\n" and not journal.exists()
    assert done.stat().st_ino == before  # done already: not written again
    assert recover(journal) == []  # nothing pending


def test_a_backup_a_killed_run_made_is_the_original_and_is_not_taken_again(
    tmp_path: Path,
) -> None:
    """Killed after keeping the original, before the replace: the rerun keeps the backup as it is
    (it holds the original) and replaces the file."""
    config, backup = tmp_path / "c.yaml", tmp_path / "c.yaml.credprovider-backup-1"
    config.write_text("theirs\n")
    backup.write_text("the original\n")  # kept by the killed run (here: other bytes, to tell)
    journal = journal_for(config)
    begin(journal, [Op(Kind.FILE, config, b"ours\n", backup=backup)])
    recover(journal)
    assert (config.read_text(), backup.read_text()) == ("ours\n", "the original\n")
    journal_for(config).unlink(missing_ok=True)
    fresh = tmp_path / "fresh.yaml"
    fresh.write_text("theirs\n")
    perform(Op(Kind.FILE, fresh, b"ours\n", backup=tmp_path / "fresh.bak"))
    assert (tmp_path / "fresh.bak").read_text() == "theirs\n"


def test_run_journals_only_what_is_not_done_and_keeps_each_original(tmp_path: Path) -> None:
    same, other = tmp_path / "same", tmp_path / "other"
    same.write_text("x")
    other.write_text("old")
    other.chmod(0o600)
    link = tmp_path / "bin" / "plugin"
    ops = [
        Op(Kind.FILE, same, b"x"),
        Op(Kind.FILE, other, b"new", backup=tmp_path / "other.bak"),
        Op(Kind.LINK, link, target="/opt/credprovider/credprovider"),
    ]
    assert [op.path for op in run(journal_for(same), ops)] == [other, link]
    assert (other.read_text(), (tmp_path / "other.bak").read_text()) == ("new", "old")
    assert other.stat().st_mode & 0o777 == 0o600  # a file that exists keeps its mode
    assert os.readlink(link) == "/opt/credprovider/credprovider"
    assert not journal_for(same).exists()
    assert run(journal_for(same), ops) == []


def test_a_tree_is_copied_whole_and_its_backup_made_whole_first(tmp_path: Path) -> None:
    source = tmp_path / "bundle"
    (source / "_internal").mkdir(parents=True)
    (source / "credprovider").write_text("launcher")
    (source / "_internal" / "lib.so").write_text("lib")
    (source / "ecr-credential-provider").symlink_to("credprovider")
    copy, kept = tmp_path / "bin" / ".credprovider", tmp_path / "bin" / ".credprovider.bak"
    copy.mkdir(parents=True)
    (copy / "credprovider").write_text("old launcher")
    op = Op(Kind.TREE, copy, source=source, links=False, backup=kept)
    assert not op.done()
    perform(op)
    assert op.done()
    assert sorted(p.name for p in copy.iterdir()) == ["_internal", "credprovider"]
    assert (kept / "credprovider").read_text() == "old launcher"
    assert not [p for p in copy.parent.iterdir() if "credprovider-new" in p.name]
    assert Op(Kind.TREE, copy, source=source).done() is False  # with the source's links: not yet
    (source / "credprovider").write_text("LAUNCHER")  # another build, the same size
    assert not op.done()


def test_a_copy_whose_source_is_gone_is_not_finished(tmp_path: Path) -> None:
    journal = journal_for(tmp_path / "c.yaml")
    begin(journal, [Op(Kind.TREE, tmp_path / "copy", source=tmp_path / "gone", links=False)])
    with pytest.raises(NodeChangeError, match="is gone: nothing was changed"):
        recover(journal)
    assert journal.exists() and not (tmp_path / "copy").exists()


def test_every_kind_of_op_survives_the_journal(tmp_path: Path) -> None:
    ops = [
        Op(Kind.FILE, tmp_path / "f", b"\x00\xffbytes", 0o640, backup=tmp_path / "f.bak"),
        Op(Kind.FILE, tmp_path / "g", b"text"),
        Op(Kind.LINK, tmp_path / "l", target="../x"),
        Op(Kind.TREE, tmp_path / "t", source=tmp_path / "s", links=False),
        Op(Kind.ABSENT, tmp_path / "a"),
    ]
    journal = journal_for(tmp_path / "c.yaml")
    begin(journal, ops)
    assert pending(journal) == ops


def test_an_earlier_versions_journal_is_finished(tmp_path: Path) -> None:
    """A migrate --write of the version before the engine, killed, then this version run."""
    out = tmp_path / "kubelet"
    journal = journal_for(tmp_path / "c.yaml")
    journal.write_text(
        json.dumps([{"path": str(out), "text": "KUBELET_EXTRA_ARGS=\n", "backup": None}])
    )
    journal.chmod(0o600)
    recover(journal)
    assert out.read_text() == "KUBELET_EXTRA_ARGS=\n" and not journal.exists()


@pytest.mark.parametrize(
    "text",
    [
        '[{"path": "relative", "text": "x", "backup": null}]',
        '[{"path": "/etc/x", "text": 3}]',
        '[{"kind": "file", "path": "/etc/x", "data": "not base64!", "mode": null}]',
        '[{"kind": "file", "path": "/etc/x", "data": "", "mode": 99999}]',
        '[{"kind": "tree", "path": "/etc/x", "source": "relative", "links": true}]',
        '[{"kind": "link", "path": "/etc/x"}]',
        '[{"kind": "chmod", "path": "/etc/x"}]',
        '[{"kind": "absent", "path": "/etc/x", "backup": "relative"}]',
        "{",
        "[" * 100 + "]" * 100,
    ],
)
def test_a_damaged_journal_changes_nothing(tmp_path: Path, text: str) -> None:
    journal = journal_for(str(tmp_path / "c.yaml"))
    journal.write_text(text)
    journal.chmod(0o600)
    with pytest.raises(NodeChangeError, match="is damaged"):
        recover(journal)
    assert journal.exists()


def test_a_journal_someone_else_could_write_is_refused(tmp_path: Path) -> None:
    journal = journal_for(str(tmp_path / "c.yaml"))
    journal.write_text('[{"path": "/etc/shadow", "text": "x", "backup": null}]')
    journal.chmod(0o666)
    with pytest.raises(NodeChangeError, match="writable by others"):
        pending(journal)
    if os.geteuid() == 0:
        journal.chmod(0o600)
        os.chown(journal, 65534, 65534)
        with pytest.raises(NodeChangeError, match="owned by uid 65534"):
            pending(journal)

"""The node-change engine and its intent journal (credprovider/tool/change/engine.py, journal.py);
install and migrate --write killed at each of their points is
tests/reliability/test_crash_points_by_hand.py, the agent's tests/reliability/test_crash_points.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from credprovider.tool.change.confine import BUNDLE_MANIFEST
from credprovider.tool.change.engine import Kind, Op, perform
from credprovider.tool.change.journal import begin, recover, run
from credprovider.tool.change.journalformat import MAX_JOURNAL_BYTES, journal_for, read
from credprovider.tool.change.render import BUNDLE_COPY_DIR
from credprovider.tool.errors import NodeChangeError


def test_an_interrupted_change_is_finished_and_the_journal_removed(tmp_path: Path) -> None:
    done, left = tmp_path / "done.env", tmp_path / "left.env"
    new = b"KUBELET_EXTRA_ARGS=--v=2\n"
    done.write_bytes(new)  # written before the kill
    left.write_text("KUBELET_EXTRA_ARGS=\n")  # not yet
    journal = journal_for(str(tmp_path / "config.yaml"))
    begin(journal, [Op(Kind.FILE, done, new), Op(Kind.FILE, left, new)])
    assert journal.name == ".config.yaml.credprovider-journal"
    assert journal.stat().st_mode & 0o777 == 0o600
    before = done.stat().st_ino
    assert [op.path for op in recover(journal)] == [left]
    assert left.read_bytes() == new and not journal.exists()
    assert done.stat().st_ino == before  # done already: not written again
    assert recover(journal) == []  # nothing pending


def test_a_backup_a_killed_run_made_is_the_original_and_is_not_taken_again(
    tmp_path: Path,
) -> None:
    """Killed after keeping the original, before the replace: the rerun keeps the backup as it is
    (it holds the original) and replaces the file."""
    config, backup = tmp_path / "c.yaml", tmp_path / "c.yaml.credprovider-backup-1"
    config.write_text("theirs\n")
    journal = journal_for(config)
    begin(journal, [Op(Kind.FILE, config, b"ours\n", backup=backup)])
    backup.write_text("the original\n")  # kept by the killed run (here: other bytes, to tell)
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
    copy = tmp_path / BUNDLE_COPY_DIR
    begin(journal, [Op(Kind.TREE, copy, source=tmp_path / "gone", links=False)])
    with pytest.raises(NodeChangeError, match="is gone: nothing was changed"):
        recover(journal)
    assert journal.exists() and not copy.exists()


def test_a_killed_install_s_links_into_a_bundle_are_finished(tmp_path: Path) -> None:
    """The links install journals point at a bundle's launcher: the bundle's own, a package's
    through its bin dir's link into the versioned bundle, or the copy the same journal makes; its
    config is written over a link there."""
    bundle = tmp_path / "lib" / "1.2.3"
    (bundle / BUNDLE_MANIFEST).parent.mkdir(parents=True)
    (bundle / BUNDLE_MANIFEST).write_text("credprovider 1\n")
    (bundle / "credprovider").write_text("LAUNCHER")
    (tmp_path / "lib" / "bin").mkdir()
    (tmp_path / "lib" / "bin" / "credprovider").symlink_to("../1.2.3/credprovider")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    copy = bin_dir / BUNDLE_COPY_DIR
    ops = [
        Op(Kind.LINK, bin_dir / "ecr-credential-provider", target=str(bundle / "credprovider")),
        Op(Kind.LINK, bin_dir / "auth-provider-gcp", target=str(tmp_path / "lib/bin/credprovider")),
        Op(Kind.TREE, copy, source=bundle, links=False),
        Op(Kind.LINK, bin_dir / "acr-credential-provider-b", target=str(copy / "credprovider")),
    ]
    config = tmp_path / "c.yaml"  # the operator's config, a link to theirs: replaced by a file
    config.symlink_to(tmp_path / "theirs.yaml")
    ops.append(Op(Kind.FILE, config, b"kind: CredentialProviderConfig\n"))
    begin(journal_for(config), ops)
    assert recover(journal_for(config)) == ops
    assert all(op.done() for op in ops)


def test_every_kind_of_op_survives_the_journal(tmp_path: Path) -> None:
    ops = [
        Op(Kind.FILE, tmp_path / "f", b"\x00\xffbytes", 0o640, backup=tmp_path / "f.bak"),
        Op(Kind.FILE, tmp_path / "g", b"text"),
        Op(Kind.LINK, tmp_path / "l", target="../x"),
        Op(Kind.TREE, tmp_path / "t", source=tmp_path / "s", links=False),
    ]
    journal = journal_for(tmp_path / "c.yaml")
    begin(journal, ops)
    found = read(journal)
    assert found is not None and found.ops == ops


def forged(tmp_path: Path, entries: list[dict[str, object]]) -> Path:
    journal = journal_for(tmp_path / "c.yaml")
    journal.write_text(json.dumps(entries))
    journal.chmod(0o600)
    return journal


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"kind": "absent", "path": "/"}, "is damaged"),
        ({"kind": "absent", "path": "{tmp}/x"}, "is damaged"),  # never journaled: a removal
        ({"kind": "link", "path": "/", "target": "x", "backup": None}, "is damaged"),
        ({"kind": "link", "path": "/etc", "target": "x", "backup": None}, "is damaged"),
        ({"kind": "link", "path": "{tmp}/../x", "target": "x", "backup": None}, "is damaged"),
        ({"kind": "file", "path": "{tmp}/f", "data": "", "mode": 0o6755, "backup": None},
         "is damaged"),  # set-uid
        ({"kind": "file", "path": "{tmp}/f", "data": "", "mode": 0o666, "backup": None},
         "is damaged"),  # written by anyone
        ({"kind": "file", "path": "{tmp}/kubelet", "data": "", "backup": "/etc/shadow"},
         "is damaged"),  # a backup away from its file
        ({"kind": "file", "path": "{tmp}/shadow", "data": "", "backup": None},
         "holds no kubelet flags"),
        ({"kind": "file", "path": "{tmp}/cron", "data": "eA==", "backup": None},
         "neither its config nor a kubelet flag file"),
        ({"kind": "link", "path": "{tmp}/dir", "target": "x", "backup": None},
         "would replace the directory"),
        ({"kind": "tree", "path": "{tmp}/.credprovider", "source": "{tmp}/s", "links": False,
          "backup": None}, "which is not a bundle"),
        # a file it never journals: a link in its place, a copy there, a new unit or list
        ({"kind": "link", "path": "{tmp}/shadow", "target": "/tmp/x", "backup": None},
         "which is not a plugin's or its config"),
        ({"kind": "link", "path": "{tmp}/ecr-credential-provider", "target": "/tmp/evil",
          "backup": None}, "which is not a bundle's executable"),
        ({"kind": "tree", "path": "{tmp}/dir", "source": "{tmp}/s", "links": False,
          "backup": None}, "not where install copies a bundle"),
        ({"kind": "file", "path": "{tmp}/kubelet.service", "data": "", "backup": None},
         "neither its config nor a kubelet flag file"),
        ({"kind": "file", "path": "{tmp}/package-links", "data": "", "backup": None},
         "neither its config nor a kubelet flag file"),
    ],
)  # fmt: skip
def test_a_forged_journal_changes_nothing(
    tmp_path: Path, entry: dict[str, object], says: str
) -> None:
    """#62: a journal is hostile input. Each entry here once acted on the node (a removal of
    ``/``, a set-uid file, /etc/shadow overwritten or replaced by a link, a plugin pointed at
    another program, a unit written); now the run refuses, in one line, before any op of the
    journal is carried out."""
    (tmp_path / "shadow").write_text("root:x:0:\n")
    for directory in ("dir", BUNDLE_COPY_DIR):
        (tmp_path / directory).mkdir()
        (tmp_path / directory / "keep").write_text("mine\n")
    (tmp_path / "s").mkdir()
    flags = tmp_path / "kubelet"
    flags.write_text("KUBELET_EXTRA_ARGS=\n")
    good = {"kind": "file", "path": str(flags), "data": "S1VCRUxFVF9FWFRSQV9BUkdTPS0tdj0yCg==",
            "backup": None}  # fmt: skip
    filled = json.loads(json.dumps(entry).replace("{tmp}", str(tmp_path)))
    journal = forged(tmp_path, [good, filled])
    before = sorted((str(p), p.read_bytes() if p.is_file() else b"") for p in tmp_path.rglob("*"))
    with pytest.raises(NodeChangeError) as refused:
        recover(journal)
    assert says in str(refused.value) and "nothing was changed" in str(refused.value)
    after = sorted((str(p), p.read_bytes() if p.is_file() else b"") for p in tmp_path.rglob("*"))
    assert after == before  # not even the good op ran


def test_a_journal_too_large_is_refused_before_it_is_read(tmp_path: Path) -> None:
    journal = journal_for(tmp_path / "c.yaml")
    with journal.open("wb") as handle:
        handle.truncate(MAX_JOURNAL_BYTES + 1)  # sparse
    journal.chmod(0o600)
    with pytest.raises(NodeChangeError, match="more than a journal credprovider writes"):
        read(journal)


def test_an_earlier_versions_journal_is_finished(tmp_path: Path) -> None:
    """A migrate --write of the version before the engine, killed, then this version run."""
    out = tmp_path / "kubelet"
    out.write_text("KUBELET_EXTRA_ARGS=--cloud-provider=aws\n")
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
        read(journal)
    if os.geteuid() == 0:
        journal.chmod(0o600)
        os.chown(journal, 65534, 65534)
        with pytest.raises(NodeChangeError, match="owned by uid 65534"):
            read(journal)


def _undo_journal(tmp_path: Path, ops: list[dict[str, object]]) -> Path:
    journal = journal_for(tmp_path / "c.yaml")
    journal.write_text(json.dumps({"change": "undo", "ops": ops}))
    journal.chmod(0o600)
    return journal


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"kind": "absent", "path": "{tmp}/shadow", "backup": None}, "holds no kubelet flags"),
        ({"kind": "absent", "path": "{tmp}/dir", "backup": None}, "which is not a bundle"),
        ({"kind": "absent", "path": "{tmp}/shadow.credprovider-backup-1", "backup": None},
         "holds no kubelet flags"),  # not named as a backup is
        ({"kind": "absent", "path": "{tmp}/f", "backup": "{tmp}/f.bak"}, "is damaged"),
        ({"kind": "absent", "path": "{tmp}/resolv.conf", "backup": None},
         "which is not a plugin's or its config"),  # a link it never made
    ],
)  # fmt: skip
def test_a_forged_undo_journal_removes_nothing_it_may_not(
    tmp_path: Path, entry: dict[str, object], says: str
) -> None:
    """An undo's journal may remove, but only links (a plugin's), bundles, the config, flag files,
    backups and directories it empties: a removal of anything else refuses the whole journal."""
    (tmp_path / "shadow").write_text("root:x:0:\n")
    (tmp_path / "shadow.credprovider-backup-1").write_text("root:x:0:\n")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "keep").write_text("mine\n")
    link = tmp_path / "ecr-credential-provider"
    link.symlink_to("/opt/credprovider/credprovider")
    (tmp_path / "resolv.conf").symlink_to("/run/systemd/resolve/stub-resolv.conf")
    good = {"kind": "absent", "path": str(link), "backup": None}
    filled = json.loads(json.dumps(entry).replace("{tmp}", str(tmp_path)))
    journal = _undo_journal(tmp_path, [good, filled])
    with pytest.raises(NodeChangeError) as refused:
        recover(journal)
    assert says in str(refused.value) and "nothing was changed" in str(refused.value)
    assert link.is_symlink() and (tmp_path / "resolv.conf").is_symlink()
    assert (tmp_path / "dir" / "keep").exists()


def test_an_undo_journal_removes_a_directory_only_once_emptied(tmp_path: Path) -> None:
    """The directories a change made go last, once what the undo removes from them is gone."""
    made = tmp_path / "made" / "bin"
    made.mkdir(parents=True)
    (made / "ecr-credential-provider").symlink_to("/opt/credprovider/credprovider")
    journal = _undo_journal(
        tmp_path,
        [{"kind": "absent", "path": str(made / "ecr-credential-provider"), "backup": None},
         {"kind": "absent", "path": str(made), "backup": None},
         {"kind": "absent", "path": str(made.parent), "backup": None}],
    )  # fmt: skip
    recover(journal)
    assert not made.parent.exists() and not journal.exists()


def test_a_record_s_undo_only_backups_are_dropped_under_their_names_alone(tmp_path: Path) -> None:
    """A later change's commit removes the backups the record it replaces took for its undo; a
    forged record naming anything else as one removes nothing."""
    from credprovider.tool.change.journalformat import record_for

    config = tmp_path / "c.yaml"
    victim = tmp_path / "pki"
    victim.mkdir()
    kept = tmp_path / "c.yaml.credprovider-backup-20260101000000"
    kept.write_text("old\n")
    record = record_for(config)
    entries = [
        {"kind": "file", "path": str(config), "data": "", "mode": None, "backup": str(kept),
         "was": {"prior": "kept", "for_undo": True}},
        {"kind": "file", "path": str(tmp_path / "x.conf"), "data": "", "mode": None,
         "backup": str(victim), "was": {"prior": "kept", "for_undo": True}},
    ]  # fmt: skip
    record.write_text(json.dumps({"change": "install", "ops": entries}))
    record.chmod(0o600)
    run(journal_for(config), [Op(Kind.FILE, tmp_path / "kubelet", b"KUBELET_EXTRA_ARGS=\n")])
    assert not kept.exists() and victim.is_dir()
    assert json.loads(record.read_text())["ops"][0]["path"] == str(tmp_path / "kubelet")


@pytest.mark.parametrize(
    "was",
    [
        {"prior": "absent", "made": ["/"]},
        {"prior": "absent", "made": ["{tmp}/elsewhere"]},
        {"prior": "kept"},  # with no backup
        {"prior": "link", "target": ""},
        {"prior": "gone"},
    ],
)
def test_a_record_whose_priors_are_forged_is_damaged(
    tmp_path: Path, was: dict[str, object]
) -> None:
    from credprovider.tool.change.journalformat import read

    journal = journal_for(tmp_path / "c.yaml")
    entry = {"kind": "link", "path": str(tmp_path / "bin" / "p"), "target": "x", "backup": None,
             "was": json.loads(json.dumps(was).replace("{tmp}", str(tmp_path)))}  # fmt: skip
    journal.write_text(json.dumps({"change": "install", "ops": [entry]}))
    journal.chmod(0o600)
    with pytest.raises(NodeChangeError, match="is damaged"):
        read(journal)


def test_an_agent_journal_is_recovered_only_with_the_agent_s_judgment(tmp_path: Path) -> None:
    """#63: the agent journals in the one format (ChangeKind.AGENT: no backups, no record left).
    Its journal is finished only by a run that judges each op against the agent's state; a hand
    run's recovery refuses it, and the agent's refuses a journal of a change by hand."""
    from credprovider.tool.change.engine import ChangeKind
    from credprovider.tool.change.journal import discard
    from credprovider.tool.change.journalformat import read, record_for

    flags, link = tmp_path / "etc" / "kubelet", tmp_path / "bin" / "ecr-credential-provider"
    new = b"KUBELET_EXTRA_ARGS=--image-credential-provider-config=/x\n"
    ops = [Op(Kind.LINK, link, target="/opt/current/ecr"), Op(Kind.FILE, flags, new)]
    journal = journal_for(str(tmp_path / "state.json"))
    begin(journal, ops, ChangeKind.AGENT)
    found = read(journal)
    assert found is not None and found.change is ChangeKind.AGENT
    assert found.ops == ops  # no backup taken: the agent's state keeps what each path was
    with pytest.raises(NodeChangeError, match="the agent change it holds is not journaled there"):
        recover(journal)  # a hand run's recovery
    judged: list[Path] = []

    def refuse(op: Op) -> str:
        judged.append(op.path)
        return "" if op.kind is Kind.LINK else f"no {op.kind} at {op.path}"

    with pytest.raises(NodeChangeError, match=f"no file at {flags}"):
        recover(journal, judge=refuse)
    assert judged == [link, flags] and not flags.exists() and not os.path.lexists(link)
    assert [op.path for op in recover(journal, judge=lambda op: "")] == [link, flags]
    assert flags.read_bytes() == new and os.readlink(link) == "/opt/current/ecr"
    assert not journal.exists() and not record_for(tmp_path / "state.json").exists()
    assert [p.name for p in tmp_path.rglob("*credprovider-backup*")] == []
    # an uninstall gives it up: judged the same, removed, nothing carried out
    begin(journal, [Op(Kind.FILE, flags, b"other\n")], ChangeKind.AGENT)
    with pytest.raises(NodeChangeError):
        discard(journal, None, refuse)
    assert journal.exists()
    assert [op.path for op in discard(journal, None, lambda op: "")] == [flags]
    assert flags.read_bytes() == new and not journal.exists()
    # a change by hand journaled where the agent's journal is: refused by the agent's recovery
    begin(journal, [Op(Kind.FILE, flags, b"other\n")], ChangeKind.INSTALL)
    with pytest.raises(NodeChangeError, match="the install change it holds is not journaled there"):
        recover(journal, judge=lambda op: "")

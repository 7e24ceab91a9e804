"""The intent journal of a change run by hand (credprovider/tool/change/journal.py); migrate
--write killed at each of its points is tests/reliability/test_crash_points_by_hand.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from credprovider.tool.change.journal import Entry, begin, finish, journal_for, pending
from credprovider.tool.errors import NodeChangeError


def test_an_interrupted_change_is_finished_and_the_journal_removed(tmp_path: Path) -> None:
    done, left = tmp_path / "done.env", tmp_path / "left.env"
    done.write_text("new\n")  # written before the kill
    left.write_text("old\n")  # not yet
    journal = journal_for(str(tmp_path / "config.yaml"))
    begin(journal, [Entry(str(done), "new\n", None), Entry(str(left), "new\n", None)])
    assert journal.name == ".config.yaml.credprovider-journal"
    assert journal.stat().st_mode & 0o777 == 0o600
    written: list[str] = []

    def write(entry: Entry) -> None:
        written.append(entry.path)
        Path(entry.path).write_text(entry.text)

    assert finish(journal, write) == [str(left)] == written
    assert left.read_text() == "new\n" and not journal.exists()
    assert finish(journal, write) == []  # nothing pending


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[{"path": "relative", "text": "x", "backup": null}]', "is damaged"),
        ('[{"path": "/etc/x", "text": 3}]', "is damaged"),
        ("{", "is damaged"),
        ("[" * 100 + "]" * 100, "is damaged"),
    ],
)
def test_a_damaged_journal_changes_nothing(tmp_path: Path, text: str, said: str) -> None:
    journal = journal_for(str(tmp_path / "c.yaml"))
    journal.write_text(text)
    with pytest.raises(NodeChangeError, match=said):
        pending(journal)


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

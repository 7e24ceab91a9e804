"""The intent journal of a change run by hand (``migrate --write``): the files it will write and
their whole new text, recorded and flushed before the first of them is replaced, removed once
the last is in place. A run killed between two files (an OOM kill, a power cut) leaves the
journal; the next run finishes it first, so the node never keeps half a migration (a cloud flag
gone from one file, the credential flags not yet in the other).

The journal lives beside the file the change is anchored to (``.NAME.credprovider-journal``, 0600,
in a directory only root writes); it is used only if it is a regular file of this user's that no
one else may write, holding absolute paths and text (anything else: one line, nothing done).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from credprovider.tool.change.durable import remove_file, replace_file
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.structured import JsonTooDeep, bounded_json
from credprovider.tool.node.trust import owner_problem

SUFFIX: Final = ".credprovider-journal"


@dataclass(frozen=True)
class Entry:
    path: str
    text: str
    backup: str | None  # where the old file is kept, if there was one


def journal_for(anchor: str) -> Path:
    where = Path(anchor)
    return where.with_name(f".{where.name}{SUFFIX}")


def begin(journal: Path, entries: list[Entry]) -> None:
    """The intent, flushed, before any of ``entries`` is written."""
    replace_file(journal, json.dumps([asdict(e) for e in entries]).encode(), 0o600)


def end(journal: Path) -> None:
    remove_file(journal)


def pending(journal: Path) -> list[Entry]:
    """What an interrupted run meant to write ([] when there is no journal)."""
    try:
        found = os.lstat(journal)
    except FileNotFoundError:
        return []
    problem = owner_problem(str(journal), found, os.geteuid())
    if not stat.S_ISREG(found.st_mode) or problem:
        raise NodeChangeError(
            f"{journal} is not a journal credprovider wrote ({problem or 'not a regular file'}): "
            "nothing was changed; remove it once you have checked the files it would name"
        )
    try:
        data = bounded_json(journal.read_bytes())
    except (ValueError, JsonTooDeep, OSError):
        data = None
    entries = []
    for item in data if isinstance(data, list) else [None]:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and os.path.isabs(item["path"])
            and isinstance(item.get("text"), str)
            and (item.get("backup") is None or isinstance(item.get("backup"), str))
        ):
            raise NodeChangeError(
                f"{journal} is damaged: nothing was changed; check the files a killed run was "
                "writing (their backups are beside them), then remove it"
            )
        entries.append(Entry(item["path"], item["text"], item.get("backup")))
    return entries


def finish(journal: Path, write: Callable[[Entry], None]) -> list[str]:
    """An interrupted run's change completed: each file not yet as it meant, written; then the
    journal removed. The paths written."""
    done = []
    for entry in pending(journal):
        out = Path(entry.path)
        try:
            current = out.read_text(encoding="utf-8") if out.is_file() else None
        except (OSError, UnicodeDecodeError):
            current = None
        if current != entry.text:
            write(entry)
            done.append(entry.path)
    end(journal)
    return done

"""What the node agent must remember about a node, on the node's disk (``AGENT_HOME/state.json``,
not on tmpfs: a pod restart or a reboot neither repeats nor forgets anything). It is the agent's
write-ahead journal: everything a change will do is recorded, and flushed, before the change
touches the node, so that a run killed at any instant is finished or undone by the next one.

* ``originals``: each path the agent ever replaced, as it was before the first install (a link's
  target, a kept copy in ``originals/``, or nothing there);
* ``written``: the digest of what the agent writes (or is about to write) to the kubelet's config
  and flags;
* ``made_dirs``: the directories it creates, recorded before they are made; ``flag_files``: the
  kubelet flags files it edits (uninstall takes only its own flags out of one edited since);
* ``before``: the kubelet's config and flags as the change under way found them (copies in
  ``before/``), for its rollback; ``restart_due``: the kubelet service owed a restart (and a health
  check) by the change under way. Both are cleared once the kubelet is confirmed healthy, or
  rolled back;
* ``watchdog``: the node's own rollback armed for the restart under way (its transient unit);
  ``healed``: what it did when it fired, until the agent's next run reports it
  (:mod:`credprovider.tool.agent.watchdog`).

A state that is not the agent's own (a forged or damaged one) is refused, changing nothing
(docs/security.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Final

from credprovider.paths import AGENT_BUNDLE_HOMES, AGENT_HOME
from credprovider.tool.change.durable import (
    remove_file,
    remove_tree,
    rename_into_place,
    replace_file,
    temporary_for,
)
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.access import FileProblem, read_bytes
from credprovider.tool.node.root import NodeRoot, RootPathError
from credprovider.tool.node.structured import JsonTooDeep, bounded_json

STATE: Final = f"{AGENT_HOME}/state.json"
ORIGINALS: Final = f"{AGENT_HOME}/originals"
BEFORE: Final = f"{AGENT_HOME}/before"
_COPY: Final = re.compile(f"(?:{re.escape(ORIGINALS)}|{re.escape(BEFORE)})/[0-9a-f]{{16}}")

State = dict[str, Any]


def host(root: str, path: str) -> Path:
    """Where the node's ``path`` is under ``root``, to replace or remove (a last link kept)."""
    return NodeRoot.at(root).host(path, follow=False)


def read_host(root: str, path: str) -> Path:
    """Where the node's ``path`` is under ``root``, to read (every link resolved inside it)."""
    return NodeRoot.at(root).host(path)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def empty() -> State:
    return {"version": "", "originals": {}, "written": {}, "made_dirs": []}


def load(root: str) -> State:
    path = read_host(root, STATE)
    if not os.path.lexists(path):
        return empty()
    try:
        state = bounded_json(read_bytes(str(path)))
    except (ValueError, FileProblem, JsonTooDeep):
        state = None
    if not isinstance(state, dict) or not _is_state(state):
        raise NodeChangeError(
            f"{STATE} is not the agent's state (edited or truncated): nothing is changed; "
            "restore it, or remove it to make the agent start afresh"
        )
    directory = _a_directory(root, state)
    if directory:  # the agent replaces files and links only: forged, or changed under it
        raise NodeChangeError(
            f"{STATE} is not the agent's state (it records {directory}, a directory, as a file "
            "the agent replaced): nothing is changed; restore it, or remove it to make the agent "
            "start afresh"
        )
    state.setdefault("made_dirs", [])
    return state


def _a_directory(root: str, state: State) -> str:
    """The first path the state records as a replaced file that is a directory on the node."""
    recorded = [*state["originals"], *state.get("before", {}), *state["written"]]
    for path in recorded:
        try:
            where = host(root, path)
        except (OSError, ValueError, RootPathError):
            continue
        if where.is_dir() and not where.is_symlink():
            return str(path)
    return ""


# The agent's own directories above its state: only the agent makes them.
HOME_CHAIN: Final = (AGENT_HOME, str(Path(AGENT_HOME).parent))


def save(root: str, state: State) -> None:
    """The state, flushed: what it records is on the disk before anything it describes is done.
    The first save makes the agent's home whole beside its place and renames it in: a kill leaves
    the home with its state, or only a temporary that :func:`recover_home` removes."""
    data = json.dumps(state, indent=2, sort_keys=True).encode()
    path = host(root, STATE)
    if os.path.isdir(path.parent):
        replace_file(path, data)
        return
    missing = [p for p in HOME_CHAIN if not os.path.lexists(host(root, p))]
    top = missing[-1]
    partial = temporary_for(host(root, top))
    remove_tree(partial)
    replace_file(partial / os.path.relpath(STATE, top), data)
    rename_into_place(partial, host(root, top))


def recover_home(root: str) -> None:
    """What a killed first save or final removal of the home left beside it goes."""
    for directory in HOME_CHAIN:
        remove_tree(temporary_for(host(root, directory)))


def home_top(state: State) -> str:
    """The highest of the agent's home directories that the agent made ('' if none)."""
    made = set(state.get("made_dirs", []))
    return next((d for d in reversed(HOME_CHAIN) if d in made), "")


def remove_home(root: str, state: State) -> None:
    """The state and the home the agent made, in one rename (then removed at leisure); a home
    it did not make keeps its directories, its state removed."""
    top = home_top(state)
    if not top:
        remove_file(host(root, STATE))
        return
    partial = temporary_for(host(root, top))
    remove_tree(partial)
    rename_into_place(host(root, top), partial)
    remove_tree(partial)


def keep(root: str, where: str, path: str) -> dict[str, Any]:
    """``path`` as it is now: a link's target, a copy kept (flushed) under ``where``, or
    absent."""
    found = host(root, path)
    if found.is_symlink():
        return {"link": os.readlink(found)}
    if found.is_file():
        name = f"{where}/{hashlib.sha256(path.encode()).hexdigest()[:16]}"
        replace_file(host(root, name), found.read_bytes(), found.stat().st_mode & 0o7777)
        return {"file": name, "mode": found.stat().st_mode}
    return {"absent": True}


def keep_data(root: str, where: str, path: str, data: bytes, mode: int) -> dict[str, Any]:
    """A kept entry (as :func:`keep` makes) recording ``data`` with ``mode`` for ``path``, as
    though the node had held it."""
    name = f"{where}/{hashlib.sha256(path.encode()).hexdigest()[:16]}"
    replace_file(host(root, name), data, mode)
    return {"file": name, "mode": stat.S_IFREG | mode}


def kept_bytes(root: str, kept: dict[str, Any]) -> bytes | None:
    """The content a kept entry records (``None``: a link, or nothing)."""
    if "file" not in kept:
        return None
    return read_host(root, "/" + str(kept["file"]).lstrip("/")).read_bytes()


def matches(root: str, path: str, kept: dict[str, Any]) -> bool:
    """Is ``path`` now exactly as ``kept`` records it?"""
    found = host(root, path)
    if "link" in kept:
        return found.is_symlink() and os.readlink(found) == kept["link"]
    if "file" in kept:
        return (
            not found.is_symlink()
            and found.is_file()
            and found.read_bytes() == kept_bytes(root, kept)
        )
    return not os.path.lexists(found)


def _node_path(value: object) -> bool:
    """An absolute, normalized node path (no ``..``, no empty or ``.`` part, no NUL)."""
    return (
        isinstance(value, str)
        and value.startswith("/")
        and not value.startswith("//")
        and "\0" not in value
        and os.path.normpath(value) == value
        and "/../" not in f"{value}/"
    )


def _file_path(value: object) -> bool:
    """A node path the agent replaces (a file or a link): at least two levels deep, never ``/``,
    ``/etc`` or ``/var``, which hold everything else (a directory it made, emptied and removed
    when it goes, may be one level deep)."""
    return _node_path(value) and str(value).count("/") >= 2


def _is_kept(value: object) -> bool:
    """A kept entry: a link's target, a copy in the agent's own directories (with its mode), or
    nothing there."""
    if not isinstance(value, dict):
        return False
    if "link" in value:
        return isinstance(value["link"], str) and "\0" not in value["link"]
    if "file" in value:
        kept = value["file"]
        return (
            isinstance(kept, str)
            and _COPY.fullmatch("/" + kept.lstrip("/")) is not None
            and isinstance(value.get("mode"), int)
            and not isinstance(value.get("mode"), bool)
            and value["mode"] & 0o7000 == 0  # never set-uid, set-gid or sticky
        )
    return value.get("absent") is True


def _is_state(state: dict[str, Any]) -> bool:
    """The agent's own state: every path a normalized node path, every kept copy in its own
    directory (a forged state could otherwise name a file to copy over a node file, or one to
    delete)."""
    originals, written = state.get("originals"), state.get("written")
    before = state.get("before", {})
    made = state.get("made_dirs", [])
    flag_files = state.get("flag_files", [])
    return (
        isinstance(originals, dict)
        and isinstance(written, dict)
        and isinstance(before, dict)
        and isinstance(made, list)
        and isinstance(state.get("version", ""), str)
        and isinstance(state.get("previous", ""), str)
        and isinstance(state.get("restart_due", ""), str)
        and all(_file_path(path) and _is_kept(kept) for path, kept in originals.items())
        and all(
            _file_path(path) and _is_kept(kept) and isinstance(kept.get("written", ""), str | None)
            for path, kept in before.items()
        )
        and all(_file_path(path) and isinstance(sha, str) for path, sha in written.items())
        and all(_node_path(path) for path in made)
        and isinstance(flag_files, list)
        and all(_file_path(path) for path in flag_files)
        and all(state.get(key, AGENT_HOME) in AGENT_BUNDLE_HOMES for key in _HOMES)
        and _is_watchdog(state.get("watchdog", {}))
        and _is_said(state.get("healed", {}))
    )


# The homes of its bundles a state names (agent/apply.py): uninstall removes what is in them, so
# only the agent's own places are taken.
_HOMES: Final = ("bundles", "retired", "retiring")


# The node's own rollback, armed for a restart (agent/watchdog.py): a forged name could otherwise
# make the agent stop any unit.
WATCHDOG_UNIT: Final = re.compile(r"credprovider-rollback-[0-9a-f]{12}\.service")


def _is_watchdog(value: object) -> bool:
    return isinstance(value, dict) and (
        not value
        or (
            isinstance(value.get("unit"), str)
            and WATCHDOG_UNIT.fullmatch(value["unit"]) is not None
            and isinstance(value.get("armed"), str)
        )
    )


def _is_said(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(key, str) and isinstance(text, str) for key, text in value.items()
    )


def record_made_dirs(root: str, state: State, path: str) -> None:
    """Record the directories above ``path`` that do not exist yet (uninstall removes them), as
    the node names them once its links are resolved inside the root."""
    node = NodeRoot.at(root)
    top = Path(node.path)
    parent = node.host(str(Path(path).parent))
    missing: list[str] = []
    while parent != top and not os.path.lexists(parent):
        missing.append(node.node_path(parent))
        parent = parent.parent
    made: list[str] = state.setdefault("made_dirs", [])
    made += [directory for directory in missing if directory not in made]

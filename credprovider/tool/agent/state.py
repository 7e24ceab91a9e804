"""What the node agent must remember about a node, on the node's disk (``AGENT_HOME/state.json``,
not on tmpfs: a pod restart or a reboot neither repeats nor forgets anything). What a change will
do to what the node had is recorded here, and flushed, before the change touches the node; the
change itself (its links and the kubelet's config and flags) is then journaled beside it in the
one journal's format (:data:`JOURNAL`, :mod:`credprovider.tool.change.journalformat`), whose ops must be
paths this state records, with the content it recorded. A run killed at any instant is finished
or undone by the next one.

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

It is typed (:class:`AgentState`; its JSON on the disk is the same as the earlier versions'), and
what each path it kept was is the one record every change of credprovider's keeps,
:class:`~credprovider.tool.change.kept.Was`, put back by the same op as an undo's: restoring is
``perform(restore_op(...))``, checking is ``restore_op(...).done()``. It is read only through
:func:`credprovider.tool.agent.statecheck.load`, which refuses a state that is not the agent's own.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from credprovider.paths import AGENT_BUNDLE_HOMES, AGENT_HOME
from credprovider.tool.change.confine import absolute
from credprovider.tool.change.durable import (
    remove_file,
    remove_tree,
    remove_whole,
    removed_on_failure,
    rename_into_place,
    replace_file,
    temporary_for,
)
from credprovider.tool.change.engine import Op
from credprovider.tool.change.journalformat import journal_for
from credprovider.tool.change.kept import MAX_KEPT_FILE, Prior, Was
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.access import FileProblem, UnreadableError, read_bytes
from credprovider.tool.node.root import NodeRoot

STATE: Final = f"{AGENT_HOME}/state.json"
# Its change under way: its links and kubelet inputs, in the one journal's format (change/journal.py)
JOURNAL: Final = str(journal_for(STATE))
ORIGINALS: Final = f"{AGENT_HOME}/originals"
BEFORE: Final = f"{AGENT_HOME}/before"
_COPY: Final = re.compile(f"(?:{re.escape(ORIGINALS)}|{re.escape(BEFORE)})/[0-9a-f]{{16}}")


def _was_json(was: Was) -> dict[str, Any]:
    """A kept entry as the state writes it (the same as the earlier versions')."""
    if was.prior is Prior.LINK:
        return {"link": was.target}
    if was.prior is Prior.KEPT:
        return {"file": str(was.copy), "mode": was.mode}
    return {"absent": True}


def _parse_was(value: object) -> Was | None:
    """A kept entry as the agent writes it, or ``None`` (a forged one: see :func:`load`)."""
    if not isinstance(value, dict):
        return None
    if "link" in value:
        link = value["link"]
        return Was(Prior.LINK, link) if isinstance(link, str) and "\0" not in link else None
    if "file" in value:
        copy, mode = value["file"], value.get("mode")
        if not (
            isinstance(copy, str)
            and _COPY.fullmatch("/" + copy.lstrip("/")) is not None
            and type(mode) is int
            and mode & 0o7000 == 0  # never set-uid, set-gid or sticky
        ):
            return None
        return Was(Prior.KEPT, copy=Path("/" + copy.lstrip("/")), mode=mode & 0o777)
    return Was(Prior.ABSENT) if value.get("absent") is True else None


def _parse_before(value: object) -> tuple[Was, str | None] | None:
    """A ``before`` entry: what the path was, and the digest of what the agent had written there
    (``None``: nothing of the agent's)."""
    written = value.get("written") if isinstance(value, dict) else None
    was = _parse_was(value)
    return (was, written) if was is not None and isinstance(written, str | None) else None


def restoring(root: NodeRoot, path: str, was: Was) -> Op | str:
    """The engine's op that puts ``path`` back as ``was`` records it (its kept copy reached under
    ``root``), or why it cannot be (:meth:`Was.restore`)."""
    copy = root.host(str(was.copy), follow=False) if was.copy is not None else None
    return replace(was, copy=copy).restore(root.host(path, follow=False))


def restore_op(root: NodeRoot, path: str, was: Was) -> Op:
    """:func:`restoring`'s op; a copy changed since :func:`load` checked it is refused in one line."""
    found = restoring(root, path, was)
    if isinstance(found, str):
        raise NodeChangeError(
            f"{path} was not put back: {found} since the agent read its state; nothing more is "
            "changed; check the copy, then run the agent again"
        )
    return found


@dataclass(frozen=True)
class Armed:
    """The node's own rollback armed for the restart under way: its transient unit, and when."""

    unit: str
    at: str


@dataclass(frozen=True)
class Healed:
    """What the node's own rollback did when it fired, and when, until the agent's next run says it."""

    at: str
    detail: str


@dataclass
class AgentState:
    """The agent's memory of a node (see the module), as it is on the node's disk."""

    version: str = ""
    previous: str = ""
    originals: dict[str, Was] = field(default_factory=dict)
    written: dict[str, str] = field(default_factory=dict)
    made_dirs: list[str] = field(default_factory=list)
    flag_files: list[str] = field(default_factory=list)
    before: dict[str, Was] | None = None  # None: no change under way
    # what the agent had written at each ``before`` path (its digest; not there: nothing of its own)
    before_written: dict[str, str] = field(default_factory=dict)
    restart_due: str = ""
    watchdog: Armed | None = None
    healed: Healed | None = None
    bundles: str = ""  # "": AGENT_HOME
    retired: str = ""
    retiring: str = ""

    @property
    def bundle_home(self) -> str:
        return self.bundles or AGENT_HOME

    @property
    def bundle_homes(self) -> tuple[str, ...]:
        """Where the agent's bundles are on the node (versions/, current): the home the state
        names (validated: one of AGENT_BUNDLE_HOMES), then one it moved away from, not yet
        emptied."""
        return tuple(home for home in (self.bundle_home, self.retired) if home)

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "version": self.version,
            "originals": {path: _was_json(was) for path, was in self.originals.items()},
            "written": dict(self.written),
            "made_dirs": list(self.made_dirs),
        }
        if self.before is not None:
            found["before"] = {
                path: _was_json(was) | {"written": self.before_written.get(path)}
                for path, was in self.before.items()
            }
        optional = {
            "previous": self.previous, "flag_files": self.flag_files,
            "restart_due": self.restart_due,
            "watchdog": {"unit": self.watchdog.unit, "armed": self.watchdog.at}
            if self.watchdog else {},
            "healed": {"at": self.healed.at, "detail": self.healed.detail} if self.healed else {},
            "bundles": self.bundles, "retired": self.retired, "retiring": self.retiring,
        }  # fmt: skip
        return found | {key: value for key, value in optional.items() if value}

    @staticmethod
    def parse(data: object) -> AgentState | None:
        """The agent's own state, or ``None``: every path a normalized node path, every kept copy
        in its own directory (a forged state could otherwise name a file to copy over a node file,
        or one to delete)."""
        if not isinstance(data, dict):
            return None
        originals, written = data.get("originals"), data.get("written")
        before, made = data.get("before"), data.get("made_dirs", [])
        flag_files = data.get("flag_files", [])
        armed, healed = _armed(data.get("watchdog", {})), _healed(data.get("healed", {}))
        strings = ("version", "previous", "restart_due")
        if not (
            isinstance(originals, dict)
            and isinstance(written, dict)
            and isinstance(before, dict | None)
            and isinstance(made, list)
            and isinstance(flag_files, list)
            and all(isinstance(data.get(key, ""), str) for key in strings)
            and all(absolute(path) and isinstance(sha, str) for path, sha in written.items())
            and all(absolute(path, depth=1) for path in made)  # a directory it made
            and all(absolute(path) for path in flag_files)
            and all(data.get(key, AGENT_HOME) in AGENT_BUNDLE_HOMES for key in _HOMES)
            and armed is not False
            and healed is not False
        ):
            return None
        kept = {path: _parse_was(value) for path, value in originals.items()}
        kept_before = {path: _parse_before(value) for path, value in (before or {}).items()}
        every = [*kept.items(), *kept_before.items()]
        if not all(absolute(path) and entry is not None for path, entry in every):
            return None
        befores = {path: entry for path, entry in kept_before.items() if entry is not None}
        return AgentState(
            version=data.get("version", ""),
            previous=data.get("previous", ""),
            originals={path: entry for path, entry in kept.items() if entry is not None},
            written=dict(written),
            made_dirs=list(made),
            flag_files=list(flag_files),
            before=None if before is None else {path: was for path, (was, _) in befores.items()},
            before_written={path: sha for path, (_, sha) in befores.items() if sha is not None},
            restart_due=data.get("restart_due", ""),
            watchdog=armed if isinstance(armed, Armed) else None,
            healed=healed if isinstance(healed, Healed) else None,
            **{key: data.get(key, "") for key in _HOMES},
        )


def state_there(root: NodeRoot) -> bool:
    """The agent's state (:data:`STATE`) is on the node under ``root``, as a name: what it holds,
    :func:`load` says."""
    return os.path.lexists(root.host(STATE, follow=False))


def journal_left(root: NodeRoot) -> bool:
    """A killed run left its journal (:data:`JOURNAL`) on the node under ``root``."""
    return os.path.lexists(root.host(JOURNAL, follow=False))


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_NOT_KEPT: Final = "nothing more is changed; make it a regular file a kubelet reads, or remove it"


# The agent's own directories above its state: only the agent makes them.
HOME_CHAIN: Final = (AGENT_HOME, str(Path(AGENT_HOME).parent))


def save(root: NodeRoot, state: AgentState) -> None:
    """The state, flushed: what it records is on the disk before anything it describes is done.
    The first save makes the agent's home whole beside its place and renames it in: a kill leaves
    the home with its state, or only a temporary that :func:`recover_home` removes."""
    data = json.dumps(state.as_json(), indent=2, sort_keys=True).encode()
    path = root.host(STATE, follow=False)
    if os.path.isdir(path.parent):
        replace_file(path, data)
        return
    missing = [p for p in HOME_CHAIN if not os.path.lexists(root.host(p, follow=False))]
    top = missing[-1]
    partial = temporary_for(root.host(top, follow=False))
    remove_tree(partial)
    with removed_on_failure(partial):
        replace_file(partial / os.path.relpath(STATE, top), data)
        rename_into_place(partial, root.host(top, follow=False))


def recover_home(root: NodeRoot) -> None:
    """What a killed first save or final removal of the home left beside it goes."""
    for directory in HOME_CHAIN:
        remove_tree(temporary_for(root.host(directory, follow=False)))


def home_top(state: AgentState) -> str:
    """The highest of the agent's home directories that the agent made ('' if none)."""
    made = set(state.made_dirs)
    return next((d for d in reversed(HOME_CHAIN) if d in made), "")


def remove_home(root: NodeRoot, state: AgentState) -> None:
    """The state and the home the agent made, in one rename (then removed at leisure); a home
    it did not make keeps its directories, its state removed."""
    top = home_top(state)
    if not top:
        remove_file(root.host(STATE, follow=False))
        return
    remove_whole(root.host(top, follow=False))


def keep(root: NodeRoot, where: str, path: str) -> Was:
    """``path`` as it is now: a link's target, a copy kept (flushed) under ``where`` with the
    file's mode recorded, or absent."""
    found = root.host(path, follow=False)
    if found.is_symlink():
        return Was(Prior.LINK, os.readlink(found))
    if found.is_file():
        try:
            data = read_bytes(str(found), limit=MAX_KEPT_FILE)
        except (FileProblem, UnreadableError) as exc:
            raise NodeChangeError(f"{path} cannot be kept ({exc}): {_NOT_KEPT}") from None
        return keep_data(root, where, path, data, found.stat().st_mode & 0o7777)
    return Was(Prior.ABSENT)


def keep_data(root: NodeRoot, where: str, path: str, data: bytes, mode: int) -> Was:
    """A kept entry (as :func:`keep` makes) recording ``data`` with ``mode`` for ``path``, as
    though the node had held it. The copy is the agent's alone (0600): its mode is recorded."""
    name = f"{where}/{hashlib.sha256(path.encode()).hexdigest()[:16]}"
    replace_file(root.host(name, follow=False), data, 0o600)
    return Was(Prior.KEPT, copy=Path(name), mode=mode)


# The homes of its bundles a state names (agent/apply.py): uninstall removes what is in them, so
# only the agent's own places are taken.
_HOMES: Final = ("bundles", "retired", "retiring")


# A bundle version as the agent places it (versions/<version>): nothing that could leave it.
_VERSION: Final = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}")


def placed_version(version: str) -> bool:
    """``version`` names a bundle as the agent places it (``versions/<version>``, never out of it)."""
    return _VERSION.fullmatch(version) is not None and ".." not in version


# The node's own rollback, armed for a restart (agent/watchdog.py): a forged name could otherwise
# make the agent stop any unit.
WATCHDOG_UNIT: Final = re.compile(r"credprovider-rollback-[0-9a-f]{12}\.service")


def _armed(value: object) -> Armed | bool:
    """The armed rollback a state records (``True``: none; ``False``: not one the agent arms)."""
    if value == {}:
        return True
    if not isinstance(value, dict):
        return False
    unit, at = value.get("unit"), value.get("armed")
    if isinstance(unit, str) and WATCHDOG_UNIT.fullmatch(unit) and isinstance(at, str):
        return Armed(unit, at)
    return False


def _healed(value: object) -> Healed | bool:
    """What the rollback did, as a state records it (``True``: nothing; ``False``: damaged)."""
    if value == {}:
        return True
    if not isinstance(value, dict) or not all(isinstance(t, str) for t in value.values()):
        return False
    return Healed(value.get("at", "?"), value.get("detail", ""))


def record_made_dirs(root: NodeRoot, state: AgentState, path: str) -> None:
    """Record the directories above ``path`` that do not exist yet (uninstall removes them), as
    the node names them once its links are resolved inside the root."""
    top = Path(root.path)
    parent = root.host(str(Path(path).parent))
    missing: list[str] = []
    while parent != top and not os.path.lexists(parent):
        missing.append(root.node_path(parent))
        parent = parent.parent
    state.made_dirs += [directory for directory in missing if directory not in state.made_dirs]

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

It is typed (:class:`AgentState`; its JSON on the disk is the same as the earlier versions'), and
each path it kept is a :class:`Kept` whose :meth:`Kept.op` is the node-change engine's op that puts
the path back: restoring is ``perform(kept.op(...))``, checking is ``kept.op(...).done()``. A state
that is not the agent's own (a forged or damaged one) is refused, changing nothing
(docs/security.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
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
from credprovider.tool.change.engine import Kind, Op
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.access import FileProblem, read_bytes
from credprovider.tool.node.root import NodeRoot, RootPathError
from credprovider.tool.node.structured import JsonTooDeep, bounded_json

STATE: Final = f"{AGENT_HOME}/state.json"
ORIGINALS: Final = f"{AGENT_HOME}/originals"
BEFORE: Final = f"{AGENT_HOME}/before"
_COPY: Final = re.compile(f"(?:{re.escape(ORIGINALS)}|{re.escape(BEFORE)})/[0-9a-f]{{16}}")


@dataclass(frozen=True)
class Kept:
    """A node path as the agent found it: a link's target, a copy kept (flushed) in the agent's
    own directories with its mode, or nothing there. A ``before`` entry also says what the agent
    had written there (``written``: its digest; ``None``: nothing of the agent's)."""

    link: str | None = None
    copy: str | None = None  # the kept copy's node path (JSON ``file``)
    mode: int = 0  # the copy's st_mode
    written: str | None = None

    @property
    def absent(self) -> bool:
        return self.link is None and self.copy is None

    def op(self, root: NodeRoot, path: str) -> Op:
        """The engine's op that puts ``path`` back as this records it: restoring is
        ``perform(op)``, checking is ``op.done()``."""
        where = root.host(path, follow=False)
        if self.link is not None:
            return Op(Kind.LINK, where, target=self.link)
        if self.copy is not None:
            return Op(Kind.FILE, where, self.data(root) or b"", self.mode & 0o7777)
        return Op(Kind.ABSENT, where)

    def data(self, root: NodeRoot) -> bytes | None:
        """The content a kept copy holds (``None``: a link, or nothing)."""
        if self.copy is None:
            return None
        return root.host("/" + self.copy.lstrip("/")).read_bytes()

    def as_json(self, before: bool = False) -> dict[str, Any]:
        found: dict[str, Any] = (
            {"link": self.link}
            if self.link is not None
            else {"file": self.copy, "mode": self.mode}
            if self.copy is not None
            else {"absent": True}
        )
        return found | ({"written": self.written} if before else {})

    @staticmethod
    def parse(value: object, before: bool = False) -> Kept | None:
        """A kept entry as the agent writes it, or ``None`` (a forged one: see :func:`load`)."""
        if not isinstance(value, dict):
            return None
        written = value.get("written") if before else None
        if before and not isinstance(written, str | None):
            return None
        if "link" in value:
            link = value["link"]
            ok = isinstance(link, str) and "\0" not in link
            return Kept(link=link, written=written) if ok else None
        if "file" in value:
            copy, mode = value["file"], value.get("mode")
            if not (
                isinstance(copy, str)
                and _COPY.fullmatch("/" + copy.lstrip("/")) is not None
                and type(mode) is int
                and mode & 0o7000 == 0  # never set-uid, set-gid or sticky
            ):
                return None
            return Kept(copy=copy, mode=mode, written=written)
        return Kept(written=written) if value.get("absent") is True else None


@dataclass
class AgentState:
    """The agent's memory of a node (see the module), as it is on the node's disk."""

    version: str = ""
    previous: str = ""
    originals: dict[str, Kept] = field(default_factory=dict)
    written: dict[str, str] = field(default_factory=dict)
    made_dirs: list[str] = field(default_factory=list)
    flag_files: list[str] = field(default_factory=list)
    before: dict[str, Kept] | None = None  # None: no change under way
    restart_due: str = ""
    watchdog: dict[str, str] = field(default_factory=dict)  # {"unit", "armed"} while armed
    healed: dict[str, str] = field(default_factory=dict)  # {"at", "detail"} until said
    bundles: str = ""  # "": AGENT_HOME
    retired: str = ""
    retiring: str = ""

    @property
    def bundle_home(self) -> str:
        return self.bundles or AGENT_HOME

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "version": self.version,
            "originals": {path: kept.as_json() for path, kept in self.originals.items()},
            "written": dict(self.written),
            "made_dirs": list(self.made_dirs),
        }
        if self.before is not None:
            found["before"] = {path: kept.as_json(True) for path, kept in self.before.items()}
        optional = {
            "previous": self.previous, "flag_files": self.flag_files,
            "restart_due": self.restart_due, "watchdog": self.watchdog, "healed": self.healed,
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
        strings = ("version", "previous", "restart_due")
        if not (
            isinstance(originals, dict)
            and isinstance(written, dict)
            and isinstance(before, dict | None)
            and isinstance(made, list)
            and isinstance(flag_files, list)
            and all(isinstance(data.get(key, ""), str) for key in strings)
            and all(_file_path(path) and isinstance(sha, str) for path, sha in written.items())
            and all(_node_path(path) for path in made)
            and all(_file_path(path) for path in flag_files)
            and all(data.get(key, AGENT_HOME) in AGENT_BUNDLE_HOMES for key in _HOMES)
            and _is_watchdog(data.get("watchdog", {}))
            and _is_said(data.get("healed", {}))
        ):
            return None
        kept = {path: Kept.parse(value) for path, value in originals.items()}
        kept_before = {path: Kept.parse(value, True) for path, value in (before or {}).items()}
        every = [*kept.items(), *kept_before.items()]
        if not all(_file_path(path) and entry is not None for path, entry in every):
            return None
        return AgentState(
            version=data.get("version", ""),
            previous=data.get("previous", ""),
            originals={path: entry for path, entry in kept.items() if entry is not None},
            written=dict(written),
            made_dirs=list(made),
            flag_files=list(flag_files),
            before=None
            if before is None
            else {path: entry for path, entry in kept_before.items() if entry is not None},
            restart_due=data.get("restart_due", ""),
            watchdog=dict(data.get("watchdog", {})),
            healed=dict(data.get("healed", {})),
            **{key: data.get(key, "") for key in _HOMES},
        )


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load(root: NodeRoot) -> AgentState:
    path = root.host(STATE)
    if not os.path.lexists(path):
        return AgentState()
    try:
        found = AgentState.parse(bounded_json(read_bytes(str(path))))
    except (ValueError, FileProblem, JsonTooDeep):
        found = None
    if found is None:
        raise NodeChangeError(
            f"{STATE} is not the agent's state (edited or truncated): nothing is changed; "
            "restore it, or remove it to make the agent start afresh"
        )
    directory = _a_directory(root, found)
    if directory:  # the agent replaces files and links only: forged, or changed under it
        raise NodeChangeError(
            f"{STATE} is not the agent's state (it records {directory}, a directory, as a file "
            "the agent replaced): nothing is changed; restore it, or remove it to make the agent "
            "start afresh"
        )
    return found


def _a_directory(root: NodeRoot, state: AgentState) -> str:
    """The first path the state records as a replaced file that is a directory on the node."""
    recorded = [*state.originals, *(state.before or {}), *state.written]
    for path in recorded:
        try:
            where = root.host(path, follow=False)
        except (OSError, ValueError, RootPathError):
            continue
        if where.is_dir() and not where.is_symlink():
            return str(path)
    return ""


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
    partial = temporary_for(root.host(top, follow=False))
    remove_tree(partial)
    rename_into_place(root.host(top, follow=False), partial)
    remove_tree(partial)


def keep(root: NodeRoot, where: str, path: str, written: str | None = None) -> Kept:
    """``path`` as it is now: a link's target, a copy kept (flushed) under ``where``, or
    absent (``written``: for a ``before`` entry, what the agent had written there)."""
    found = root.host(path, follow=False)
    if found.is_symlink():
        return Kept(link=os.readlink(found), written=written)
    if found.is_file():
        name = f"{where}/{hashlib.sha256(path.encode()).hexdigest()[:16]}"
        replace_file(
            root.host(name, follow=False), found.read_bytes(), found.stat().st_mode & 0o7777
        )
        return Kept(copy=name, mode=found.stat().st_mode, written=written)
    return Kept(written=written)


def keep_data(root: NodeRoot, where: str, path: str, data: bytes, mode: int) -> Kept:
    """A kept entry (as :func:`keep` makes) recording ``data`` with ``mode`` for ``path``, as
    though the node had held it."""
    name = f"{where}/{hashlib.sha256(path.encode()).hexdigest()[:16]}"
    replace_file(root.host(name, follow=False), data, mode)
    return Kept(copy=name, mode=stat.S_IFREG | mode)


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

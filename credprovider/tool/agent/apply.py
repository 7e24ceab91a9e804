"""The node agent applying its plan (:mod:`credprovider.tool.agent.plan`) to the node under
``root``, and taking it off again.

What it must remember lives on the node's disk, in ``AGENT_HOME/state.json`` (not on tmpfs, so a pod
restart or a reboot neither repeats nor forgets anything): each file or link it replaced, as it was
before the first install (kept under ``AGENT_HOME/originals/``), and a digest of what it wrote.
Every file is replaced by rename. When the kubelet must restart, ``restart(service)`` does it and
``healthy()`` must then say so; if not, the config and flags files are put back as they were before
this run, the kubelet is restarted again, and the result says so (a rollback).

``uninstall`` restores every file and link to its state before the first install, byte for byte, and
removes what the agent placed. A file someone else changed since the agent wrote it is reported and
left as it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from credprovider.tool.agent.plan import AgentPlan
from credprovider.tool.agent.platforms import AGENT_HOME
from credprovider.tool.change.durable import (
    replace_file,
    replace_link,
    sync_directory,
    sync_tree,
    temporary_for,
)
from credprovider.tool.install_config import NodeChangeError
from credprovider.tool.node.root import NodeRoot
from credprovider.tool.nodefiles import FileProblem, read_bytes
from credprovider.tool.structured import JsonTooDeep, bounded_json

STATE: Final = f"{AGENT_HOME}/state.json"
ORIGINALS: Final = f"{AGENT_HOME}/originals"
_ORIGINAL_COPY: Final = re.compile(re.escape(ORIGINALS) + "/[0-9a-f]{16}")

Restart = Callable[[str], None]
Healthy = Callable[[], str | None]  # None: healthy; else what is wrong


@dataclass
class Outcome:
    """What a run did: ``result`` is installed, unchanged, refused, rolled back or uninstalled."""

    result: str
    changed: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # someone else's change, left as it is
    detail: str = ""


def _host(root: str, path: str) -> Path:
    """Where the node's ``path`` is under ``root``, to replace or remove (a last link kept)."""
    return NodeRoot.at(root).host(path, follow=False)


def _read_host(root: str, path: str) -> Path:
    """Where the node's ``path`` is under ``root``, to read (every link resolved inside it)."""
    return NodeRoot.at(root).host(path)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_state(root: str) -> dict[str, Any]:
    path = _read_host(root, STATE)
    if not os.path.lexists(path):
        return {"version": "", "originals": {}, "written": {}}
    try:
        state = bounded_json(read_bytes(str(path)))
    except (ValueError, FileProblem, JsonTooDeep):
        state = None
    if not isinstance(state, dict) or not _is_state(state):
        raise NodeChangeError(
            f"{STATE} is not the agent's state (edited or truncated): nothing is changed; "
            "restore it, or remove it to make the agent start afresh"
        )
    return state


def _node_path(value: object) -> bool:
    """An absolute, normalized node path (no ``..``, no empty or ``.`` part, no NUL)."""
    return (
        isinstance(value, str)
        and value.startswith("/")
        and "\0" not in value
        and os.path.normpath(value) == value
        and "/../" not in f"{value}/"
    )


def _is_original(value: object) -> bool:
    """A recorded original: a link's target, a copy the agent keeps in ``ORIGINALS`` (with its
    mode), or nothing there."""
    if not isinstance(value, dict):
        return False
    if "link" in value:
        return isinstance(value["link"], str) and "\0" not in value["link"]
    if "file" in value:
        kept = value["file"]
        return (
            isinstance(kept, str)
            and _ORIGINAL_COPY.fullmatch("/" + kept.lstrip("/")) is not None
            and isinstance(value.get("mode"), int)
            and not isinstance(value.get("mode"), bool)
        )
    return value.get("absent") is True


def _is_state(state: object) -> bool:
    """The agent's own state: every path a normalized node path, every kept copy in its own
    directory (a forged state could otherwise name a file to copy over a node file, or one to
    delete)."""
    if not isinstance(state, dict):
        return False
    originals, written = state.get("originals"), state.get("written")
    made = state.get("made_dirs", [])
    return (
        isinstance(originals, dict)
        and isinstance(written, dict)
        and isinstance(made, list)
        and isinstance(state.get("version", ""), str)
        and isinstance(state.get("previous", ""), str)
        and all(_node_path(path) and _is_original(kept) for path, kept in originals.items())
        and all(_node_path(path) and isinstance(sha, str) for path, sha in written.items())
        and all(_node_path(path) for path in made)
    )


def _save_state(root: str, state: dict[str, Any]) -> None:
    _put_bytes(_host(root, STATE), json.dumps(state, indent=2, sort_keys=True).encode())


def _put_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    replace_file(path, data, mode)


def _put_link(path: Path, target: str) -> None:
    replace_link(path, target)


def _remember(root: str, state: dict[str, Any], path: str) -> None:
    """Keep ``path`` as it is before the agent first replaces it (a file, a link, or nothing)."""
    if path in state["originals"]:
        return
    host = _host(root, path)
    if host.is_symlink():
        state["originals"][path] = {"link": os.readlink(host)}
    elif host.is_file():
        name = f"{ORIGINALS}/{hashlib.sha256(path.encode()).hexdigest()[:16]}"
        kept = _host(root, name)
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(host, kept)
        state["originals"][path] = {"file": name, "mode": host.stat().st_mode}
    else:
        state["originals"][path] = {"absent": True}


def _made_dirs(root: str, state: dict[str, Any], path: str) -> None:
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


def _change(
    root: str, plan: AgentPlan, bundle: Path, state: dict[str, Any], outcome: Outcome
) -> dict[str, bytes | None]:
    """Each step of ``plan``, every original recorded in ``state`` before it is replaced; the
    config and flags files as this run found them (for a rollback)."""
    for step in plan.steps:
        if step.action == "switch":
            previous = _host(root, step.path)
            if previous.is_symlink():
                state["previous"] = os.readlink(previous)
        if step.action == "place":
            _made_dirs(root, state, step.path)
            target = _host(root, step.path)
            partial = temporary_for(target)
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(bundle, partial, symlinks=True)
            sync_tree(partial)
            os.replace(partial, target)
            sync_directory(target.parent)
        elif step.action in ("switch", "link"):
            _remember(root, state, step.path)
            _made_dirs(root, state, step.path)
            _put_link(_host(root, step.path), step.target)
        else:
            continue
        outcome.changed.append(step.path)
    before: dict[str, bytes | None] = {}
    for path, text in ((plan.config_path, plan.config_text), (plan.flag_file, plan.flag_text)):
        if text is None:
            continue
        host = _host(root, path)
        readable = _read_host(root, path)
        before[path] = readable.read_bytes() if readable.is_file() else None
        _remember(root, state, path)
        _made_dirs(root, state, path)
        _put_bytes(host, text.encode())
        state["written"][path] = _digest(text.encode())
        outcome.changed.append(path)
    return before


def _prune_versions(root: str, state: dict[str, Any]) -> None:
    """Keep the bundle ``current`` points to and the one before it (a plugin may still be running
    from it); remove older ones."""
    versions = _read_host(root, f"{AGENT_HOME}/versions")
    current = _host(root, f"{AGENT_HOME}/current")
    if not versions.is_dir() or not current.is_symlink():
        return
    keep = {os.path.basename(os.readlink(current)), os.path.basename(state.get("previous", ""))}
    for found in versions.iterdir():
        if found.name not in keep and not found.name.startswith("."):
            shutil.rmtree(found, ignore_errors=True)


def apply(
    root: str, plan: AgentPlan, bundle: Path, version: str, restart: Restart, healthy: Healthy
) -> Outcome:
    """Make the node under ``root`` as ``plan`` says (the bundle copied from ``bundle``)."""
    if plan.refused:
        return Outcome("refused", detail=plan.refused)
    state = load_state(root)
    outcome = Outcome("installed")
    try:
        before = _change(root, plan, bundle, state, outcome)
        state["version"] = version
    finally:  # a step that failed partway: what was changed until then is known to uninstall
        _save_state(root, state)
    _prune_versions(root, state)
    if not plan.restart:
        return outcome if outcome.changed else Outcome("unchanged")
    restart(plan.restart)
    outcome.restarted.append(plan.restart)
    problem = healthy()
    if problem is None:
        return outcome
    for path, data in before.items():  # back to how this run found them
        host = _host(root, path)
        if data is None:
            host.unlink(missing_ok=True)
        else:
            _put_bytes(host, data)
        state["written"].pop(path, None)
    _save_state(root, state)
    restart(plan.restart)
    outcome.restarted.append(plan.restart)
    return Outcome(
        "rolled back",
        outcome.changed,
        outcome.restarted,
        detail=f"the kubelet was not healthy after the restart ({problem}): its config and flags "
        "were put back and it was restarted again",
    )


def uninstall(root: str, service: str, restart: Restart) -> Outcome:
    """Every file and link back to how it was before the first install; what the agent placed
    removed; the kubelet restarted (``service``) when its config or flags changed."""
    state = load_state(root)
    outcome = Outcome("uninstalled")
    kubelet_input = False
    for path, original in sorted(state["originals"].items()):
        host = _host(root, path)
        readable = _read_host(root, path)
        written = state["written"].get(path)
        if written is not None and (
            not readable.is_file() or _digest(readable.read_bytes()) != written
        ):
            outcome.kept.append(path)  # someone else's since: reported, not overwritten
            continue
        if "link" in original:
            _put_link(host, original["link"])
        elif "file" in original:
            data = _read_host(root, "/" + original["file"].lstrip("/")).read_bytes()
            _put_bytes(host, data, original["mode"] & 0o7777)
        elif os.path.lexists(host):
            host.unlink()
        outcome.changed.append(path)
        kubelet_input = kubelet_input or written is not None
    shutil.rmtree(_host(root, f"{AGENT_HOME}/versions"), ignore_errors=True)
    shutil.rmtree(_host(root, ORIGINALS), ignore_errors=True)
    _host(root, STATE).unlink(missing_ok=True)
    for directory in sorted(state.get("made_dirs", []), key=len, reverse=True):
        with contextlib.suppress(OSError):  # not empty: something else lives there now
            _host(root, directory).rmdir()
    if kubelet_input and service:
        restart(service)
        outcome.restarted.append(service)
    return outcome

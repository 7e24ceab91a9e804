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
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from credprovider.tool.agent.plan import AgentPlan
from credprovider.tool.agent.platforms import AGENT_HOME
from credprovider.tool.install_config import NodeChangeError
from credprovider.tool.nodefiles import FileProblem, read_bytes

STATE: Final = f"{AGENT_HOME}/state.json"
ORIGINALS: Final = f"{AGENT_HOME}/originals"

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
    return Path(root) / path.lstrip("/")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load_state(root: str) -> dict[str, Any]:
    path = _host(root, STATE)
    if not path.exists():
        return {"version": "", "originals": {}, "written": {}}
    try:
        state = json.loads(read_bytes(str(path)))
    except (ValueError, FileProblem):
        state = None
    if not isinstance(state, dict) or not all(
        isinstance(state.get(key), dict) for key in ("originals", "written")
    ):
        raise NodeChangeError(
            f"{STATE} is not the agent's state (edited or truncated): nothing is changed; "
            "restore it, or remove it to make the agent start afresh"
        )
    return state


def _save_state(root: str, state: dict[str, Any]) -> None:
    _put_bytes(_host(root, STATE), json.dumps(state, indent=2, sort_keys=True).encode())


def _put_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.credprovider-new")
    partial.write_bytes(data)
    os.chmod(partial, mode)
    os.replace(partial, path)


def _put_link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.credprovider-new")
    if os.path.lexists(partial):
        partial.unlink()
    partial.symlink_to(target)
    os.replace(partial, path)


def _remember(root: str, state: dict[str, Any], path: str) -> None:
    """Keep ``path`` as it is before the agent first replaces it (a file, a link, or nothing)."""
    if path in state["originals"]:
        return
    host = _host(root, path)
    if host.is_symlink():
        state["originals"][path] = {"link": os.readlink(host)}
    elif host.is_file():
        kept = _host(root, ORIGINALS) / hashlib.sha256(path.encode()).hexdigest()[:16]
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(host, kept)
        state["originals"][path] = {
            "file": str(kept.relative_to(root)),
            "mode": host.stat().st_mode,
        }
    else:
        state["originals"][path] = {"absent": True}


def _made_dirs(root: str, state: dict[str, Any], path: str) -> None:
    """Record the directories above ``path`` that do not exist yet (uninstall removes them)."""
    parent = Path(path).parent
    missing: list[str] = []
    while str(parent) != "/" and not _host(root, str(parent)).exists():
        missing.append(str(parent))
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
            partial = target.with_name(f".{target.name}.credprovider-new")
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(bundle, partial, symlinks=True)
            os.replace(partial, target)
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
        before[path] = host.read_bytes() if host.is_file() else None
        _remember(root, state, path)
        _made_dirs(root, state, path)
        _put_bytes(host, text.encode())
        state["written"][path] = _digest(text.encode())
        outcome.changed.append(path)
    return before


def _prune_versions(root: str, state: dict[str, Any]) -> None:
    """Keep the bundle ``current`` points to and the one before it (a plugin may still be running
    from it); remove older ones."""
    versions = _host(root, f"{AGENT_HOME}/versions")
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
        written = state["written"].get(path)
        if written is not None and (not host.is_file() or _digest(host.read_bytes()) != written):
            outcome.kept.append(path)  # someone else's since: reported, not overwritten
            continue
        if "link" in original:
            _put_link(host, original["link"])
        elif "file" in original:
            data = _host(root, original["file"]).read_bytes()
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

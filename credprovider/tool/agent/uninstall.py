"""The node agent taking itself off the node under ``root`` (``agent uninstall``, ``agent run
--uninstall``): every file and link back to how it was before the first install, byte for byte;
what it placed removed; the kubelet restarted when its config or flags changed and confirmed
healthy (the node's own rollback armed meanwhile), else the agent's files put back (a rollback).
Its intent is recorded first, so a second run after a kill finishes it; the change a killed
apply journaled is undone with the rest. A flags file someone edited since keeps the edit: only
the agent's two flags are taken out of it. The change primitives are
:mod:`credprovider.tool.agent.apply`'s.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Final

from credprovider.paths import AGENT_HOME, AGENT_HOME_PARENT
from credprovider.tool.agent.confirm import (
    Healthy,
    Outcome,
    Watch,
    arm,
    disarm,
    healed,
    keep_before,
    put_back,
    restarted,
    restarted_again,
    rolled_back,
    settle,
)
from credprovider.tool.agent.placement import not_writable
from credprovider.tool.agent.platforms import Platform
from credprovider.tool.agent.recovery import finish_journal
from credprovider.tool.agent.restart import Restart
from credprovider.tool.agent.state import (
    BEFORE,
    ORIGINALS,
    STATE,
    AgentState,
    digest,
    keep_data,
    recover_home,
    remove_home,
    restore_op,
    save,
)
from credprovider.tool.agent.statecheck import load
from credprovider.tool.agent.systemd import SystemdError
from credprovider.tool.change.durable import (
    remove_empty_dir,
    remove_file,
    remove_whole,
    temporary_for,
)
from credprovider.tool.change.engine import Kind, Op, perform
from credprovider.tool.change.flagedit import FlagChanges
from credprovider.tool.change.kept import Prior
from credprovider.tool.change.results import Result
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.access import FileProblem, UnreadableError, read_bytes
from credprovider.tool.node.flagfiles import flags_from_file, rewrite
from credprovider.tool.node.kubelet_flags import BIN_DIR_FLAG, CONFIG_FLAG, flag_value
from credprovider.tool.node.root import NodeRoot

# What an uninstall says where nothing of the agent's is on the node (run twice, or never applied).
NOTHING_THERE: Final = "nothing of the agent's is on this node (no state under its home)"


def uninstall(
    root: NodeRoot,
    service: str,
    restart: Restart,
    healthy: Healthy | None = None,
    watch: Watch | None = None,
    bootstrap: Platform | None = None,
) -> Outcome:
    """Every file and link back to how it was before the first install; what the agent placed
    removed; the kubelet restarted (``service``) when its config or flags changed, and (with
    ``healthy``) confirmed healthy, else the agent's files put back and the kubelet restarted
    again (a rollback: nothing removed). Its intent is recorded first: after a kill, running it
    again finishes it. ``bootstrap`` (mode files: the kubelet's flags, set at provisioning, name
    its config and bin dir): where the node had no config, the bootstrap is left in its place
    (agent/bootstrap.py), laid before anything is removed."""
    recover_home(root)
    if not os.path.lexists(root.host(STATE)):
        return _tidied(Outcome(Result.UNINSTALLED, detail=NOTHING_THERE), watch)
    state = load(root)
    laid = _lay_bootstrap(root, state, bootstrap) if bootstrap and bootstrap.bootstrap else ""
    unwritable = not_writable(root, [AGENT_HOME, *state.bundle_homes, *state.originals])
    if unwritable:
        return Outcome(Result.REFUSED, detail=f"{unwritable}; nothing is changed")
    finished = finish_journal(root, state, undo=True)  # a killed apply's: put back below
    outcome = Outcome(Result.UNINSTALLED, healed=healed(root, state))
    outcome.notes += [note for note in (finished, laid) if note]
    if service and state.written and not state.restart_due:
        # what the kubelet runs now, kept for a rollback, and the restart owed from here on
        before = state.before if state.before is not None else {}
        for path in state.originals:
            # a file that cannot be the agent's is someone else's: uninstall leaves it, unkept
            readable = path not in state.written or _as_written(root, path) is not None
            if path not in before and readable:
                keep_before(root, state, before, path)
        state.before = before
        state.restart_due = service
        save(root, state)
    # the kubelet's config and flags first, then the links (a bin dir the agent made, whole), the
    # bundles' `current` last: at no instant does a config it would read name a plugin already
    # gone, nor a link the kubelet runs point nowhere
    inputs = sorted(path for path in state.originals if path in state.written)
    for path in inputs:
        _put_back(root, state, path, outcome)
    outcome.changed += _remove_made_bin_dirs(root, state)
    currents = {f"{home}/current" for home in state.bundle_homes}
    for path in sorted(set(state.originals) - set(inputs), key=lambda p: (p in currents, p)):
        _put_back(root, state, path, outcome)
    due = state.restart_due
    if due and service:
        armed = arm(root, state, watch, outcome)
        problem = restarted(due, restart, healthy, outcome)
        if problem is not None:
            undone = _undo_uninstall(root, state, restart, outcome, problem)
            disarm(watch, armed)
            return undone
        state.watchdog = None
        disarm(watch, armed)
    state.restart_due = ""
    _remove_own(root, state)
    return _tidied(outcome, watch)


def _put_back(root: NodeRoot, state: AgentState, path: str, outcome: Outcome) -> None:
    """``path`` as it was before the first install, unless someone else changed it since (then
    kept and reported; a flags file loses only the agent's flags)."""
    original = state.originals[path]
    remove_file(temporary_for(root.host(path, follow=False)))  # a killed write's temporary
    written = state.written.get(path)
    # what the agent wrote there: this change's, or (a change killed before its write) the one
    # before it
    ours = {sha for sha in (written, state.before_written.get(path)) if sha is not None}
    restoring = restore_op(root, path, original)
    if restoring.done():
        return  # already as it was (restored before a kill, or never replaced)
    if ours and not holds_ours(root, path, ours):
        possible, edit = agents_flags_out(root, state, path, restoring)
        if not possible:
            outcome.kept.append(path)  # someone else's since: reported, not overwritten
            return
        if edit is not None:
            perform(edit)
        outcome.detail = (
            f"{path} was edited since the agent wrote it: only the agent's flags were taken out "
            "of it, the edit kept"
        )
    else:
        perform(restoring)
    outcome.changed.append(path)


def _remove_made_bin_dirs(root: NodeRoot, state: AgentState) -> list[str]:
    """Each directory the agent made that holds nothing but its links (a bin dir new to the node),
    removed whole at one instant (durable.remove_whole), before its links would go one by one:
    k3s and RKE2 pass the kubelet a bin dir whenever it exists beside a config, so it never stands
    there without the plugins the node's own config may name. The links it held."""
    links = {
        root.host(path, follow=False): path
        for path, was in state.originals.items()
        if was.prior is Prior.ABSENT and path not in state.written
    }
    removed = []
    for directory in state.made_dirs:
        host = root.host(directory, follow=False)
        try:
            held = [host / name for name in os.listdir(host)]
        except OSError:
            held = []
        if all(entry in links and entry.is_symlink() for entry in held):
            remove_whole(host)  # (absent: what a killed run left beside it)
            removed += [links[entry] for entry in held]
    return sorted(removed)


def _lay_bootstrap(root: NodeRoot, state: AgentState, rules: Platform) -> str:
    """Where the node had no config before the agent's, the bootstrap (agent/bootstrap.py)
    becomes its original: its plugin written into the bin dir first, then the state saying the
    config comes back as the bootstrap and that the directories holding them stay. The restore
    and the removal that follow then leave the files the kubelet's flags name. What was done, said
    in one line ("" for nothing). A run after a kill does what is left (the plugin's op checks
    itself; a saved state already names the bootstrap)."""
    from credprovider.tool.agent.bootstrap import (
        BOOTSTRAP_PROVIDER,
        CONFIG_MODE,
        CONFIG_TEXT,
        PLUGIN_MODE,
        PLUGIN_TEXT,
    )

    original = state.originals.get(rules.config)
    if original is None or original.prior is not Prior.ABSENT:
        return ""  # never written by the agent, or the node's own config (a bootstrap too) returns
    if not any(os.path.dirname(path) == rules.bin_dir for path in state.originals):
        raise NodeChangeError(
            f"--bin-dir {rules.bin_dir} is not where the agent linked its plugins: nothing is "
            "changed; give the --bin-dir it was installed with (the kubelet's)"
        )
    plugin = root.host(f"{rules.bin_dir}/{BOOTSTRAP_PROVIDER}", follow=False)
    op = Op(Kind.FILE, plugin, PLUGIN_TEXT.encode(), mode=PLUGIN_MODE)
    if not op.done():
        perform(op)  # its directory made if missing (0755, whatever the umask)
    state.originals[rules.config] = keep_data(
        root, ORIGINALS, rules.config, CONFIG_TEXT.encode(), CONFIG_MODE
    )
    needed = (f"{rules.config}", f"{rules.bin_dir}/{BOOTSTRAP_PROVIDER}")
    state.made_dirs = [d for d in state.made_dirs if not any(p.startswith(f"{d}/") for p in needed)]
    save(root, state)
    return (
        f"{rules.config} is left as the bootstrap ({BOOTSTRAP_PROVIDER}), since the kubelet's "
        "flags, set at provisioning, name it and its bin dir: remove those flags, then these files"
    )


def _tidied(outcome: Outcome, watch: Watch | None) -> Outcome:
    """With systemd at hand (the chart's pod in mode flags), the directory the kubelet made for
    the pod's mount of the agent's home, removed on the host if empty."""
    if watch is not None:
        try:
            watch.tidy((AGENT_HOME_PARENT,))
        except SystemdError as exc:
            outcome.notes.append(f"{AGENT_HOME_PARENT} was left on the node: {exc}")
    return outcome


def _undo_uninstall(
    root: NodeRoot, state: AgentState, restart: Restart, outcome: Outcome, problem: str
) -> Outcome:
    """The kubelet did not come back without the agent's files: they are put back as uninstall
    found them, and it is restarted again; the agent stays installed."""
    put_back(root, state)
    detail = restarted_again(
        state.restart_due,
        restart,
        outcome,
        f"the kubelet was not healthy after the uninstall's restart ({problem}): the agent's "
        "files were put back",
    )
    settle(root, state)
    return rolled_back(outcome, detail)


def agents_flags_out(
    root: NodeRoot, state: AgentState, path: str, original: Op
) -> tuple[bool, Op | None]:
    """A flags file edited since the agent wrote it (an operator's ``--max-pods``): whether
    taking the agent's two flags out of it, everything else kept, undoes the agent's edit (the
    node's own file had neither of them), and the op that does it (``None``: they are out
    already)."""
    found = _as_written(root, path)
    if path not in state.flag_files or original.kind is Kind.LINK or found is None:
        return False, None
    before = shlex.split(flags_from_file(original.data.decode("utf-8", "replace")))
    ours = (CONFIG_FLAG, BIN_DIR_FLAG)
    if any(flag_value(before, flag) for flag in ours):
        return False, None  # the node had its own values: only the operator knows which to keep
    text = found.decode("utf-8", "replace")
    if not any(flag_value(shlex.split(flags_from_file(text)), flag) for flag in ours):
        return True, None  # the operator took them out already
    edited = rewrite(text, FlagChanges(frozenset(ours), frozenset()).edit)
    return True, Op(Kind.FILE, root.host(path, follow=False), edited.encode())


def holds_ours(root: NodeRoot, path: str, ours: set[str]) -> bool:
    """``path`` holds what the agent wrote there (one of the digests ``ours``)."""
    found = _as_written(root, path)
    return found is not None and digest(found) in ours


def _as_written(root: NodeRoot, path: str) -> bytes | None:
    """What ``path`` holds, if it can be what the agent wrote there: a regular file no bigger than
    a kubelet config or flags file (``None``: anything else, someone else's since; never a read
    of a FIFO or of a file grown to gigabytes)."""
    try:
        return read_bytes(str(root.host(path)))
    except (FileProblem, UnreadableError):
        return None


def _remove_own(root: NodeRoot, state: AgentState) -> None:
    """What the agent placed, the directories it made outside its home (deepest first), then its
    home with its state in one rename: a kill on the way leaves what the next uninstall
    finishes (the state no longer names the copies about to be removed)."""
    state.originals, state.written, state.before, state.before_written = {}, {}, None, {}
    save(root, state)
    homes = dict.fromkeys((*state.bundle_homes, AGENT_HOME))
    bundles = [f"{home}/{own}" for home in homes for own in ("current", "versions")]
    for own in (*bundles, BEFORE, ORIGINALS):
        perform(Op(Kind.ABSENT, root.host(own, follow=False)))
    above = {str(p) for p in Path(AGENT_HOME).parents}
    made = sorted(state.made_dirs, key=len, reverse=True)
    inside = (AGENT_HOME, f"{AGENT_HOME}/")  # removed with the home
    for directory in made:
        if directory not in above and not directory.startswith(inside):
            remove_empty_dir(root.host(directory, follow=False))
    remove_home(root, state)
    for directory in made:  # those above the home (a node without /var/lib, say)
        if directory in above:
            remove_empty_dir(root.host(directory, follow=False))

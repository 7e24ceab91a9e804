"""Commit-confirmed kubelet restarts: the node rolls a change back by itself unless the agent
confirms it, as a network device does with a risky configuration.

Before the agent restarts the kubelet onto a changed config or flags, it *arms* a transient
systemd service (``credprovider-rollback-<token>.service``, started over systemd's private socket
like the restart itself): the bundle's own ``credprovider agent rollback``, which sleeps through
the health wait and a grace, then takes the node's lock (change/lock.py) and, if the change it was
armed for is still unconfirmed (the state still names it, a restart still due), puts the
kubelet's config and flags back as the change found them, restarts the kubelet, and records what
it did (``healed``). The agent's confirmation (healthy: the change settled) or its own rollback
*disarms* it (the unit stopped; a unit that fires anyway finds its change settled and does
nothing).

So a node whose agent died during the wait (OOM-killed, evicted, its node's kubelet down and with
it every restart of the pod) is back on its previous config with no agent, no API server and no
operator. While the agent lives the service waits for the lock, so the two never act at once.
What it did is in the node's journal (``journalctl -u 'credprovider-rollback-*'``), and the next
agent run reports it (its output, an Event and the node's annotations).
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from credprovider.paths import AGENT_HOME
from credprovider.tool.agent.state import AgentState, Armed, Healed, placed_version, save
from credprovider.tool.agent.statecheck import load
from credprovider.tool.agent.systemd import (
    PRIVATE_SOCKET,
    SystemdError,
    start_service,
    stop_unit,
)
from credprovider.tool.change.lock import WAIT_SECONDS, node_lock
from credprovider.tool.errors import NodeChangeError
from credprovider.tool.node.root import NodeRoot

# The watchdog waits this much longer than the health wait (the restart itself takes a moment).
# It cannot act early: while the agent lives it holds the node's lock, which the watchdog waits
# for, and finds the change settled once it has it.
GRACE_SECONDS: Final = 5.0


# The tidy after an uninstall (Watchdog.tidy): every 3 s, rmdir each directory; done once every
# one is gone (or holds something) for TIDY_SETTLED seconds, or after TIDY_GIVE_UP.
TIDY_SETTLED: Final = 30
TIDY_GIVE_UP: Final = 900
TIDY_SCRIPT: Final = (
    f"gone=0; tries=$(({TIDY_GIVE_UP} / 3)); "
    "while [ $tries -gt 0 ]; do tries=$((tries - 1)); left=0; "
    # one that holds something is not removed, nor waited for
    'for d in "$@"; do rmdir "$d" 2>/dev/null; '
    '[ -e "$d" ] && [ -z "$(ls -A "$d" 2>/dev/null)" ] && left=1; done; '
    "if [ $left = 0 ]; then gone=$((gone + 3)); else gone=0; fi; "
    f"[ $gone -ge {TIDY_SETTLED} ] && exit 0; sleep 3; done"
)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(frozen=True)
class Watchdog:
    """Arms and disarms the node's rollback through ``socket_path`` (the agent's view of
    systemd's private socket); ``after``: the seconds it waits (the health wait and a grace)."""

    socket_path: str
    after: float

    def command(self, unit: str, version: str, home: str = AGENT_HOME) -> list[str]:
        """What the armed service runs, as the host names it (systemd runs it on the host): the
        bundle ``version`` the agent placed in ``home`` (on an exec mount: agent/platforms.py)."""
        return [
            f"{home}/versions/{version}/credprovider", "agent", "rollback",
            "--root", "/", "--armed-as", unit, "--after", f"{self.after:.0f}",
            "--systemd-socket", PRIVATE_SOCKET,
        ]  # fmt: skip

    def arm(self, root: NodeRoot, state: AgentState) -> str:
        """Journal the unit, then start it; its name."""
        version = state.version
        if not placed_version(version):
            raise SystemdError(f"the bundle version {version!r} is not one the agent places")
        unit = f"credprovider-rollback-{secrets.token_hex(6)}.service"
        state.watchdog = Armed(unit, _now())
        save(root, state)
        start_service(
            unit,
            self.command(unit, version, state.bundle_home),
            "credprovider: put the kubelet's config and flags back unless the agent confirms "
            "its restart",
            self.socket_path,
        )
        return unit

    def disarm(self, unit: str) -> None:
        stop_unit(unit, self.socket_path)

    def tidy(self, directories: tuple[str, ...]) -> None:
        """After an uninstall: ``directories`` removed on the host once empty, by a transient
        service (``rmdir``, which never removes one that holds anything). They are those the
        kubelet made for the pod's mounts, which the pod cannot remove (it has them mounted), and
        which the kubelet makes again for a pod still running when it restarts (as the
        uninstall's own restart does): the service keeps at it until they have stayed gone for
        :data:`TIDY_SETTLED` seconds, for at most :data:`TIDY_GIVE_UP` seconds."""
        start_service(
            f"credprovider-tidy-{secrets.token_hex(6)}.service",
            ["/bin/sh", "-c", TIDY_SCRIPT, "credprovider-tidy", *directories],
            "credprovider: remove the empty directories the kubelet made for the agent's pod",
            self.socket_path,
        )


def armed_for(state: AgentState, unit: str) -> bool:
    """Whether ``unit`` is the rollback armed for a change still unconfirmed."""
    armed = state.watchdog
    return armed is not None and armed.unit == unit and bool(state.restart_due)


def say(line: str) -> None:
    """One line to the node's journal (the armed service's stderr)."""
    print(f"credprovider agent rollback: {line}", file=sys.stderr, flush=True)


def rollback(
    root: NodeRoot,
    unit: str,
    after: float,
    restart: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """``agent rollback``, run by the armed service: after ``after`` seconds, the change it was
    armed for put back and the kubelet restarted, unless the change was confirmed (or undone) by
    then. What it did, for the journal."""
    from credprovider.tool.agent.confirm import put_back, settle

    sleep(after)
    # the agent holds the lock at most through two restarts (120 s each) and its health wait
    waited = max(WAIT_SECONDS, 2 * after + 300)
    with node_lock(root, f"credprovider agent rollback ({unit})", wait=waited, say=say):
        state = load(root)
        if not armed_for(state, unit):
            return "nothing to do: the agent confirmed the kubelet's restart or undid it itself"
        service = state.restart_due
        put_back(root, state)
        detail = f"its config and flags were put back as the change found them and {service}"
        try:
            restart(service)
            detail += " restarted"
        except NodeChangeError as exc:
            detail += f" was not restarted ({exc})"
        state.healed = Healed(_now(), detail)
        settle(root, state)
    return f"the agent did not confirm the kubelet's restart: {detail}"

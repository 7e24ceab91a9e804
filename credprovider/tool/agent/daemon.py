"""What the DaemonSet's agent does on its node when it talks to the API server: wait for a restart
slot before any change that restarts the kubelet (so no two nodes restart at once, first install
included), apply or uninstall, check the kubelet came back, say what happened in the node's
annotations and Events, and turn ready only after a dry-run credential request per provider.

Reporting is best effort (a failed annotation is logged, the node change stands); taking a slot is
not: without the API server the agent does not restart anything.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from credprovider.errors import CredproviderError
from credprovider.tool.agent.apply import apply, load_state
from credprovider.tool.agent.cluster import Cluster, NodeStatus, Renewer, now, stamp
from credprovider.tool.agent.confirm import Outcome, Watch
from credprovider.tool.agent.uninstall import uninstall
from credprovider.tool.change.results import Result
from credprovider.tool.cluster.connect import ClusterError
from credprovider.tool.kubeconfig.model import read_config
from credprovider.tool.node.kubelet_facts import config_hash as kubelet_hash
from credprovider.tool.node.root import HOST, NodeRoot

if TYPE_CHECKING:
    import datetime

    from credprovider.tool.agent.health import KubeletHealth
    from credprovider.tool.agent.plan import AgentPlan
    from credprovider.tool.agent.platforms import Platform

SLOT_POLL_SECONDS: Final = 5.0
# Events on the node, one reason per kind of change.
INSTALLED: Final = "CredentialProviderInstalled"
UNINSTALLED: Final = "CredentialProviderUninstalled"
REFUSED: Final = "CredentialProviderRefused"
ROLLED_BACK: Final = "CredentialProviderRolledBack"
KEPT: Final = "CredentialProviderFileKept"
RESTARTED: Final = "KubeletRestarted"
FAILED: Final = "CredentialProviderFailed"
DRY_RUN_FAILED: Final = "CredentialProviderDryRunFailed"
HEALED: Final = "CredentialProviderRolledBackByNode"
REWRITTEN: Final = "CredentialProviderRewrittenByPlatform"


@dataclass
class FleetMember:
    """One node's agent: where the node's files are, how to restart and check its kubelet, and
    the API server (``cluster``) with ``slots`` restart slots held for ``lease_seconds``."""

    root: NodeRoot
    version: str
    restart_command: Callable[[str], None]
    health: KubeletHealth
    cluster: Cluster
    slots: int = 1
    lease_seconds: int = 120
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))
    sleep: Callable[[float], None] = time.sleep
    # a change under way (SIGTERM is held until it ends: agent/termination.py)
    changing: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
    # the node's own rollback, armed for each kubelet restart (agent/watchdog.py)
    watch: Watch | None = None

    # -- reporting (best effort) -------------------------------------------------------------
    def report(self, result: Result, detail: str, config_hash: str, rewritten: str = "") -> None:
        try:
            self.cluster.report(
                NodeStatus(self.version, config_hash, result, detail, stamp(now()), rewritten)
            )
        except ClusterError as exc:
            self.log(f"credprovider agent: the node's status was not recorded: {exc}")

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        try:
            self.cluster.event(reason, message, warning)
        except ClusterError as exc:
            self.log(f"credprovider agent: the Event {reason} was not recorded: {exc}")

    # -- the restart slot ---------------------------------------------------------------------
    def take_slot(self) -> str:
        """Wait until a restart slot is this node's (a Lease); its name."""
        said = ""
        while True:
            try:
                name = self.cluster.try_slot(self.slots, self.lease_seconds)
                if name is not None:
                    return name
                holders = ", ".join(self.cluster.holders(self.slots)) or "another node"
                line = f"waiting for a restart slot ({self.slots} in use by {holders})"
            except ClusterError as exc:
                line = f"waiting for the API server to give a restart slot: {exc}"
            if line != said:
                self.log(f"credprovider agent: {line}")
                self.report(Result.WAITING, line, "")
                said = line
            self.sleep(SLOT_POLL_SECONDS)

    def _with_slot(self, change: Callable[[], Outcome]) -> Outcome:
        name = self.take_slot()
        renewer = Renewer(self.cluster, name, self.lease_seconds)
        try:
            with self.changing():
                return change()
        finally:
            renewer.stop()
            try:
                self.cluster.release(name)
            except ClusterError as exc:  # it expires after lease_seconds anyway
                self.log(f"credprovider agent: Lease {name} was not released: {exc}")

    # -- install and uninstall ---------------------------------------------------------------
    def _restart_and_health(
        self, config_path: str
    ) -> tuple[Callable[[str], None], Callable[[], str | None]]:
        restarted_at: list[datetime.datetime] = []

        def restart(unit: str) -> None:
            restarted_at.append(now())
            self.restart_command(unit)
            self.event(RESTARTED, f"credprovider restarted {unit}")

        def healthy() -> str | None:
            return self.health.check(restarted_at[-1], config_hash(self.root, config_path))

        return restart, healthy

    def install(self, plan: AgentPlan, bundle: Path) -> Outcome:
        if plan.refused:
            self.event(REFUSED, plan.refused, warning=True)
            self.report(Result.REFUSED, plan.refused, config_hash(self.root, plan.config_path))
            return Outcome(Result.REFUSED, detail=plan.refused)
        restart, healthy = self._restart_and_health(plan.config_path)
        rewritten = self._rewritten()

        def change() -> Outcome:
            return apply(self.root, plan, bundle, self.version, restart, healthy, self.watch)

        if plan.restart:
            outcome = self._with_slot(change)
        else:
            with self.changing():
                outcome = change()
        self._healed(outcome)
        said = _said(outcome)
        if outcome.result is Result.ROLLED_BACK:
            self.event(ROLLED_BACK, said, warning=True)
        elif outcome.changed:
            self.event(INSTALLED, said)
        self.report(outcome.result, said, config_hash(self.root, plan.config_path), rewritten)
        return outcome

    def _rewritten(self) -> str:
        """What the platform wrote again since the agent wrote it (at boot: GKE, nodeadm, the
        MCO), found before this run writes it anew: an Event and "<time> <paths>" ("": none)."""
        from credprovider.tool.agent.rewritten import agent_files

        found = agent_files(self.root)
        if found is None or not found.changed:
            return ""
        paths = ", ".join(found.changed)
        self.event(
            REWRITTEN,
            f"the platform wrote {paths} again since the agent wrote it (at boot, most likely): "
            "the kubelet pulled without our providers until now; the agent writes them again",
            warning=True,
        )
        return f"{stamp(now())} {paths}"

    def uninstall(self, service: str, rules: Platform | None = None) -> Outcome:
        """``rules``: the run's (mode files': uninstall leaves the bootstrap)."""
        state = load_state(self.root)

        restart, healthy = self._restart_and_health("")

        def change() -> Outcome:
            return uninstall(self.root, service, restart, healthy, self.watch, rules)

        needs_restart = bool(service and state.written)
        if needs_restart:
            outcome = self._with_slot(change)
        else:
            with self.changing():
                outcome = change()
        self._healed(outcome)
        if outcome.result is Result.ROLLED_BACK:
            self.event(ROLLED_BACK, _said(outcome), warning=True)
        if outcome.kept:
            self.event(
                KEPT,
                "kept (changed by someone else since credprovider wrote them): "
                + ", ".join(outcome.kept),
                warning=True,
            )
        if outcome.result is Result.UNINSTALLED:
            self.event(UNINSTALLED, _said(outcome))
        self.report(outcome.result, _said(outcome), "")
        return outcome

    def _healed(self, outcome: Outcome) -> None:
        """What the node's own rollback did since the agent last ran: an Event and a log line."""
        if outcome.healed:
            self.event(HEALED, outcome.healed, warning=True)
            self.log(f"credprovider agent: {outcome.healed}")
        for note in outcome.notes:
            self.log(f"credprovider agent: {note}")

    def failed(self, problem: str) -> None:
        self.event(FAILED, problem, warning=True)
        self.report(Result.FAILED, problem, "")

    def dry_run(
        self,
        plan: AgentPlan,
        bin_dir: str,
        launcher: Sequence[str],
        images: Mapping[str, str] | None = None,
    ) -> list[str]:
        """A credential request per provider of the config in force; what failed."""
        from credprovider.tool.agent.health import dry_run

        try:
            loaded = read_config(str(self.root.host(plan.config_path)))
        except (CredproviderError, OSError) as exc:
            problems = [f"the config cannot be read: {exc}"]
        else:
            # the node files the args name: under --root, unless a launcher runs the plugins on
            # the node itself
            root = HOST if launcher else self.root
            problems = [
                f"{name}: {problem}" for name, problem in dry_run(loaded, bin_dir, launcher, root)
            ]
        return problems


def config_hash(root: NodeRoot, config_path: str) -> str:
    """The kubelet's hash of the config at ``config_path`` on the node, or "" when unreadable."""
    if not config_path:
        return ""
    try:
        return kubelet_hash(read_config(str(root.host(config_path))).contents)
    except (CredproviderError, OSError):
        return ""


def _said(outcome: Outcome) -> str:
    parts = [outcome.result + (f": {outcome.detail}" if outcome.detail else "")]
    if outcome.changed:
        parts.append("changed " + ", ".join(outcome.changed))
    if outcome.restarted:
        parts.append("restarted " + ", ".join(outcome.restarted))
    if outcome.kept:
        parts.append("kept " + ", ".join(outcome.kept))
    return "; ".join(parts)

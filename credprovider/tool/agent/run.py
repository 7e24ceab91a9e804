"""The agent's two runs. As one of the fleet (the chart's ``flags`` mode, ``credprovider agent run
--node``): the node installed (or uninstalled) under its lock, the dry run waited for, then the pod
stays until it is stopped (:func:`run_as_member`: the API server, the kubelet's health, SIGTERM, the
lock, the dry run and the ready file wired here). Alone (``agent apply``, ``agent uninstall``, and
``agent run`` without ``--node``: the chart's files mode): the same change under the same lock,
the kubelet's /healthz its only judge (:func:`change_alone`, :func:`run_alone`). The commands
(tool/commands/agent.py, agent_pod.py) parse flags into :class:`RunOptions` and :class:`Fleet` and
print outcomes."""

from __future__ import annotations

import shlex
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

from credprovider.tool.change.lock import node_lock
from credprovider.tool.change.results import Result
from credprovider.tool.change.settings import dry_run_images
from credprovider.tool.cluster.connect import SERVICE_ACCOUNT_DIR, ClusterError, connect
from credprovider.tool.errors import EXIT_FAILED, EXIT_OK, NodeChangeError, node_failure
from credprovider.tool.node.access import FileProblem, read_text
from credprovider.tool.node.root import NodeRoot

if TYPE_CHECKING:
    from credprovider.tool.agent.cluster import Cluster
    from credprovider.tool.agent.confirm import Healthy, Outcome
    from credprovider.tool.agent.daemon import FleetMember
    from credprovider.tool.agent.plan import AgentPlan
    from credprovider.tool.agent.platforms import Loaded, Platform
    from credprovider.tool.agent.restart import Restart
    from credprovider.tool.agent.watchdog import Watchdog as Watch

DRY_RUN_RETRY_SECONDS: Final = 30.0


@dataclass(frozen=True)
class RunOptions:
    """What this run installs, where, and how its dry run runs the plugins."""

    root: NodeRoot
    keys: list[str]
    version: str
    bundle: str
    settings: Mapping[str, Mapping[str, Any]]  # per provider key, what replaces its defaults
    rules: Platform | None  # --files-only's paths, --platform's, or None: the node's own
    uninstall: bool = False
    dry_run_launcher: str = ""
    migrate_in_tree: bool = False  # an in-tree kubeadm node moved to external, not refused
    beside: bool = False  # ours under names of their own, the platform's plugins left as they are
    systemd_socket: str = ""  # asked which units it has (else the unit files under root tell)


@dataclass(frozen=True)
class Fleet:
    """How this run takes part in the fleet (``agent run --node``): its API server and node, the
    restart slots, and how it asks after the kubelet and says it is ready."""

    node: str
    namespace: str
    kubeconfig: str | None  # None: the pod's service account
    slots: int
    lease_seconds: int
    healthz: str
    health_timeout: float
    metrics: str  # "": the config hash is not checked
    ready_file: str  # "": no readiness


def run_as_member(
    options: RunOptions,
    fleet: Fleet,
    restart: Callable[[str], None],
    watch: Watch | None,
    said: Callable[[Outcome, bool], object],
) -> int:
    """Install (or uninstall) on this node as one of the fleet, then stay until SIGTERM: ready
    once the dry run passed; a failure leaves the pod running and not ready (the DaemonSet's
    rollout stops there) with the reason in its log, the node's annotations and an Event. Raises
    ``ClusterError`` when the API server cannot be reached; returns (the change's exit status)
    only when SIGTERM came during the change."""
    from credprovider.tool.agent.cluster import Cluster
    from credprovider.tool.agent.daemon import FleetMember
    from credprovider.tool.agent.health import KubeletHealth
    from credprovider.tool.agent.termination import Termination

    termination = Termination().install()
    cluster = Cluster(connect(fleet.kubeconfig), fleet.node, fleet.namespace)  # ClusterError
    token = ""
    if not fleet.kubeconfig:
        try:
            token = read_text(f"{SERVICE_ACCOUNT_DIR}/token").strip()
        except FileProblem:
            token = ""
    health = KubeletHealth(fleet.healthz, fleet.health_timeout, fleet.metrics, token, cluster)
    node = FleetMember(
        options.root, options.version, restart, health, cluster, fleet.slots,
        fleet.lease_seconds, changing=termination.changing, watch=watch,
    )  # fmt: skip
    plan = None
    try:
        with node_lock(options.root, "credprovider agent run"):
            outcome, ok, plan = change(options, node, cluster)
        said(outcome, ok)
    except (OSError, NodeChangeError) as exc:
        ok = False
        node.failed(failed_because(exc))
        print(f"credprovider agent run: {failed_because(exc)}", file=sys.stderr)
    code = EXIT_OK if ok else EXIT_FAILED
    if termination.requested:  # asked to stop during the change, which has ended
        return code
    if ok and plan is not None and fleet.ready_file:
        await_dry_run(
            options, node, plan, lambda line: print(f"credprovider agent run: {line}", flush=True)
        )
    if ok and fleet.ready_file:
        Path(fleet.ready_file).touch()
    stay_until_stopped(code)


def failed_because(exc: OSError | NodeChangeError) -> str:
    """The one sentence for a change that failed on the node (``tool.errors.node_failure``)."""
    return node_failure(exc, "the chart's pod does")


def change(
    options: RunOptions, node: FleetMember, cluster: Cluster
) -> tuple[Outcome, bool, AgentPlan | None]:
    """The node installed (or uninstalled) as ``options`` say: what came of it, whether that is a
    success, and the plan (None: uninstall). The caller holds the node's lock."""
    from credprovider.tool.agent.platforms import service_to_restart
    from credprovider.tool.agent.restart import units_loaded

    loaded = units_loaded(options.systemd_socket)
    if options.uninstall:
        service = service_to_restart(options.root, options.rules, loaded)
        outcome = node.uninstall(service, options.rules)
        return outcome, succeeded(outcome, options), None
    # the config is validated for this node's kubelet: tokenAttributes from 1.34, or its gate
    try:
        version = cluster.kubelet_version()
    except ClusterError:
        version = None  # the newest rules; the kubelet's own check stays the last word
    plan = planned(options, loaded, version)
    outcome = node.install(plan, Path(options.bundle))
    return outcome, succeeded(outcome, options), plan


def planned(
    options: RunOptions, loaded: Loaded, kubelet_version: tuple[int, int] | None = None
) -> AgentPlan:
    """The plan for the node as ``options`` say, made once what a kill left half done on it is
    finished (agent/recovery.py). ``loaded``: the units systemd has (agent/restart.py);
    ``kubelet_version``: its Node's (``None``: not known)."""
    from credprovider.tool.agent.plan import plan_node
    from credprovider.tool.agent.recovery import plan_finished

    return plan_finished(
        options.root,
        lambda: plan_node(
            options.root, options.keys, options.version, options.rules, options.settings,
            kubelet_version=kubelet_version, migrate_in_tree=options.migrate_in_tree,
            beside=options.beside, loaded=loaded,
        ),
    )  # fmt: skip


def succeeded(outcome: Outcome, options: RunOptions) -> bool:
    """Whether the change did what was asked: installed (or nothing to do); uninstalled with
    nothing kept."""
    if options.uninstall:
        return outcome.result is Result.UNINSTALLED and not outcome.kept
    return outcome.result in (Result.INSTALLED, Result.UNCHANGED)


def change_alone(
    options: RunOptions, restart: Restart, healthy: Healthy, watch: Watch | None, action: str
) -> tuple[Outcome, bool]:
    """``agent apply`` or ``agent uninstall`` (``options.uninstall``), with no API server: the
    node changed under its lock (taken as ``credprovider agent <action>``); what came of it and
    whether that is a success."""
    from credprovider.tool.agent.apply import apply
    from credprovider.tool.agent.platforms import service_to_restart
    from credprovider.tool.agent.restart import units_loaded
    from credprovider.tool.agent.uninstall import uninstall

    with node_lock(options.root, f"credprovider agent {action}"):
        loaded = units_loaded(options.systemd_socket)  # asked once, for either plan
        if options.uninstall:
            service = service_to_restart(options.root, options.rules, loaded)
            outcome = uninstall(options.root, service, restart, healthy, watch, options.rules)
        else:
            plan = planned(options, loaded)
            outcome = apply(
                options.root, plan, Path(options.bundle), options.version, restart, healthy, watch
            )
    return outcome, succeeded(outcome, options)


def kubelet_alone(by: Restart, healthz: str, timeout: float) -> tuple[Restart, Healthy]:
    """The restart and health check of a run with no API server: ``by`` restarts a unit, and the
    kubelet is healthy once its ``healthz`` says so within ``timeout`` of the last restart."""
    from credprovider.tool.agent.cluster import now
    from credprovider.tool.agent.health import KubeletHealth

    restarted = [now()]

    def restart(unit: str) -> None:
        restarted.append(now())
        by(unit)

    def healthy() -> str | None:
        return KubeletHealth(healthz, timeout).check(restarted[-1], "")

    return restart, healthy


def run_alone(change_node: Callable[[], int]) -> int:
    """The DaemonSet's container with no API server (the chart's files mode): ``change_node()``
    (apply or uninstall, its exit status) with SIGTERM held off until it ends, then the pod stays
    until stopped; a failure returns at once (the pod shows it: CrashLoopBackOff)."""
    from credprovider.tool.agent.termination import Termination

    termination = Termination().install()
    with termination.changing():  # SIGTERM waits for the change to end (agent/termination.py)
        code = change_node()
    if code != EXIT_OK or termination.requested:
        return code
    stay_until_stopped(code)


def await_dry_run(
    options: RunOptions, node: FleetMember, plan: AgentPlan, say: Callable[[str], None]
) -> None:
    """Until every provider answers a dry-run credential request (each new failure an Event and
    a line), as the kubelet would run it."""
    from credprovider.tool.agent.daemon import DRY_RUN_FAILED

    launcher = shlex.split(options.dry_run_launcher)
    bin_dir = plan.bin_dir if launcher else options.bundle
    images = dry_run_images(options.settings, plan.providers)
    said_problems: list[str] = []
    while problems := node.dry_run(plan, bin_dir, launcher, images):
        if problems != said_problems:
            node.event(DRY_RUN_FAILED, "; ".join(problems), warning=True)
            say(f"dry run failed: {'; '.join(problems)}")
            said_problems = problems
        time.sleep(DRY_RUN_RETRY_SECONDS)
    say("dry run passed: every provider answered")


def stay_until_stopped(code: int) -> NoReturn:
    """After the change: the pod stays (a DaemonSet's container must) until SIGTERM, then exits
    with ``code``, the change's own status. Both run modes end here."""
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(code))
    while True:
        signal.pause()

"""The real-runtime run's pods (inside the sandbox, tests/e2e/node.py): every pod of a scenario is
created through the API server, pulled by containerd from the registries of tests/e2e/registries.py
and run; what each pod ended as, what its container printed, the kubelet's events about it and the
registries' access log go to the result.

A token scenario (``token_scenario``: tests/e2e/federated.py's ``REAL_PULLS``) runs each pod as its
own service account, for the kubelet to send the plugin that pod's token.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from contextlib import ExitStack, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from emulators.aws import FakeEcr
from emulators.harness import Emulator
from emulators.registry import RegistryFront, Verifier, fingerprint
from emulators.tls import make_test_ca
from tests.e2e import controlplane, federated, fleet, registries, runtime, testimages, tokens
from tests.e2e.scenario import SCENARIOS, Pull
from tests.e2e.tokens import TokenPull

NAMESPACE = "default"
SERVICE_ACCOUNT = "puller"
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull")
TOKEN_SCENARIOS = {"registries": federated.REAL_PULLS}


@dataclass(frozen=True)
class Sandbox:
    front: RegistryFront
    runtime: runtime.Runtime
    scenario: tuple[Pull, ...]
    ecr: FakeEcr
    token_pulls: tuple[TokenPull, ...] = ()


def start(
    spec: dict[str, Any],
    run: Path,
    emulators: tuple[Emulator, Emulator, Emulator],
    cgroup_root: str,
    stack: ExitStack,
    host_checks: dict[str, Verifier] | None = None,
) -> Sandbox:
    """The registries (holding every image of the spec's scenario) and containerd, started;
    ``host_checks``: the verifiers of hosts no cloud's emulator speaks for."""
    aws, gcp, azure = emulators
    ecr: FakeEcr = aws.fakes["ecr"]  # type: ignore[assignment]
    ecr.rotate = True
    ecr.valid_seconds = spec.get("ecr_valid_seconds", ecr.valid_seconds)
    scenario = SCENARIOS[spec.get("scenario", "clouds")]
    token_pulls = TOKEN_SCENARIOS.get(spec.get("token_scenario", ""), ())
    images = sorted({pull.image for pull in token_pulls or scenario})
    admit = {host: frozenset(names) for host, names in spec.get("admit", {}).items()}
    mirrors: dict[str, str] = spec.get("mirrors", {})
    checks = {**registries.verifiers(aws, gcp, azure), **(host_checks or {})}
    front = RegistryFront(registries.hosts(images, checks, admit, mirrors))
    for mirror, upstream in mirrors.items():
        runtime.mirror(run / "containerd", upstream, f"https://{mirror}")
    ca = make_test_ca(run / "registry-ca")
    registries.start(
        run / "registries",
        Path(spec["registry"]),
        front,
        ca,
        stack,
        stack.enter_context((run / "registries.log").open("wb")),
    )
    busybox = Path(spec["busybox"])
    registries.push_all(front, images, busybox, spec["arch"])
    layer = testimages.busybox_layer(busybox)
    pause = testimages.archive(
        run / "pause.tar", runtime.PAUSE_IMAGE, testimages.pause(layer, spec["arch"])
    )
    runtime.make_subtree(cgroup_root)
    started = runtime.start(
        run / "containerd",
        Path(spec["containerd"]),
        Path(spec["crictl"]),
        pause,
        ca.bundle,
        stack,
        stack.enter_context((run / "containerd.log").open("wb")),
    )
    if spec.get("image_archive"):  # the release's image, as a registry would hand it over
        runtime.import_archive(
            started, Path(spec["image_archive"]), "--base-name", spec["image_name"].split(":")[0]
        )
    return Sandbox(front, started, scenario, ecr, token_pulls)


def stop(cgroup_root: str) -> list[str]:
    """Every other process of the sandbox's PID namespace killed and reaped, then the run's cgroup
    sub-tree removed; the cgroups that could not be (none, or the test fails)."""
    me = os.getpid()
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        if pid != me:
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                time.sleep(0.05)
        except ChildProcessError:
            break  # no child left
    return runtime.remove_subtree(cgroup_root)


def pod_name(wave: int, index: int, copy: int) -> str:
    return f"w{wave}-{index}-{copy}"


def ended(plane: controlplane.ControlPlane, pod: str) -> bool:
    """Has ``pod``'s container run to its end (and the pod's phase says so), or has its pull
    failed?"""
    found = plane.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}") or {}
    statuses = found.get("status", {}).get("containerStatuses") or []
    phase = found.get("status", {}).get("phase")
    for status in statuses:
        state = status.get("state", {})
        if "terminated" in state and phase in ("Succeeded", "Failed"):
            return True
        if state.get("waiting", {}).get("reason") in PULL_FAILURES:
            return True
    return False


def start_wave(
    plane: controlplane.ControlPlane, wave: int, scenario: tuple[Pull, ...]
) -> dict[str, str]:
    """``wave``'s pods created (bound to the node, on its network); pod name -> image."""
    started = {}
    pulls = [pull for pull in scenario if pull.wave == wave]
    for index, pull in enumerate(pulls):
        for copy in range(pull.pods):
            name = pod_name(wave, index, copy)
            plane.pod(NAMESPACE, name, pull.image, SERVICE_ACCOUNT, host_network=True)
            started[name] = pull.image
    return started


def start_token_wave(
    plane: controlplane.ControlPlane, wave: int, pulls: tuple[TokenPull, ...]
) -> dict[str, str]:
    """``wave``'s pods, each as its own service account (tokens.start_pods); pod -> image."""
    tokens.start_pods(plane, wave, pulls, host_network=True)
    return {pull.pod: pull.image for pull in pulls if pull.wave == wave}


def outcome(plane: controlplane.ControlPlane, pod: str) -> dict[str, Any]:
    """What ``pod`` ended as: its phase, its container's state, what it printed, the events."""
    found = plane.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}") or {}
    status = found.get("status", {})
    uid = found.get("metadata", {}).get("uid", "")
    printed = runtime.pod_log(NAMESPACE, pod, uid, "c")
    return {
        "phase": status.get("phase"),
        "state": (status.get("containerStatuses") or [{}])[0].get("state", {}),
        "printed": printed,
        "events": plane.events(NAMESPACE, pod),
    }


def run(
    spec: dict[str, Any],
    plane: controlplane.ControlPlane,
    sandbox: Sandbox,
    wait_for: Callable[[str, Callable[[], bool], float], None],
    metrics: Callable[[], dict[str, float]],
) -> dict[str, Any]:
    """Both waves of ``scenario``: each wave's pods to their end, then the kubelet's metrics."""
    wait_for(
        "the node to register",
        lambda: plane.get(f"/api/v1/nodes/{controlplane.NODE_NAME}") is not None,
        60,
    )
    plane.service_account(NAMESPACE, SERVICE_ACCOUNT, {})
    scenario = sandbox.scenario
    pods: dict[str, str] = {}
    waves = {}
    for wave in sorted({pull.wave for pull in sandbox.token_pulls or scenario}):
        started = (
            start_token_wave(plane, wave, sandbox.token_pulls)
            if sandbox.token_pulls
            else start_wave(plane, wave, scenario)
        )
        pods.update(started)
        for pod in started:
            wait_for(f"{pod} to run or fail its pull", lambda pod=pod: ended(plane, pod), 120)
        time.sleep(1)
        waves[str(wave)] = metrics()
        time.sleep(spec.get("wave_gap", 0))  # for credentials to expire before the next wave
    image_pod = {}
    if spec.get("image_archive"):
        plane.pod(
            NAMESPACE, "credprovider-image", spec["image_name"], SERVICE_ACCOUNT, "Never", True,
            ["ecr-credential-provider", "--version"],
        )  # fmt: skip
        wait_for("the release image's pod", lambda: ended(plane, "credprovider-image"), 60)
        image_pod = outcome(plane, "credprovider-image")
    agent = {}
    if spec.get("agent_pods"):  # the fleet chart's agent on this node (tests/e2e/fleet.py)
        agent = fleet.run(
            plane, spec["agent_pods"]["install"], spec["agent_pods"]["uninstall"], wait_for
        )
    return {
        "agent": agent,
        "image_pod": image_pod,
        "pods": {pod: {"image": image, **outcome(plane, pod)} for pod, image in pods.items()},
        "waves": waves,
        "registry_log": [asdict(entry) for entry in sandbox.front.log],
        "ecr_issued": {
            fingerprint(password): asdict(issue) for password, issue in sandbox.ecr.issued.items()
        },
    }

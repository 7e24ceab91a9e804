"""One real-kubelet run, inside private namespaces: ``python -m tests.e2e.node SPEC.json``.

Started by tests/e2e/test_real_kubelet.py as ``unshare --net --mount --pid --fork --mount-proc``, so
everything it does stays inside: the network is loopback (plus a private node address on ``lo``),
the mounts it makes (/var/lib from the run's directory, a tmpfs over /var/log, the kernel settings the kubelet insists on,
an /etc overlay holding the node's azure.json) vanish with the mount namespace, and every process
it starts dies with its PID namespace. Nothing on the host is touched.

It starts the project's emulators, the fake CRI and the kubelet (standalone: static pods, no API
server) with the bundle as ``--image-credential-provider-bin-dir``, starts the pods of
tests/e2e/scenario.py in two waves, and writes what happened as JSON: every PullImage the runtime
received, the kubelet's credential-provider metrics after each wave, the credentials the emulators
issued, and the kubelet's log. With ``"doctor": true`` in the spec, after the first wave it runs
``credprovider doctor`` on the node with each seeded fault (tests/e2e/doctor_faults.py).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from emulators.aws import NODE_KEY, NODE_SECRET, StsRecorder
from emulators.eksauth import FakeEksAuth
from emulators.harness import (
    SAFE_ENV,
    Emulator,
    aws_emulator,
    azure_emulator,
    gcp_emulator,
)
from emulators.http import serve
from tests.e2e import controlplane, federated, realpulls, runtime, tokens
from tests.e2e.doctor_faults import doctor, seed_faults
from tests.e2e.issued import exchanges, give_identities, issued_identities
from tests.e2e.scenario import (
    ACR_REGISTRIES,
    ACR_TEAM_B,
    SCENARIOS,
    Pull,
)

NODE_IP = "10.213.0.1"
READ_ONLY_PORT = 10255
METRIC_PREFIXES = (
    "kubelet_credential_provider_plugin_duration_count",
    "kubelet_credential_provider_plugin_errors_total",
)
# What the kubelet checks with protectKernelDefaults (it refuses to start otherwise); shown to it
# through files bind-mounted over /proc/sys in this mount namespace only.
KERNEL_SETTINGS = {
    "kernel/panic": "10",
    "kernel/panic_on_oops": "1",
    "vm/overcommit_memory": "1",
}
AZURE_JSON = "/etc/kubernetes/azure.json"


def sh(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


def isolate(run: Path, real_runtime: bool = False) -> None:
    """The mounts and the network this run needs, in its own namespaces (a real runtime keeps its
    shims' and runc's state in /run)."""
    sh("mount", "--make-rprivate", "/")
    # /var/lib on the run's disk, as a node's (the agent refuses a tmpfs home while the
    # kubelet's files last)
    (run / "var-lib").mkdir(parents=True, exist_ok=True)
    sh("mount", "--bind", str(run / "var-lib"), "/var/lib")
    for directory in ("/var/log", *(("/run",) if real_runtime else ())):
        sh("mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", directory)
    for name, value in KERNEL_SETTINGS.items():
        shown = run / f"sysctl-{name.replace('/', '-')}"
        shown.write_text(f"{value}\n")
        sh("mount", "--bind", str(shown), f"/proc/sys/{name}")
    # /etc/kubernetes/azure.json (the path the shipped config passes) without writing to /etc
    upper, work = run / "etc-upper", run / "etc-work"
    upper.mkdir()
    work.mkdir()
    sh(
        "mount", "-t", "overlay", "overlay",
        "-o", f"lowerdir=/etc,upperdir={upper},workdir={work}", "/etc",
    )  # fmt: skip
    sh("ip", "link", "set", "lo", "up")
    sh("ip", "addr", "add", f"{NODE_IP}/32", "dev", "lo")


def pod_manifest(name: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": image, "imagePullPolicy": "Always"}],
            "restartPolicy": "Never",
        },
    }


def write_wave(manifests: Path, wave: int, scenario: tuple[Pull, ...]) -> list[Pull]:
    pulls = [pull for pull in scenario if pull.wave == wave]
    for index, pull in enumerate(pulls):
        for copy in range(pull.pods):
            name = f"w{wave}-{index}-{copy}"
            (manifests / f"{name}.json").write_text(json.dumps(pod_manifest(name, pull.image)))
    return pulls


def kubelet_config(
    run: Path, verification_policy: str | None = None, runtime: str = "", cgroup_root: str = ""
) -> dict[str, Any]:
    """The kubelet's configuration: on the fake CRI, or on the real runtime at ``runtime`` with
    its pods' cgroups under ``cgroup_root`` (the run's own sub-tree)."""
    socket = runtime or f"unix://{run}/cri.sock"
    policy = (
        {}
        if verification_policy is None
        else {"imagePullCredentialsVerificationPolicy": verification_policy}
    )
    cgroups = (
        {"cgroupsPerQOS": True, "cgroupRoot": cgroup_root, "enforceNodeAllocatable": ["pods"]}
        if cgroup_root
        else {"cgroupsPerQOS": False, "enforceNodeAllocatable": []}
    )
    return {
        **policy,
        **cgroups,
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "staticPodPath": str(run / "manifests"),
        "fileCheckFrequency": "1s",
        "syncFrequency": "2s",
        "containerRuntimeEndpoint": socket,
        "imageServiceEndpoint": socket,
        "readOnlyPort": READ_ONLY_PORT,
        "address": NODE_IP,
        "healthzBindAddress": "127.0.0.1",
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "makeIPTablesUtilChains": False,
        "registryPullQPS": 0,
        "serializeImagePulls": False,
        "evictionHard": {},
        "protectKernelDefaults": True,
        "failSwapOn": False,
        "resolvConf": "",
        "imageMinimumGCAge": "24h",
    }


def node_environment(emulators: list[Emulator], ca_bundle: Path) -> dict[str, str]:
    """The kubelet's environment (which it passes on to the plugins): what each emulator sets
    beyond the shared safe defaults, the loopback resolve maps joined, and one CA bundle holding
    every emulator's test CA."""
    own: dict[str, str] = {}  # what the emulators set beyond the safe defaults
    resolve, bundles = [], []
    for emulator in emulators:
        for key, value in emulator.env.items():
            if key == "CREDPROVIDER_TEST_RESOLVE":
                resolve.append(value)
            elif key == "REQUESTS_CA_BUNDLE":
                bundles.append(Path(value).read_text())
            elif SAFE_ENV.get(key) == value:
                continue  # the shared safe default
            elif own.setdefault(key, value) != value:
                raise ValueError(f"two emulators set {key} differently")
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **SAFE_ENV, **own}
    env["CREDPROVIDER_TEST_RESOLVE"] = ",".join(resolve)
    ca_bundle.write_text("".join(bundles))
    env["REQUESTS_CA_BUNDLE"] = str(ca_bundle)
    return env


def pulls_seen(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cri_listening(socket: Path, cri: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """Wait until the stand-in CRI listens at ``socket``: a kubelet started before it exits at
    once (connect: no such file), before it reads its credential provider flags."""
    deadline = time.monotonic() + timeout
    while not socket.exists():
        if cri.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the stand-in CRI did not listen at {socket} ({cri.poll()})")
        time.sleep(0.05)


def wait_for(what: str, ready: Any, timeout: float, kubelet: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if kubelet.poll() is not None:
            raise RuntimeError(
                f"the kubelet exited ({kubelet.returncode}) while waiting for {what}"
            )
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")


def metrics() -> dict[str, float]:
    url = f"http://{NODE_IP}:{READ_ONLY_PORT}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith(METRIC_PREFIXES):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    run = Path(spec["run_dir"])
    real = bool(spec.get("runtime"))
    isolate(run, real_runtime=real)
    (run / "manifests").mkdir()
    cgroup_root = runtime.subtree_name(run) if real else ""
    result: dict[str, Any] = {"waves": {}}
    with ExitStack() as stack:
        if real:
            # last out: nothing of the run may keep a cgroup (they are the host's)
            stack.callback(lambda: result.update(cgroups_left=realpulls.stop(cgroup_root)))
        # the service-account run assumes roles at STS (moto)
        aws = stack.enter_context(aws_emulator(with_moto=bool(spec.get("control_plane"))))
        gcp = stack.enter_context(gcp_emulator())
        azure = stack.enter_context(azure_emulator((*ACR_REGISTRIES, ACR_TEAM_B)))
        Path(AZURE_JSON).parent.mkdir(parents=True, exist_ok=True)
        Path(AZURE_JSON).write_text(Path(azure.files["config"]).read_text())
        give_identities(aws, gcp, azure)
        env = node_environment([aws, gcp, azure], run / "ca-bundle.pem")
        sandbox = None
        backends: dict[str, Any] = {}  # the registry plugin's stand-ins (federated.py)
        if real:
            sandbox = realpulls.start(
                spec, run, (aws, gcp, azure), cgroup_root, stack, federated.verifiers(backends)
            )
            endpoint = sandbox.runtime.address
        else:
            endpoint = ""
            cri = subprocess.Popen(
                [spec["fakecri"], "--socket", str(run / "cri.sock"),
                 "--pulls", str(run / "pulls.jsonl")],
                stderr=(run / "fakecri.log").open("wb"),
            )  # fmt: skip
            stack.callback(cri.kill)
            cri_listening(run / "cri.sock", cri)
        (run / "kubelet.yaml").write_text(
            json.dumps(
                kubelet_config(
                    run, spec.get("verification_policy"), endpoint, f"/{cgroup_root}" * real
                )
            )
        )
        plane = None
        sts_recorder = None
        if spec.get("control_plane"):
            # STS in front of moto, recording which role each session key was issued for; each
            # such key's ECR tokens carry a password naming that role
            ecr_fake: Any = aws.fakes["ecr"]
            sts_recorder = StsRecorder(
                str(aws.fakes["moto"]),
                lambda key, role: ecr_fake.passwords.__setitem__(key, f"ecr-password-as-{role}"),
            )
            env["AWS_ENDPOINT_URL_STS"] = stack.enter_context(serve(sts_recorder)).url
            plane = controlplane.start(
                run / "control-plane",
                spec["etcd"],
                spec["apiserver"],
                NODE_IP,
                stack,
                stack.enter_context((run / "control-plane.log").open("wb")),
            )
            registries = spec.get("token_scenario") == "registries"
            if registries:
                federated.prepare(plane)
                backends.update(
                    federated.start_backends(stack, (plane.directory / "sa.pub").read_text())
                )
            # tokens.py's service accounts: the fake CRI's cloud runs', and the real runtime's
            # registries run's (its Pod Identity pods)
            if registries == real:
                tokens.prepare(plane)
            # EKS Auth, checking each pod's token with this API server's key; each key it issues
            # gets ECR tokens naming its role, and is recorded as the STS ones are
            ecr_fake.secret_keys[NODE_KEY] = NODE_SECRET

            def pod_role_issued(key: str, secret: str, role: str) -> None:
                ecr_fake.secret_keys[key] = secret
                ecr_fake.passwords[key] = f"ecr-password-as-{role}"
                sts_recorder.roles[key] = role  # type: ignore[union-attr]

            eks_auth = FakeEksAuth(
                tokens.POD_IDENTITY_CLUSTER,
                (plane.directory / "sa.pub").read_text(),
                {NODE_KEY: NODE_SECRET},
                dict(tokens.POD_IDENTITY_ASSOCIATIONS),
                on_issued=pod_role_issued,
            )
            env["AWS_ENDPOINT_URL_EKS_AUTH"] = stack.enter_context(serve(eks_auth)).url
        else:
            write_wave(run / "manifests", 1, SCENARIOS[spec.get("scenario", "clouds")])
        if spec.get("refused_flags"):
            result["refused"] = _refused_starts(spec, run, env)
            Path(spec["result"]).write_text(json.dumps(result))
            return 0
        log = stack.enter_context((run / "kubelet.log").open("wb"))
        kubelet = start_kubelet(spec, run, env, log, plane)
        stack.callback(
            lambda: kubelet.send_signal(signal.SIGTERM) if kubelet.poll() is None else None
        )
        try:
            if sandbox is not None and plane is not None:
                result["real"] = realpulls.run(
                    spec, plane, sandbox,
                    lambda what, ready, timeout: wait_for(what, ready, timeout, kubelet),
                    metrics,
                )  # fmt: skip
            elif plane is not None:
                result["tokens"] = _token_pulls(spec, run, kubelet, plane, result)
            else:
                _watch_waves(spec, run, kubelet, result)
            if spec.get("doctor"):
                result["doctor"] = seed_faults(
                    spec, run / "manifests", gcp.servers["metadata"].stop
                )
        except (RuntimeError, OSError) as exc:
            result["error"] = str(exc)
        result["pulls"] = pulls_seen(run / "pulls.jsonl")
        if backends:
            result["federated"] = federated.issued(backends)
        result["issued"] = {
            "ecr": [aws.fakes["ecr"].password],  # type: ignore[attr-defined]
            "acr": list(azure.fakes["acr"].refresh_tokens),  # type: ignore[attr-defined]
            "gcp": [gcp.fakes["metadata"].access_token],  # type: ignore[attr-defined]
        }
        result["identities"] = issued_identities(aws, gcp, azure)
        result["exchanges"] = exchanges(aws, gcp, azure)
        result["exchanges"]["assumed_roles"] = sts_recorder.roles if sts_recorder else {}
        if plane is not None and spec.get("bundle") and "error" not in result:
            # what credprovider doctor tells the operator of this node (after the pulls' figures:
            # its dry runs call the emulators too)
            said = doctor(Path(spec["bundle"]), spec.get("tools", ""))
            result["real" if real else "tokens"]["doctor"] = said
            if spec.get("uninitialized_doctor"):
                # KEP-2395: the taint a kubelet on --cloud-provider=external registers with, as
                # when no cloud controller manager runs; what doctor reads of the real Node then
                status, answer = plane.request(
                    "PATCH",
                    f"/api/v1/nodes/{NODE_NAME}",
                    {"spec": {"taints": [{"key": UNINITIALIZED, "effect": "NoSchedule"}]}},
                    content_type="application/strategic-merge-patch+json",
                )
                if status != 200:
                    raise RuntimeError(f"tainting the node: HTTP {status}: {answer}")
                result["tokens"]["doctor_uninitialized"] = doctor(
                    Path(spec["bundle"]), spec.get("tools", "")
                )
    for name in ("kubelet", "containerd"):
        if (run / f"{name}.log").exists():
            result[f"{name}_log"] = (run / f"{name}.log").read_text(errors="replace")[-20000:]
    Path(spec["result"]).write_text(json.dumps(result))
    return 0


def _token_pulls(
    spec: dict[str, Any],
    run: Path,
    kubelet: subprocess.Popen[bytes],
    plane: controlplane.ControlPlane,
    result: dict[str, Any],
) -> dict[str, Any]:
    """The service-account run: once the node has registered, its pods; then what the kubelet
    and the emulators saw."""
    wait_for(
        "the node to register",
        lambda: plane.get(f"/api/v1/nodes/{controlplane.NODE_NAME}") is not None,
        60,
        kubelet,
    )
    scenario = spec.get("token_scenario", "clouds")
    pulls = federated.PULLS if scenario == "registries" else tokens.SCENARIOS[scenario]
    for wave in (1, 2):
        wanted = tokens.start_pods(plane, wave, pulls)
        wait_for(
            f"wave {wave}'s {wanted} pulls",
            lambda wanted=wanted: len(pulls_seen(run / "pulls.jsonl")) >= wanted,
            spec.get("timeout", 120),
            kubelet,
        )
        time.sleep(1)
        result["waves"][str(wave)] = metrics()
    if spec.get("verify"):
        tokens.start_pods(plane, 3)
        for pull in tokens.VERIFY_PULLS:
            wait_for(
                f"{pull.pod} to start",
                lambda pod=pull.pod: plane.started(tokens.NAMESPACE, pod),
                spec.get("timeout", 120),
                kubelet,
            )
        time.sleep(1)
        result["waves"]["3"] = metrics()
    return {
        "signing_key": (plane.directory / "sa.pub").read_text(),
        "pods": {
            pull.pod: plane.get(f"/api/v1/namespaces/{tokens.NAMESPACE}/pods/{pull.pod}")
            for pull in pulls
        },
        "service_accounts": {
            name: plane.get(f"/api/v1/namespaces/{tokens.NAMESPACE}/serviceaccounts/{name}")
            for name in tokens.SERVICE_ACCOUNTS
        },
    }


NODE_NAME = "credprovider-e2e"
UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"


def _refused_starts(spec: dict[str, Any], run: Path, env: dict[str, str]) -> dict[str, Any]:
    """The real kubelet started with each of ``spec["refused_flags"]`` added to a start that
    works: whether it exits within ``spec["refused_wait"]`` seconds (and its last lines), or is
    still running then."""
    said = {}
    for index, flags in enumerate(spec["refused_flags"]):
        log_path = run / f"kubelet-refused-{index}.log"
        with log_path.open("wb") as log:
            kubelet = start_kubelet(spec, run, env, log, extra=flags)
            try:
                code: int | None = kubelet.wait(timeout=spec.get("refused_wait", 60))
            except subprocess.TimeoutExpired:
                kubelet.send_signal(signal.SIGTERM)
                kubelet.wait(timeout=30)
                code = None
        lines = log_path.read_text(errors="replace").splitlines()
        said[" ".join(flags)] = {"exit": code, "log": lines[-5:]}
    return said


def start_kubelet(
    spec: dict[str, Any],
    run: Path,
    env: dict[str, str],
    log: IO[bytes],
    plane: controlplane.ControlPlane | None = None,
    extra: list[str] | None = None,
    credential_flags: tuple[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """The real kubelet, standalone or registered with the sandbox's control plane, with the
    plugins' config and bin dir under test (``credential_flags``: another config and bin dir) and
    ``extra`` flags after them."""
    joined = [] if plane is None else [f"--kubeconfig={plane.kubelet_kubeconfig}"]
    config, bin_dir = credential_flags or (spec["config"], spec["bin_dir"])
    return subprocess.Popen(
        [
            spec["kubelet"],
            *joined,
            f"--config={run / 'kubelet.yaml'}",
            f"--image-credential-provider-config={config}",
            f"--image-credential-provider-bin-dir={bin_dir}",
            f"--node-ip={NODE_IP}",
            f"--hostname-override={NODE_NAME}",
            f"--volume-plugin-dir={run / 'volume-plugins'}",
            f"--root-dir={run / 'kubelet-root'}",
            f"--cert-dir={run / 'pki'}",
            "--v=2",
            *(extra or []),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _watch_waves(
    spec: dict[str, Any], run: Path, kubelet: subprocess.Popen[bytes], result: dict[str, Any]
) -> None:
    """Wave 1's pods, then wave 2's (not for the doctor's run): wait for each wave's pulls, then
    read the kubelet's metrics."""
    scenario = SCENARIOS[spec.get("scenario", "clouds")]
    for wave in (1,) if spec.get("doctor") else (1, 2):
        if wave == 2:
            write_wave(run / "manifests", 2, scenario)
        wanted = sum(pull.pods for pull in scenario if pull.wave <= wave)
        wait_for(
            f"wave {wave}'s {wanted} pulls",
            lambda wanted=wanted: len(pulls_seen(run / "pulls.jsonl")) >= wanted,
            spec.get("timeout", 120),
            kubelet,
        )
        time.sleep(1)  # the metrics of the last exec are recorded as its pull starts
        result["waves"][str(wave)] = metrics()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""The real kubelet on a real container runtime: containerd 2.x pulls every image of
tests/e2e/scenario.py from registries that take only the credentials the clouds' emulators issued
(tests/e2e/registries.py), and runs it; pods are created through the sandbox's API server.

A pod owed credentials runs, prints the image it is, and the registry's access log shows its pulls
carried exactly the identity its provider pulls as; a pod owed none fails at the registry with 401,
and the kubelet's event says so. The fake CRI (tests/e2e/test_real_kubelet.py) is kept for what
only it shows: the exact AuthConfig the kubelet hands over with each PullImage, counted per pull.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from credprovider.paths import AGENT_BIN_DIR, AGENT_CONFIG
from credprovider.tool.agent.bootstrap import BOOTSTRAP_PROVIDER, CONFIG_TEXT, PLUGIN_TEXT
from emulators.aws import NODE_KEY
from emulators.gcp import FakeMetadata
from release import image
from release.bundle import BUNDLE_DIR, REPO, project_version
from tests.chart.helm import agent_pod, helm_binary
from tests.e2e import federated, tokens
from tests.e2e.registries import split, stored_as
from tests.e2e.runtime import RUNC, remove_subtree, subtree_name
from tests.e2e.sandbox import (
    host_state,
    identities_node,
    left_running,
    linked_bin_dir,
    run_with_control_plane,
)
from tests.e2e.scenario import (
    CASE_PULLS,
    ECR_KEYS,
    IDENTITIES,
    IDENTITY_PULLS,
    MIRROR_HOST,
    PROVIDERS,
    PULLS,
    Pull,
)
from tests.helpers import config_file, provider_entry, unavailable

CONFIG_DIR = REPO / "config"
# The identity each shipped config's provider pulls as on the sandbox's node: the node's access
# key, the kubelet identity of azure.json, the node's default service account.
NODE_IDENTITY = {
    "ecr-credential-provider": NODE_KEY,
    "acr-credential-provider": "kubelet-identity-client-id",
    "auth-provider-gcp": FakeMetadata().email,
}
# What containerd's error says when a registry refuses a pull that carried no credentials: a bearer
# challenge's token endpoint answers 401; after a basic challenge containerd has nothing to send.
REFUSED = ("401 Unauthorized", "no basic auth credentials")
RUNS = {
    "config/": (CONFIG_DIR, set(PROVIDERS)),
    "azure.yaml": (CONFIG_DIR / "azure.yaml", {"acr-credential-provider"}),
}


RealRun = Callable[..., dict[str, Any]]


@pytest.fixture
def real_run(
    binaries: tuple[Path, Path],
    control_plane_binaries: tuple[Path, Path],
    runtime_tools: dict[str, str],
    tmp_path: Path,
) -> RealRun:
    """Runs the sandbox on containerd with a config (and spec keys); checks that the host is as it
    was afterwards (no mount, cgroup, file or network device left, no process of the run alive)
    and returns what the run saw."""

    def run(config: Path, **more: Any) -> dict[str, Any]:
        before = host_state()
        try:
            result = run_with_control_plane(
                binaries, control_plane_binaries, config, tmp_path, runtime="containerd",
                **runtime_tools, **more,
            )  # fmt: skip
        finally:  # a sandbox that died leaves its cgroups (the host's): take them, then fail
            left = remove_subtree(subtree_name(tmp_path / "run"))
        assert left == []
        after = host_state()
        tail = result.get("kubelet_log", "")[-3000:]
        assert "error" not in result, f"{result.get('error')}\n{tail}"
        assert result["cgroups_left"] == []
        assert after == before
        tools = [Path(runtime_tools[name]) for name in ("containerd", "registry", "crictl")]
        assert left_running(*binaries, *control_plane_binaries, *tools, Path(RUNC)) == []
        real: dict[str, Any] = result["real"]
        # what the token exchanges issued (the registry plugin's stand-ins, EKS Auth's roles)
        real["federated"] = result.get("federated", {})
        real["assumed_roles"] = result["exchanges"]["assumed_roles"]
        return real

    return run


def manifest_requests(real: dict[str, Any], image: str, host: str = "") -> list[dict[str, Any]]:
    """The registry's log of ``image``'s manifest requests (on ``host``, else the image's)."""
    reference = split(image)
    prefix = f"/v2/{reference.repository}/manifests/"
    return [
        entry
        for entry in real["registry_log"]
        if entry["host"] == (host or reference.host) and entry["path"].startswith(prefix)
    ]


def assert_ran(real: dict[str, Any], pod: str, identity: str) -> list[dict[str, Any]]:
    """``pod`` ran its image, whose manifest was pulled as ``identity`` (and as nobody else)."""
    outcome = real["pods"][pod]
    image = outcome["image"]
    assert outcome["phase"] == "Succeeded", (pod, image, outcome)
    assert outcome["printed"] == [f"pulled {stored_as(image)}"], (pod, image)
    granted = [entry for entry in manifest_requests(real, image) if entry["status"] == 200]
    assert granted, (pod, image)
    assert {entry["identity"] for entry in granted} == {identity}, (pod, image)
    return granted


def assert_refused(real: dict[str, Any], pod: str) -> None:
    """``pod``'s pull carried no credentials, the registry refused it, and the event says so."""
    outcome = real["pods"][pod]
    image = outcome["image"]
    assert outcome["phase"] == "Pending", (pod, image, outcome)
    assert outcome["state"]["waiting"]["reason"] in ("ErrImagePull", "ImagePullBackOff"), pod
    failed = [
        e for e in outcome["events"] if e.startswith(f'Failed: Failed to pull image "{image}"')
    ]
    assert failed and all(any(said in e for said in REFUSED) for e in failed), (image, failed)
    requests = manifest_requests(real, image)
    assert requests, image
    assert {(e["status"], e["identity"], e["credential"]) for e in requests} == {(401, "", "")}


def pods_of(real: dict[str, Any], pulls: tuple[Pull, ...]) -> dict[str, Pull]:
    by_image = {pull.image: pull for pull in pulls}
    return {pod: by_image[outcome["image"]] for pod, outcome in real["pods"].items()}


@pytest.mark.parametrize("config", list(RUNS))
def test_containerd_pulls_every_registry_form_with_the_plugins_credentials(
    real_run: RealRun, runtime_tools: dict[str, str], tmp_path: Path, config: str
) -> None:
    """Every registry form the shipped configs claim (ECR in three partitions, FIPS and dual-stack,
    ECR Public, an ACR login server and its geo-replica, Container Registry and Artifact Registry,
    ``:443`` forms) is pulled by containerd with the plugins' credentials; Docker Hub and Quay,
    which no provider claims, and the clouds no provider of the run serves refuse the pull."""
    path, providers = RUNS[config]
    archive = REPO / "dist" / "release" / image.archive_name(project_version())
    if not archive.exists():
        unavailable(f"{archive} is not built: make release")
    image_name = f"docker.io/library/credprovider:{project_version()}"
    agent_values = ("image.repository=docker.io/library/credprovider", "image.pullPolicy=Never",
                    "providers={aws,azure,gcp}")  # fmt: skip
    helm = helm_binary()
    real = real_run(
        path,
        bundle=str(BUNDLE_DIR.resolve()), tools=str(Path(runtime_tools["crictl"]).parent),
        image_archive=str(archive), image_name=image_name,
        agent_pods={
            "install": agent_pod(helm, *agent_values),
            "uninstall": agent_pod(helm, *agent_values, "action=uninstall"),
        },
    )  # fmt: skip

    # the fleet chart's agent pod (mode files) installs on the node, and uninstall puts it back
    agent = real["agent"]
    assert agent["install"]["printed"][0] == "installed", agent["install"]
    home = "/var/lib/credprovider/agent"
    bin_dir = AGENT_BIN_DIR  # the chart's mode files, by default
    between = agent["between"]
    assert between[f"{home}/current"] == f"link:versions/{project_version()}"
    assert between[f"{home}/versions/{project_version()}/credprovider"].startswith("file:")
    for name in PROVIDERS:
        assert between[f"{bin_dir}/{name}"] == f"link:{home}/current/{name}"
    written = yaml.safe_load(agent["config"])
    assert [p["name"] for p in written["providers"]] == list(PROVIDERS)
    assert agent["uninstall"]["printed"][0] == "uninstalled", agent["uninstall"]
    # byte for byte, but for the directory the kubelet made for the hostPath (DirectoryOrCreate)
    # and the bootstrap, where the kubelet's flags (set at provisioning) name the config and the
    # plugins (agent/bootstrap.py: the node had no config before)
    digest = lambda text: "file:" + hashlib.sha256(text.encode()).hexdigest()[:16]  # noqa: E731
    assert agent["after"] == {
        **agent["before"],
        "/var/lib/credprovider": "dir",
        home: "dir",
        bin_dir: "dir",
        f"{bin_dir}/{BOOTSTRAP_PROVIDER}": digest(PLUGIN_TEXT),
        AGENT_CONFIG: digest(CONFIG_TEXT),
    }

    # the release's OCI image runs under containerd as its non-root user (runAsNonRoot), its
    # plugins on PATH
    ran = real["image_pod"]
    assert ran["phase"] == "Succeeded", ran
    said = ran["printed"]
    assert said[0] == f"ecr-credential-provider version {project_version()} (credprovider)"
    assert f"linux/{runtime_tools['arch']}" in said[1]
    pulls = pods_of(real, PULLS)
    assert sorted(p.image for p in pulls.values()) == sorted(
        pull.image for pull in PULLS for _ in range(pull.pods)
    )
    for pod, pull in pulls.items():
        if pull.provider in providers:
            assert_ran(real, pod, NODE_IDENTITY[pull.provider])
        else:
            assert_refused(real, pod)

    # the kubelet's cache still answers wave 2 with no exec (as on the fake CRI)
    assert real["waves"]["1"] == real["waves"]["2"]

    # credprovider doctor on this node lists what containerd holds among the images it dry-runs
    doctor = real["doctor"]
    held = {pull.image for pull in PULLS if pull.provider in providers} | {
        "registry.k8s.io/pause:3.10.2",
        image_name,
    }
    infos = [c["message"] for c in doctor["checks"] if c["status"] == "info"]
    socket = f"unix://{tmp_path}/run/containerd/containerd.sock"
    assert f"{len(held)} image(s) from crictl images ({socket})" in infos, infos
    named = {c["message"].split(": ", 1)[0] for c in doctor["checks"] if c["area"] == "image"}
    assert held <= named


def test_two_providers_of_each_plugin_pull_as_their_own_identity_through_containerd(
    real_run: RealRun, tmp_path: Path
) -> None:
    """The identities scenario (#33) through containerd: each pull reaches its registry as exactly
    its own provider's identity (an access key, a managed identity, an impersonated account)."""
    config, bin_dir = identities_node(tmp_path / "node", None)
    real = real_run(
        config, bin_dir=str(bin_dir), scenario="identities"
    )  # fmt: skip
    by_name = {provider.name: provider for provider in IDENTITIES}
    for pod, pull in pods_of(real, IDENTITY_PULLS).items():
        if pull.provider is None:
            assert_refused(real, pod)
        else:
            assert_ran(real, pod, by_name[pull.provider].identity)


def cases_node(directory: Path) -> tuple[Path, Path]:
    """Two providers of the ECR plugin claim account A's us-west-2 registry, team B's first; team
    A's also claims the mirrored us-east-1 registry."""
    west, east = split(CASE_PULLS[0].image).host, split(CASE_PULLS[1].image).host
    providers = [
        provider_entry(
            name=f"ecr-credential-provider-{team}",
            matchImages=matched,
            env=[
                {"name": "AWS_ACCESS_KEY_ID", "value": ECR_KEYS[team]},
                {"name": "AWS_SECRET_ACCESS_KEY", "value": f"{team}-secret"},
            ],
        )
        for team, matched in (("team-b", [west]), ("team-a", [west, east]))
    ]
    bin_dir = linked_bin_dir(
        directory, ("ecr-credential-provider-team-b", "ecr-credential-provider-team-a")
    )
    return config_file(directory, *providers), bin_dir


ECR_VALID_SECONDS = 16  # long enough for wave 1 on a loaded 2-core machine


def test_what_only_a_real_runtime_shows(real_run: RealRun, tmp_path: Path) -> None:
    """Several credentials for one image, a mirror in hosts.toml, and a credential that expires
    between two pulls (docs/operators.md, "On a real container runtime")."""
    config, bin_dir = cases_node(tmp_path / "node")
    west, east = split(CASE_PULLS[0].image).host, split(CASE_PULLS[1].image).host
    real = real_run(
        config, bin_dir=str(bin_dir),
        scenario="cases", admit={west: [ECR_KEYS["team-a"]], east: [ECR_KEYS["team-a"]]},
        mirrors={MIRROR_HOST: east}, ecr_valid_seconds=ECR_VALID_SECONDS,
        wave_gap=ECR_VALID_SECONDS + 1,
    )  # fmt: skip
    pods = {pull.image: pod for pod, pull in pods_of(real, CASE_PULLS).items()}
    team_a = ECR_KEYS["team-a"]

    # several credentials: the kubelet hands the runtime team B's, then team A's; the registry
    # refuses the first and the pull succeeds with the second
    first = CASE_PULLS[0].image
    granted = assert_ran(real, pods[first], team_a)
    refused = [e for e in manifest_requests(real, first) if e["status"] == 401 and e["credential"]]
    assert refused and refused[0]["note"] == f"{ECR_KEYS['team-b']} may not pull from {west}"
    assert refused[0]["at"] < granted[0]["at"]

    # a mirror: containerd asks it first, and sends it the credentials the plugin gave for the
    # registry (containerd 2.4.2, measured here; containerd #10540 describes credentials pinned to
    # their host); the mirror refuses them and containerd pulls from the registry itself
    mirrored = CASE_PULLS[1].image
    upstream = assert_ran(real, pods[mirrored], team_a)
    at_mirror = manifest_requests(real, mirrored, MIRROR_HOST)
    assert at_mirror and {e["status"] for e in at_mirror} == {401}
    sent = {e["credential"] for e in at_mirror}
    assert sent == {"", upstream[0]["credential"]}
    assert at_mirror[0]["at"] <= upstream[0]["at"]

    # expiry: wave 2 pulls from the same registry after wave 1's token expired; a new exec gives
    # a new token, and the expired one is not sent again
    later = CASE_PULLS[2].image
    second = assert_ran(real, pods[later], team_a)
    issued = real["ecr_issued"]
    old, new = granted[0]["credential"], second[0]["credential"]
    assert old != new
    assert issued[old]["expires_at"] < second[0]["at"] < issued[new]["expires_at"]
    sent_later = {e["credential"] for e in real["registry_log"] if e["at"] >= second[0]["at"]}
    assert old not in sent_later
    name = 'kubelet_credential_provider_plugin_duration_count{plugin_name="ecr-credential-provider-team-a"}'
    assert real["waves"]["2"][name] > real["waves"]["1"][name]


# whose credential each registry of the token run says it was (tests/e2e/federated.py's verifiers)
EXCHANGED = {
    "quay": f"quay:{federated.ROBOT}",
    "quay-sts": f"quay:{federated.ROBOT}",
    "jfrog": f"artifactory:{federated.JFROG_USER}",
    "cloudsmith": "cloudsmith:token",
    "vault": f"vault:{federated.VAULT_USER}",
    "secret": f"secret:{federated.SECRET_USER}",
}


def test_registries_take_only_the_credential_each_pods_token_was_exchanged_for(
    real_run: RealRun, tmp_path: Path
) -> None:
    """#64 through containerd: each registry takes only what the exchange issued for the pod's
    own token (a Quay robot token, an Artifactory or Cloudsmith token, Vault's secret, the pull
    Secret's), and ECR takes the Pod Identity association's role; a pod whose service account is
    not trusted, or may not read the Secret, never sends a credential and fails at the registry."""
    config = federated.real_config(tmp_path / "run", tmp_path / "registries.json")
    bin_dir = linked_bin_dir(tmp_path, (*federated.NAMES, "ecr-credential-provider"))
    real = real_run(config, bin_dir=str(bin_dir), token_scenario="registries")
    assert sorted(real["pods"]) == sorted(pull.pod for pull in federated.REAL_PULLS)
    for pull in federated.PULLS:
        if pull.provider is None:
            assert_refused(real, pull.pod)
        else:
            assert_ran(real, pull.pod, EXCHANGED[pull.pod])
    issued = real["federated"]
    for backend in ("quay", "artifactory", "cloudsmith", "vault"):
        assert issued[backend]["issued"], backend  # each registry's credential came from it

    # EKS Pod Identity: the associated pod pulls with the key EKS Auth issued for the
    # association's role; the other with the node's own
    image = real["pods"]["associated"]["image"]
    (key,) = {e["identity"] for e in manifest_requests(real, image) if e["status"] == 200}
    assert real["assumed_roles"][key] == tokens.POD_ROLE
    assert_ran(real, "associated", key)
    assert_ran(real, "unassociated", NODE_IDENTITY["ecr-credential-provider"])

    # no registry was ever sent a credential it did not take: nothing but the exchanges' answers
    wrong = [e for e in real["registry_log"] if e["credential"] and e["status"] == 401]
    assert wrong == []

"""The real kubelet binary (k8s.io/kubernetes v1.36.4, standalone, on a fake CRI) pulls through every
shipped config, and through config/ as a directory, with the bundle as its plugin directory.

Pull by pull, the credentials the container runtime received are the ones the emulators issued, and
images no provider claims get none. The kubelet's own metrics show its cache working with the
plugins' answers: pods that share an image cost one exec, later pods on a cached registry (or, for
Google's Global key, any Google registry) cost none, and no plugin error is recorded. The run happens
in private namespaces (tests/e2e/node.py); this module checks that the host is as it was.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from release import gobuild
from release.bundle import BUNDLE_DIR, REPO
from tests.e2e.doctor_faults import UNCLAIMED_IMAGE, prepare_node
from tests.e2e.sandbox import host_state, identities_node, left_running, run_kubelet
from tests.e2e.scenario import (
    IDENTITIES,
    IDENTITY_PULLS,
    PROVIDERS,
    PULLS,
    expected_execs,
    served,
)
from tests.helpers import unavailable

CONFIG_DIR = REPO / "config"
# config under test -> its path and the providers it configures
RUNS = {
    **{file: (CONFIG_DIR / file, {name}) for name, (file, _) in PROVIDERS.items()},
    "config/": (CONFIG_DIR, set(PROVIDERS)),
}
ISSUED_KEY = {
    "ecr-credential-provider": "ecr",
    "acr-credential-provider": "acr",
    "auth-provider-gcp": "gcp",
}


@pytest.mark.parametrize("config", list(RUNS))
def test_the_real_kubelet_pulls_with_the_plugins_credentials(
    binaries: tuple[Path, Path], tmp_path: Path, config: str
) -> None:
    path, providers = RUNS[config]
    before = host_state()
    result = run_kubelet(binaries, path, tmp_path)
    after = host_state()
    log_tail = result["kubelet_log"][-4000:]
    assert "error" not in result, f"{result.get('error')}\n{log_tail}"

    # every pod's image was pulled, by every pod that names it
    pulled = Counter(pull["image"] for pull in result["pulls"])
    assert pulled == Counter({pull.image: pull.pods for pull in PULLS})

    # pull by pull: the issued credentials, or none
    by_image = {pull.image: pull for pull in PULLS}
    for received in result["pulls"]:
        pull = by_image[received["image"]]
        if served(pull, providers):
            assert pull.provider is not None
            username = PROVIDERS[pull.provider][1]
            issued = result["issued"][ISSUED_KEY[pull.provider]]
            assert received["hasAuth"], received["image"]
            assert received["username"] == username, received["image"]
            assert received["password"] in issued, received["image"]
        else:
            assert (received["username"], received["password"]) == ("", ""), received["image"]

    # the kubelet's cache, through its metrics: one exec per image of wave 1, none in wave 2
    for wave in ("1", "2"):
        metrics = result["waves"][wave]
        execs = {
            name: int(
                metrics.get(
                    f'kubelet_credential_provider_plugin_duration_count{{plugin_name="{name}"}}', 0
                )
            )
            for name in PROVIDERS
        }
        expected = {name: expected_execs(providers, 1).get(name, 0) for name in PROVIDERS}
        assert execs == expected, f"wave {wave}: {metrics}"
        errors = {key: value for key, value in metrics.items() if "errors_total" in key and value}
        assert errors == {}, f"wave {wave}: {errors}\n{log_tail}"

    assert after == before
    assert left_running(*binaries) == []


def _failing(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted(
        (c["area"], c["provider"], c["message"]) for c in report["checks"] if c["status"] == "fail"
    )


def test_doctor_finds_the_real_kubelet_and_catches_each_seeded_fault(
    binaries: tuple[Path, Path], tmp_path: Path
) -> None:
    """``credprovider doctor`` from the bundle, with no arguments, on the node the real kubelet
    runs: exactly its config and bin dir, a dry run of the node's images against the emulators,
    and one failure per seeded fault (tests/e2e/doctor_faults.py)."""
    try:
        crictl = gobuild.released(gobuild.CRICTL)
    except gobuild.GoBuildError as exc:
        unavailable(str(exc))
    bundle = BUNDLE_DIR.resolve()
    config, bin_dir, cache = prepare_node(CONFIG_DIR, bundle, tmp_path / "node")
    result = run_kubelet(
        binaries, config, tmp_path, bin_dir=str(bin_dir), doctor=True, bundle=str(bundle),
        cache=str(cache), tools=str(crictl.parent),
    )  # fmt: skip
    assert "error" not in result, f"{result.get('error')}\n{result['kubelet_log'][-4000:]}"
    reports = result["doctor"]

    healthy = reports["healthy"]
    assert healthy["exitCode"] == 0, (_failing(healthy), healthy["stderr"])
    assert healthy["foundBy"].startswith("running kubelet (pid ")
    assert (healthy["config"], healthy["binDir"]) == (str(config), str(bin_dir))
    assert healthy["kubeletVersion"] == "v1.36.4"
    infos = [c["message"] for c in healthy["checks"] if c["status"] == "info"]
    pulled = {pull.image for pull in PULLS if pull.wave == 1}
    assert f"{len(pulled)} image(s) from crictl images (unix://{tmp_path}/run/cri.sock)" in infos
    passed = [
        (c["area"], c["provider"], c["message"]) for c in healthy["checks"] if c["status"] == "pass"
    ]
    assert ("config", "", "the kubelet runs the config that is on disk (same hash)") in passed
    dry_run = {
        message.split(": ", 1)[0]: provider for area, provider, message in passed if area == "image"
    }
    wave_one = {pull.image: pull.provider for pull in PULLS if pull.wave == 1 and pull.provider}
    assert dry_run == wave_one  # every claimed image of the node got credentials
    identities = {p: m for a, p, m in passed if a == "identity"}
    assert set(identities) == {"auth-provider-gcp", "acr-credential-provider"}
    assert ("cache", "ecr-credential-provider") in {(a, p) for a, p, _ in passed}
    assert any(a == "kubelet" and "no failed credential lookup" in m for a, _, m in passed)

    def new_failures(fault: str) -> list[tuple[str, str, str]]:
        report = reports[fault]
        assert report["exitCode"] == 1 and "Traceback" not in report["stderr"], fault
        return _failing(report)

    [(area, provider, message), (area2, provider2, message2)] = new_failures("copied plugin")
    assert (area, provider) == ("binary", "ecr-credential-provider") and "exits 1" in message
    ecr_images = [p.image for p in PULLS if p.wave == 1 and p.provider == "ecr-credential-provider"]
    assert (area2, provider2) == ("image", "ecr-credential-provider")
    assert message2.startswith(
        f"{len(ecr_images)} image(s) it claims get no credentials while its plugin does not start: "
    )

    [(area, provider, message)] = new_failures("writable cache")
    assert (area, provider) == ("cache", "ecr-credential-provider") and "mode 777" in message

    changed = new_failures("config changed")
    assert {area for area, _, _ in changed} == {"config"}
    assert any("aws.yaml changed after the kubelet started" in m for _, _, m in changed)
    assert any(m.startswith("the kubelet runs another config") for _, _, m in changed)

    [(area, provider, message)] = new_failures("unclaimed image")
    assert area == "image" and message == (
        f"{UNCLAIMED_IMAGE}: no provider claims it, although acr-credential-provider serves its host"
    )

    unreachable = new_failures("unreachable identity")
    assert any(
        area == "identity" and provider == "auth-provider-gcp" and "unreachable" in message
        for area, provider, message in unreachable
    )


@pytest.mark.parametrize("cache", ["persistent cache on", "persistent cache off"])
def test_two_providers_of_each_plugin_pull_as_their_own_identity(
    binaries: tuple[Path, Path], tmp_path: Path, cache: str
) -> None:
    """One config, two providers of each plugin under suffixed names (#33): team A's pods first,
    then team B's on the same clouds; every pull carries exactly its own provider's identity.

    The identities: ECR, an access key each (the emulated ECR gives each key its own password);
    ACR, a user-assigned identity each (an azure.json each, IMDS gives each client id its token);
    Google, a service account each, both impersonated by the node's account. Both Google
    registries are on one host, so only the identity keeps their persistent-cache entries apart
    (with the provider name and the impersonated account left out of the entry's key, team B pulls
    as team A: checked by hand when this test was written)."""
    cache_dir = tmp_path / "cache" if cache.endswith("on") else None
    config, bin_dir = identities_node(tmp_path / "node", cache_dir)
    before = host_state()
    result = run_kubelet(binaries, config, tmp_path, bin_dir=str(bin_dir), scenario="identities")
    after = host_state()
    log_tail = result["kubelet_log"][-4000:]
    assert "error" not in result, f"{result.get('error')}\n{log_tail}"
    assert Counter(p["image"] for p in result["pulls"]) == Counter(
        {pull.image: pull.pods for pull in IDENTITY_PULLS}
    )
    by_name = {provider.name: provider for provider in IDENTITIES}
    by_image = {pull.image: pull for pull in IDENTITY_PULLS}
    pulled_as = {}
    for received in result["pulls"]:
        pull = by_image[received["image"]]
        if pull.provider is None:
            assert (received["username"], received["password"]) == ("", ""), received["image"]
            continue
        provider = by_name[pull.provider]
        issued = result["identities"][provider.cloud]
        assert received["username"] == PROVIDERS[provider.plugin][1], received["image"]
        pulled_as[provider.name] = issued.get(received["password"], "(not issued)")
    assert pulled_as == {provider.name: provider.identity for provider in IDENTITIES}

    for wave in ("1", "2"):
        metrics = result["waves"][wave]
        execs = {
            provider.name: int(
                metrics.get(
                    f'kubelet_credential_provider_plugin_duration_count{{plugin_name="{provider.name}"}}',
                    0,
                )
            )
            for provider in IDENTITIES
        }
        assert execs == {
            provider.name: int(provider.team == "team-a" or wave == "2") for provider in IDENTITIES
        }, f"wave {wave}: {metrics}"
        errors = {key: value for key, value in metrics.items() if "errors_total" in key and value}
        assert errors == {}, f"wave {wave}: {errors}\n{log_tail}"

    if cache_dir is None:
        assert not (tmp_path / "cache").exists()
    else:  # one entry per provider: none served another's
        owners = [json.loads(p.read_text())["provider"] for p in cache_dir.glob("*.json")]
        assert sorted(owners) == sorted(by_name)
    assert after == before
    assert left_running(*binaries) == []


# What doctor (tool/doctor/ccm.py) says a kubelet of this version does not start with: each is
# started for real, added to flags the kubelet starts with, and must not start.
REFUSED = {
    "--cloud-provider=aws": "--cloud-provider=aws, which kubelet 1.36 refuses",
    "--feature-gates=DisableKubeletCloudCredentialProviders=false": (
        "DisableKubeletCloudCredentialProviders=false, which this kubelet no longer has"
    ),
}


def test_what_doctor_says_a_kubelet_does_not_start_with_it_does_not_start_with(
    binaries: tuple[Path, Path], tmp_path: Path
) -> None:
    """The CCM pairing (KEP-2395) checked the kubelet's way: doctor's verdict on a built-in
    --cloud-provider and on the removed login gate, from the flags and the real kubelet's version,
    is "does not start"; the real kubelet v1.36.4, given each on top of flags it starts with (the
    other tests of this module run them), exits at once with its own error."""
    from credprovider.tool.doctor.ccm import check_cloud_provider
    from credprovider.tool.doctor.model import FAIL, Diagnosis
    from credprovider.tool.node.kubelet_facts import parse_version
    from credprovider.tool.node.kubelet_flags import settings_from

    version = parse_version("Kubernetes v1.36.4")
    assert version is not None
    for flag, verdict in REFUSED.items():
        diagnosis = Diagnosis()
        check_cloud_provider(settings_from(flag.split(), []), version[1], diagnosis)
        said = [(c.status, c.message) for c in diagnosis.checks]
        assert [status for status, _ in said] == [FAIL], said
        assert verdict in said[0][1] and "does not start" in said[0][1]

    control = "--cloud-provider=external"  # what migrate writes: the kubelet starts with it
    result = run_kubelet(
        binaries,
        CONFIG_DIR,
        tmp_path,
        refused_flags=[flag.split() for flag in (*REFUSED, control)],
        refused_wait=20,
    )
    for flag in REFUSED:
        started = result["refused"][flag]
        assert started["exit"] not in (None, 0), (flag, started)
        assert any('"command failed"' in line for line in started["log"]), started["log"]
    cloud = result["refused"]["--cloud-provider=aws"]["log"]
    assert any("built-in cloud providers are disabled" in line for line in cloud), cloud
    gate = result["refused"][next(f for f in REFUSED if "feature-gates" in f)]["log"]
    assert any("unrecognized feature gate" in line for line in gate), gate
    assert result["refused"][control]["exit"] is None, result["refused"][control]
    diagnosis = Diagnosis()
    check_cloud_provider(settings_from([control], []), version[1], diagnosis)
    assert diagnosis.checks == []

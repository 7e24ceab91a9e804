"""The built plugins driven by the real kubelet code (matchImages, exec, strict decoding, cache,
keyring, service-account mode), through the Go harness in tests/kubelet.

Each plugin name in the bin dir is a wrapper that records the exec and runs the bundle, so the tests
can count how often the kubelet really execs a plugin.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from credprovider.catalog import PLUGINS
from tests.fakes.aws import FakeEcr
from tests.fakes.gcp import FakeMetadata, FakeSts
from tests.fakes.http import FakeServer, serve
from tests.fakes.tls import CertAuthority
from tests.helpers import API_VERSIONS, BUNDLE_DIR, CONFIG_DIR, require_bundle
from tests.helpers_kubelet import HarnessRun, run_harness
from tests.integration.conftest import Azure

ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/app"
ROLE = "arn:aws:iam::123456789012:role/image-puller"
SA_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YXBwczpwdWxsZXIifQ.c2ln"
IDP = "https://container.googleapis.com/v1/projects/p/locations/l/clusters/c"


@dataclass
class Node:
    """A kubelet bin dir whose plugins are counting wrappers around the bundle."""

    bin_dir: Path
    exec_log: Path
    directory: Path

    def execs(self, name: str | None = None) -> int:
        if not self.exec_log.exists():
            return 0
        lines = self.exec_log.read_text().splitlines()
        return len([line for line in lines if name is None or line.split()[0] == name])

    def config(self, providers: list[dict[str, Any]], name: str = "config.json") -> Path:
        path = self.directory / name
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "kubelet.config.k8s.io/v1",
                    "kind": "CredentialProviderConfig",
                    "providers": providers,
                }
            )
        )
        return path

    def script(self, name: str, body: str) -> None:
        """A hand-written plugin (for responses the kubelet must reject)."""
        path = self.bin_dir / name
        path.write_text("#!/bin/sh\ncat >/dev/null\n" + body)
        path.chmod(0o755)


@pytest.fixture
def node(tmp_path: Path) -> Node:
    require_bundle()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "execs.log"
    for name in ("ecr-credential-provider", "acr-credential-provider", "auth-provider-gcp"):
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\nexec {BUNDLE_DIR / name} "$@"\n')
        wrapper.chmod(0o755)
    return Node(bin_dir, log, tmp_path)


def provider(
    name: str,
    match_images: list[str],
    api_version: str = API_VERSIONS[0],
    args: list[str] | None = None,
    cache: str = "1m",
    **extra: Any,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "apiVersion": api_version,
        "matchImages": match_images,
        "defaultCacheDuration": cache,
        **extra,
    }
    if args:
        entry["args"] = args
    return entry


def aws_env(server: FakeServer, sts: str = "http://127.0.0.1:9", **extra: str) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": "AKIDNODE",
        "AWS_SECRET_ACCESS_KEY": "node-secret-key",
        "AWS_ENDPOINT_URL_ECR": server.url,
        "AWS_ENDPOINT_URL_ECR_PUBLIC": server.url,
        "AWS_ENDPOINT_URL_STS": sts,
        **extra,
    }


def found(run: HarnessRun) -> list[tuple[bool, list[str]]]:
    assert run.code == 0, run.klog[-2000:]
    return [(r["found"], [c["password"] for c in r["credentials"]]) for r in run.results]


@pytest.mark.parametrize("api_version", API_VERSIONS)
def test_ecr_is_accepted_in_every_api_version(
    kubelet_harness: Path, node: Node, ecr: tuple[FakeEcr, FakeServer], api_version: str
) -> None:
    fake, server = ecr
    config = node.config(
        [
            provider(
                "ecr-credential-provider",
                ["*.dkr.ecr.*.amazonaws.com"],
                api_version,
                ["get-credentials"],
            )
        ]
    )
    run = run_harness(
        kubelet_harness, config, node.bin_dir, [{"image": ECR_IMAGE}], aws_env(server)
    )
    assert found(run) == [(True, [fake.password])]


@pytest.mark.parametrize("api_version", API_VERSIONS)
def test_gcp_is_accepted_in_every_api_version(
    kubelet_harness: Path, node: Node, metadata: tuple[FakeMetadata, FakeServer], api_version: str
) -> None:
    fake, server = metadata
    config = node.config(
        [
            provider(
                "auth-provider-gcp",
                ["*.pkg.dev", "gcr.io"],
                api_version,
                ["get-credentials", "--v=3"],
            )
        ]
    )
    run = run_harness(
        kubelet_harness,
        config,
        node.bin_dir,
        [{"image": "us-docker.pkg.dev/p/r/app"}, {"image": "gcr.io/p/app"}],
        {"GCE_METADATA_HOST": server.address},
    )
    # The image's own registry and the matching fixed key both carry the token.
    assert [(ok, set(passwords)) for ok, passwords in found(run)] == [
        (True, {fake.access_token})
    ] * 2
    assert node.execs() == 1  # cacheKeyType Global: one exec serves every Google registry


@pytest.mark.parametrize("api_version", API_VERSIONS)
def test_acr_is_accepted_in_every_api_version(
    kubelet_harness: Path, node: Node, azure: Azure, api_version: str
) -> None:
    azure_json = azure.config(useManagedIdentityExtension=True, tenantId="t")
    config = node.config(
        [provider("acr-credential-provider", ["*.azurecr.io"], api_version, [azure_json])]
    )
    run = run_harness(
        kubelet_harness, config, node.bin_dir, [{"image": "myreg.azurecr.io/app"}], azure.env
    )
    assert found(run) == [(True, [azure.acr.refresh_tokens[-1]])]


def test_keys_match_images_with_ports_and_docker_hub_short_names(
    kubelet_harness: Path,
    node: Node,
    ecr: tuple[FakeEcr, FakeServer],
    metadata: tuple[FakeMetadata, FakeServer],
    azure: Azure,
) -> None:
    fake_ecr, ecr_server = ecr
    fake_meta, meta_server = metadata
    config = node.config(
        [
            provider("ecr-credential-provider", ["*.dkr.ecr.*.amazonaws.com:443", "docker.io"]),
            provider("auth-provider-gcp", ["gcr.io:443", "*.gcr.io:443"], args=["get-credentials"]),
            provider(
                "acr-credential-provider",
                ["*.azurecr.io:443"],
                args=[azure.config(useManagedIdentityExtension=True)],
            ),
        ]
    )
    lookups = [
        {"image": "123456789012.dkr.ecr.us-east-1.amazonaws.com:443/team/app"},
        # `nginx` in a pod spec reaches the kubelet's keyring as docker.io/library/nginx (here an
        # ECR pull-through cache serves Docker Hub, so the ECR plugin answers for docker.io).
        {"image": "docker.io/library/nginx"},
        {"image": "gcr.io:443/p/app"},
        {"image": "eu.gcr.io:443/p/app"},
        {"image": "myreg.azurecr.io:443/app"},
    ]
    env = {
        **aws_env(ecr_server, AWS_REGION="us-west-2"),
        "GCE_METADATA_HOST": meta_server.address,
        **azure.env,
    }
    run = run_harness(kubelet_harness, config, node.bin_dir, lookups, env)
    assert found(run) == [
        (True, [fake_ecr.password]),
        (True, [fake_ecr.password]),
        (True, [fake_meta.access_token]),
        (True, [fake_meta.access_token]),
        (True, [azure.acr.refresh_tokens[-1]]),
    ]


def test_google_registry_on_another_port_needs_the_registry_cache_key(
    kubelet_harness: Path, node: Node, metadata: tuple[FakeMetadata, FakeServer]
) -> None:
    """A cached Global answer serves every image without a new exec, and its keys cannot name every
    port: with the default a later eu.gcr.io:8443 image gets nothing; KUBE_SIDECAR_CACHE_TYPE=registry
    (documented for such setups) gives each registry its own answer."""
    fake, server = metadata
    lookups = [{"image": "gcr.io/p/app"}, {"image": "eu.gcr.io:8443/p/app"}]
    patterns = ["gcr.io", "*.gcr.io:8443"]
    env = {"GCE_METADATA_HOST": server.address}
    default = node.config([provider("auth-provider-gcp", patterns, args=["get-credentials"])])
    run = run_harness(kubelet_harness, default, node.bin_dir, lookups, env)
    assert found(run) == [(True, [fake.access_token]), (False, [])]
    per_registry = node.config(
        [
            provider(
                "auth-provider-gcp",
                patterns,
                args=["get-credentials"],
                env=[{"name": "KUBE_SIDECAR_CACHE_TYPE", "value": "registry"}],
            )
        ],
        name="per-registry.json",
    )
    run = run_harness(kubelet_harness, per_registry, node.bin_dir, lookups, env)
    assert found(run) == [(True, [fake.access_token])] * 2


def test_repeated_lookups_within_cache_duration_do_not_re_exec(
    kubelet_harness: Path, node: Node, ecr: tuple[FakeEcr, FakeServer]
) -> None:
    fake, server = ecr
    config = node.config([provider("ecr-credential-provider", ["*.dkr.ecr.*.amazonaws.com"])])
    other_image_same_registry = ECR_IMAGE.replace("team/app", "other/tool")
    run = run_harness(
        kubelet_harness,
        config,
        node.bin_dir,
        [{"image": ECR_IMAGE}, {"image": ECR_IMAGE}, {"image": other_image_same_registry}],
        aws_env(server),
    )
    assert found(run) == [(True, [fake.password])] * 3
    assert node.execs("ecr-credential-provider") == 1
    assert len(fake.calls) == 1


def test_expired_cache_entries_re_exec(
    kubelet_harness: Path, node: Node, ecr: tuple[FakeEcr, FakeServer]
) -> None:
    fake, server = ecr
    fake.valid_seconds = 4  # the plugin answers cacheDuration 2s
    config = node.config([provider("ecr-credential-provider", ["*.dkr.ecr.*.amazonaws.com"])])
    run = run_harness(
        kubelet_harness,
        config,
        node.bin_dir,
        [{"image": ECR_IMAGE}, {"image": ECR_IMAGE}, {"image": ECR_IMAGE, "sleepBefore": "3s"}],
        aws_env(server),
    )
    assert [f for f, _ in found(run)] == [True, True, True]
    assert node.execs("ecr-credential-provider") == 2


def test_service_account_mode_passes_token_and_annotations(
    kubelet_harness: Path, node: Node, ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    fake, server = ecr
    config = node.config(
        [
            provider(
                "ecr-credential-provider",
                ["*.dkr.ecr.*.amazonaws.com"],
                tokenAttributes={
                    "serviceAccountTokenAudience": "sts.amazonaws.com",
                    "cacheType": "ServiceAccount",
                    "requireServiceAccount": True,
                    "requiredServiceAccountAnnotationKeys": ["eks.amazonaws.com/ecr-role-arn"],
                },
            )
        ]
    )
    sa = {
        "name": "puller",
        "uid": "uid-1",
        "token": SA_TOKEN,
        "annotations": {"eks.amazonaws.com/ecr-role-arn": ROLE, "unrelated": "x"},
    }
    run = run_harness(
        kubelet_harness,
        config,
        node.bin_dir,
        [
            {
                "image": ECR_IMAGE,
                "namespace": "apps",
                "pod": "p",
                "podUID": "pod-1",
                "serviceAccount": sa,
            }
        ],
        aws_env(server, sts=moto_server),
    )
    assert found(run) == [(True, [fake.password])]
    (call,) = fake.calls
    assert call.access_key != "AKIDNODE" and call.session_token  # the annotated role was assumed
    assert "returned the service account token as the password" not in run.klog


def test_workload_identity_through_the_kubelet(
    kubelet_harness: Path,
    node: Node,
    metadata: tuple[FakeMetadata, FakeServer],
    test_ca: CertAuthority,
) -> None:
    fake_meta, meta_server = metadata
    fake_sts = FakeSts()
    with serve(fake_sts, test_ca.server_context("sts.googleapis.com")) as sts:
        config = node.config(
            [
                provider(
                    "auth-provider-gcp",
                    ["gcr.io"],
                    args=["get-credentials", f"--identity-provider={IDP}", "--project-id=p"],
                    tokenAttributes={
                        "serviceAccountTokenAudience": "p.svc.id.goog",
                        "cacheType": "Token",
                        "requireServiceAccount": False,
                        "optionalServiceAccountAnnotationKeys": ["iam.gke.io/enable-wi-image-pull"],
                    },
                )
            ]
        )
        sa = {
            "name": "puller",
            "uid": "uid-2",
            "token": SA_TOKEN,
            "annotations": {"iam.gke.io/enable-wi-image-pull": "true"},
        }
        env = {
            "GCE_METADATA_HOST": meta_server.address,
            "REQUESTS_CA_BUNDLE": str(test_ca.bundle),
            "CREDPROVIDER_TEST_RESOLVE": f"sts.googleapis.com={sts.address}",
        }
        run = run_harness(
            kubelet_harness,
            config,
            node.bin_dir,
            [{"image": "gcr.io/p/app", "serviceAccount": sa}],
            env,
        )
    assert found(run) == [(True, [fake_sts.access_token])]
    assert fake_sts.forms[0]["subject_token"] == SA_TOKEN
    assert fake_meta.paths == []


BROKEN_RESPONSES = {
    "unknown field": (
        '{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
        '"cacheKeyType":"Registry","cacheDuration":"1m0s","expiresAt":"soon",'
        '"auth":{"r.example.com":{"username":"u","password":"p"}}}',
        "error decoding credential provider plugin response from stdout",
    ),
    "wrong apiVersion": (
        '{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1",'
        '"cacheKeyType":"Registry","auth":{"r.example.com":{"username":"u","password":"p"}}}',
        "apiVersion from credential plugin response did not match expected apiVersion",
    ),
    "numeric cacheDuration": (
        '{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
        '"cacheKeyType":"Registry","cacheDuration":60,'
        '"auth":{"r.example.com":{"username":"u","password":"p"}}}',
        "error decoding credential provider plugin response from stdout",
    ),
    "bad cacheKeyType": (
        '{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
        '"cacheKeyType":"registry","auth":{"r.example.com":{"username":"u","password":"p"}}}',
        "did not return a valid cacheKeyType",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN_RESPONSES))
def test_the_harness_rejects_broken_responses(kubelet_harness: Path, node: Node, case: str) -> None:
    body, message = BROKEN_RESPONSES[case]
    node.script("broken-plugin", f"echo '{body}'\n")
    config = node.config([provider("broken-plugin", ["r.example.com"])])
    run = run_harness(kubelet_harness, config, node.bin_dir, [{"image": "r.example.com/app"}])
    assert found(run) == [(False, [])]
    assert message in run.klog


def test_the_same_response_well_formed_is_accepted(kubelet_harness: Path, node: Node) -> None:
    body = (
        '{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
        '"cacheKeyType":"Registry","cacheDuration":"1m0s",'
        '"auth":{"r.example.com":{"username":"u","password":"p"}}}'
    )
    node.script("good-plugin", f"echo '{body}'\n")
    config = node.config([provider("good-plugin", ["r.example.com"])])
    run = run_harness(kubelet_harness, config, node.bin_dir, [{"image": "r.example.com/app"}])
    assert found(run) == [(True, ["p"])]


@pytest.mark.parametrize(("key", "config_name"), [("aws", "aws.yaml"), ("gcp", "gcp.yaml")])
def test_the_shipped_configs_serve_every_host_form_with_and_without_443(
    kubelet_harness: Path,
    node: Node,
    ecr: tuple[FakeEcr, FakeServer],
    metadata: tuple[FakeMetadata, FakeServer],
    key: str,
    config_name: str,
) -> None:
    """The shipped file itself, through the kubelet's own matching: an image that names :443 is
    sent to the plugin too (a matchImages pattern without a port never matches one with a port)."""
    _, ecr_server = ecr
    _, meta_server = metadata
    images = list(PLUGINS[key].sample_images.values())
    assert any(":443/" in image for image in images) and any(":443/" not in i for i in images)
    env = {**aws_env(ecr_server), "GCE_METADATA_HOST": meta_server.address}
    run = run_harness(
        kubelet_harness, CONFIG_DIR / config_name, node.bin_dir, [{"image": i} for i in images], env
    )
    assert [ok for ok, _ in found(run)] == [True] * len(images), images

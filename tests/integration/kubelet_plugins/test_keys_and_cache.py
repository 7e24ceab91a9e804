"""The auth keys as the kubelet's keyring matches them, and its cache honouring cacheKeyType and
cacheDuration; the shipped configs for every host form."""

from __future__ import annotations

from pathlib import Path

import pytest

from credprovider.tool.catalog import PLUGINS
from emulators.aws import FakeEcr
from emulators.gcp import FakeMetadata
from emulators.http import FakeServer
from tests.helpers import CONFIG_DIR
from tests.helpers_kubelet import run_harness
from tests.integration.conftest import Azure
from tests.integration.kubelet_plugins.common import (
    ECR_IMAGE,
    Node,
    aws_env,
    found,
    provider,
)


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

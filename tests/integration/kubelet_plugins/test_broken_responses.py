"""What the harness (the kubelet's decoder) rejects, and the same responses well formed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers_kubelet import run_harness
from tests.integration.kubelet_plugins.common import (
    Node,
    found,
    provider,
)

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


def test_the_kubelet_passes_env_as_name_equals_value_unchecked(
    kubelet_harness: Path, node: Node
) -> None:
    """The facts behind validate's env lints (tool/kubeconfig/lint.py): the kubelet checks no
    env entry and hands the plugin ``NAME=VALUE``. A name with '=' sets another variable; a NUL
    byte fails every exec of the plugin."""
    body = (
        '{"kind":"CredentialProviderResponse","apiVersion":"credentialprovider.kubelet.k8s.io/v1",'
        '"cacheKeyType":"Registry","auth":{"r.example.com":{"username":"u","password":"%s"}}}'
    )
    node.script("env-plugin", f"printf '{body}' \"$REGION\"\n")
    split = node.config(
        [provider("env-plugin", ["r.example.com"], env=[{"name": "REGION=us", "value": "east"}])]
    )
    run = run_harness(kubelet_harness, split, node.bin_dir, [{"image": "r.example.com/app"}])
    assert found(run) == [(True, ["us=east"])]
    nul = node.config(
        [provider("env-plugin", ["r.example.com"], env=[{"name": "REGION", "value": "us\u0000"}])],
        name="nul.json",
    )
    run = run_harness(kubelet_harness, nul, node.bin_dir, [{"image": "r.example.com/app"}])
    assert found(run) == [(False, [])]
    assert "exec: environment variable contains NUL" in run.klog, run.klog[-2000:]


def test_the_kubelet_passes_args_unchecked(kubelet_harness: Path, node: Node) -> None:
    """The facts behind validate's args lint (tool/kubeconfig/lint.py): the kubelet checks no
    argument; one with a NUL byte fails every exec of the plugin."""
    node.script("args-plugin", "exit 1\n")
    config = node.config(
        [provider("args-plugin", ["r.example.com"], args=["--region=us\u0000east"])]
    )
    run = run_harness(kubelet_harness, config, node.bin_dir, [{"image": "r.example.com/app"}])
    assert found(run) == [(False, [])]
    assert "invalid argument" in run.klog, run.klog[-2000:]

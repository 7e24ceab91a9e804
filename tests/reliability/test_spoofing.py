"""Spoofing: no request may send a cloud token to, or return one keyed for, a host that is not the
cloud's registry. The documented ECR mode (any host the operator routes to it through matchImages,
with AWS_REGION set) is the one exception, tested as such."""

from __future__ import annotations

import json

import pytest

from credprovider.aws.registry import classify_host
from credprovider.azure.registry import CLOUDS, login_server_suffix
from credprovider.gcp.registry import is_google_registry_host
from credprovider.runtime.imageref import parse_image
from emulators.harness import ACR_REGISTRY, Emulator
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.reliability.checks import Figures, Outcome, answer_violations

AWS_SPOOFS = [
    "123456789012.dkr.ecr.us-east-1.amazonaws.com.evil.com/app",
    "evil.com/123456789012.dkr.ecr.us-east-1.amazonaws.com/app",
    "123456789012.dkr.ecr.us-east-1.amazonaws.com@evil.com/app",
    "public.ecr.aws.evil.com/nginx/nginx",
    "evil.com/public.ecr.aws/nginx/nginx",
    "xn--123456789012-dkr.ecr.us-east-1.amazonaws.com/app",
    "123456789012.dkr.ecr.us-east-1.amazonaws.com%2eevil.com/app",
    "123456789012.dkr.ecr.us-east-1.amazonaws.co/app",
]
AZURE_SPOOFS = [
    f"{ACR_REGISTRY}.evil.net/app",
    f"{ACR_REGISTRY}@evil.net/app",
    f"evil.net/{ACR_REGISTRY}/app",
    f"docker/{ACR_REGISTRY}/app",
    f"{ACR_REGISTRY}.azurecr.cn/app",
    "xn--contoso-9ya.azurecr.io/app",
    "contoso%2eazurecr.io/app",
    "mcr.microsoft.com.evil.net/oss/nginx",
]
GCP_SPOOFS = [
    "gcr.io.evil.com/p/app",
    "evil-pkg.dev/p/app",
    "evil.com/gcr.io/p/app",
    "gcr.io@evil.com/p/app",
    "xn--gcr-xxx.io/p/app",
    "us-docker.pkg.dev.evil.com/p/r/app",
    "pkg.dev/p/app",
    "evilgcr.io/p/app",
]


def test_the_corpus_is_large_enough() -> None:
    assert len(AWS_SPOOFS + AZURE_SPOOFS + GCP_SPOOFS) >= 20


def _keys(stdout: bytes) -> list[str]:
    return list(json.loads(stdout).get("auth", {})) if stdout else []


def _record(figures: Figures, name: str, run, problems: list[str]) -> None:  # type: ignore[no-untyped-def]
    figures.record(
        Outcome("spoofing", name, run.code, run.seconds, 10, not problems, "; ".join(problems))
    )


@pytest.mark.parametrize("image", AWS_SPOOFS)
def test_aws_spoof(aws: Emulator, figures: Figures, image: str) -> None:
    fake = aws.fakes["ecr"]
    calls_before = len(fake.calls)  # type: ignore[attr-defined]
    run = run_plugin("ecr-credential-provider", request_bytes(image), ["--deadline=10s"], aws.env)
    problems = answer_violations(run, 10)
    for key in _keys(run.stdout):
        if classify_host(key.split(":")[0]).kind == "other":
            problems.append(f"returned a token keyed for {key}")
    if len(fake.calls) != calls_before:  # type: ignore[attr-defined]
        problems.append("fetched an ECR token for a spoofed host")
    _record(figures, f"aws {image}", run, problems)
    assert not problems


def test_ecr_any_host_mode_is_the_documented_exception(aws: Emulator, figures: Figures) -> None:
    """With AWS_REGION the operator routes a mirror host to ECR: a token keyed by that host only."""
    run = run_plugin(
        "ecr-credential-provider",
        request_bytes("mirror.example.com/library/nginx"),
        ["--deadline=10s", "-v=1"],
        {**aws.env, "AWS_REGION": "us-east-1"},
    )
    problems = answer_violations(run, 10)
    if _keys(run.stdout) != ["mirror.example.com"] or "is not an ECR host" not in run.stderr:
        problems.append(
            "the documented mode did not answer for exactly the mirror host, or did not say so"
        )
    _record(figures, "aws documented any-host mode", run, problems)
    assert not problems


@pytest.mark.parametrize("image", AZURE_SPOOFS)
def test_azure_spoof(azure: Emulator, figures: Figures, image: str) -> None:
    acr, imds = azure.fakes["acr"], azure.fakes["imds"]
    before = (len(acr.exchanges), len(imds.queries))  # type: ignore[attr-defined]
    run = run_plugin(
        "acr-credential-provider",
        request_bytes(image),
        [
            azure.files["config"],
            "--deadline=10s",
            f"--registry-mirror=mcr.microsoft.com:{ACR_REGISTRY}",
        ],
        azure.env,
    )
    problems = answer_violations(run, 10)
    for key in _keys(run.stdout):
        if login_server_suffix(key.split(":")[0], CLOUDS["azurepubliccloud"]) is None:
            problems.append(f"returned a token keyed for {key}")
    if (len(acr.exchanges), len(imds.queries)) != before:  # type: ignore[attr-defined]
        problems.append("fetched or exchanged an AAD token for a spoofed host")
    _record(figures, f"azure {image}", run, problems)
    assert not problems


def test_azure_realm_on_another_host_never_gets_the_token(
    azure: Emulator, figures: Figures
) -> None:
    acr = azure.fakes["acr"]
    acr.challenge = ['Bearer realm="https://evil.net/oauth2/token",service="contoso.azurecr.io"']  # type: ignore[attr-defined]
    before = len(acr.exchanges)  # type: ignore[attr-defined]
    try:
        run = run_plugin(
            "acr-credential-provider",
            request_bytes(f"{ACR_REGISTRY}/app"),
            [azure.files["config"], "--deadline=10s"],
            azure.env,
        )
    finally:
        acr.challenge = None  # type: ignore[attr-defined]
    problems = answer_violations(run, 10)
    if run.code != 1 or "refusing to send an AAD token to another host" not in run.stderr:
        problems.append("a realm on another host was not refused")
    if len(acr.exchanges) != before:  # type: ignore[attr-defined]
        problems.append("the AAD token was sent")
    _record(figures, "azure realm on another host", run, problems)
    assert not problems


@pytest.mark.parametrize("image", GCP_SPOOFS)
def test_gcp_spoof(gcp: Emulator, figures: Figures, image: str) -> None:
    metadata = gcp.fakes["metadata"]
    before = len(metadata.paths)  # type: ignore[attr-defined]
    run = run_plugin(
        "auth-provider-gcp", request_bytes(image), ["get-credentials", "--deadline=10s"], gcp.env
    )
    problems = answer_violations(run, 10)
    for key in _keys(run.stdout):
        host = key.split(":")[0]
        if not is_google_registry_host(host.replace("*.", "x.")):
            problems.append(f"returned a token keyed for {key}")
    if len(metadata.paths) != before:  # type: ignore[attr-defined]
        problems.append("fetched a Google token for a spoofed host")
    _record(figures, f"gcp {image}", run, problems)
    assert not problems


def test_spoofed_images_are_not_what_they_look_like() -> None:
    """Sanity for the corpus itself: none of these parse to a genuine registry of its cloud."""
    for image in AWS_SPOOFS + AZURE_SPOOFS + GCP_SPOOFS:
        try:
            host = parse_image(image).host
        except ValueError:
            continue
        assert classify_host(host).kind == "other"
        assert login_server_suffix(host, CLOUDS["azurepubliccloud"]) is None
        assert not is_google_registry_host(host)

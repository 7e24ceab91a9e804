"""Service-account mode: the kubelet passes the token and annotations, and workload identity
works through it."""

from __future__ import annotations

from pathlib import Path

from emulators.aws import NODE_KEY, FakeEcr
from emulators.gcp import FakeMetadata, FakeSts
from emulators.http import FakeServer, serve
from emulators.tls import CertAuthority
from tests.helpers_kubelet import run_harness
from tests.integration.kubelet_plugins.common import (
    ECR_IMAGE,
    IDP,
    ROLE,
    SA_TOKEN,
    Node,
    aws_env,
    found,
    provider,
)


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
    assert call.access_key != NODE_KEY and call.session_token  # the annotated role was assumed
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

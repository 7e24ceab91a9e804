"""Service account tokens: the annotated role assumed with AssumeRoleWithWebIdentity, or the
node's own credentials."""

from __future__ import annotations

import pytest

from emulators.aws import NOWHERE, FakeEcr, ecr_env, sts_error
from emulators.http import FakeRequest, FakeResponse, FakeServer, serve
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.integration.aws.common import (
    NODE_KEY,
    PLUGIN,
    ROLE,
    SA_TOKEN,
    assumed_role_arn,
)


@pytest.mark.parametrize(
    ("annotations", "env", "role"),
    [
        ({"eks.amazonaws.com/ecr-role-arn": ROLE}, {}, ROLE),
        ({"eks.amazonaws.com/role-arn": ROLE}, {}, ROLE),
        (
            {
                "eks.amazonaws.com/ecr-role-arn": ROLE,
                "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/other",
            },
            {},
            ROLE,
        ),
        ({}, {"AWS_ECR_ROLE_ARN": ROLE}, ROLE),
        ({"eks.amazonaws.com/ecr-role-arn": ""}, {"AWS_ECR_ROLE_ARN": ROLE}, ROLE),
    ],
)
def test_service_account_token_assumes_the_annotated_role(
    ecr: tuple[FakeEcr, FakeServer],
    moto_server: str,
    annotations: dict[str, str],
    env: dict[str, str],
    role: str,
    use_bundle: bool,
) -> None:
    fake, server = ecr
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/app"
    run = run_plugin(
        PLUGIN,
        request_bytes(image, token=SA_TOKEN, annotations=annotations),
        env=ecr_env(server.url, moto_server, **env),
        use_bundle=use_bundle,
    )
    assert run.response["auth"][image.split("/")[0]]["password"] == fake.password
    (call,) = fake.calls
    assert call.access_key != NODE_KEY and call.session_token
    assert assumed_role_arn(call.access_key) == role
    assert SA_TOKEN not in run.stderr


def test_the_annotated_role_is_assumed_without_resolving_the_nodes_credentials(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    """AssumeRoleWithWebIdentity takes no credentials, and is called unsigned, as botocore's own
    web identity provider calls it: the node's chain (its container credentials endpoint here,
    IMDS's waits elsewhere) is not asked for a pull that uses the pod's role."""
    fake, server = ecr
    asked: list[str] = []

    def node_credentials(request: FakeRequest) -> FakeResponse:
        asked.append(request.path)
        return FakeResponse(status=500)

    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/app"
    with serve(node_credentials) as node:
        env = {
            **ecr_env(server.url, moto_server),
            "AWS_ACCESS_KEY_ID": "",
            "AWS_SECRET_ACCESS_KEY": "",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": f"{node.url}/v1/credentials",
        }
        run = run_plugin(
            PLUGIN,
            request_bytes(image, token=SA_TOKEN, annotations={"eks.amazonaws.com/role-arn": ROLE}),
            env=env,
        )
    assert run.code == 0, run.stderr
    (call,) = fake.calls
    assert assumed_role_arn(call.access_key) == ROLE
    assert asked == []


def test_service_account_token_without_role_uses_node_credentials(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    fake, server = ecr
    run = run_plugin(
        PLUGIN,
        request_bytes("public.ecr.aws/a/b", token=SA_TOKEN),
        args=["-v=1"],
        env=ecr_env(server.url, moto_server),
    )
    assert run.code == 0
    assert [c.access_key for c in fake.calls] == [NODE_KEY]
    assert "no role ARN" in run.stderr and "using the node's credentials" in run.stderr


def test_sts_failure_is_an_error_with_the_reason(ecr: tuple[FakeEcr, FakeServer]) -> None:
    fake, server = ecr
    with serve(
        lambda _: sts_error("InvalidIdentityToken", "No OpenIDConnect provider found")
    ) as sts:
        run = run_plugin(
            PLUGIN,
            request_bytes(
                "public.ecr.aws/a/b",
                token=SA_TOKEN,
                annotations={"eks.amazonaws.com/ecr-role-arn": ROLE},
            ),
            env=ecr_env(server.url, sts.url),
        )
    assert (run.code, run.stdout) == (1, b"")
    assert run.error_lines == [
        f"{PLUGIN}: error: STS AssumeRoleWithWebIdentity for {ROLE} (from annotation "
        "eks.amazonaws.com/ecr-role-arn) failed: InvalidIdentityToken: No OpenIDConnect provider "
        "found; check the role's trust policy allows this cluster's OIDC issuer, service account "
        "and token audience"
    ]
    assert fake.calls == []
    assert SA_TOKEN not in run.stderr


def test_an_sts_it_cannot_reach_says_what_to_check(ecr: tuple[FakeEcr, FakeServer]) -> None:
    """A refused connection names STS's URL and what to check, as every unreachable service's
    line does."""
    fake, server = ecr
    run = run_plugin(
        PLUGIN,
        request_bytes(
            "public.ecr.aws/a/b", token=SA_TOKEN, annotations={"eks.amazonaws.com/role-arn": ROLE}
        ),
        env=ecr_env(server.url, NOWHERE),
    )
    assert (run.code, run.stdout) == (1, b"")
    [line] = run.error_lines
    assert f"STS AssumeRoleWithWebIdentity for {ROLE} failed: " in line, line
    assert f'"{NOWHERE}/"' in line and "check that 127.0.0.1:9 is reachable" in line, line
    assert fake.calls == []


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        (
            {"AWS_ENDPOINT_URL_STS": "not a url"},
            "botocore cannot use the settings: Invalid endpoint",
        ),
        ({"AWS_STS_REGIONAL_ENDPOINTS": "bogus"}, "STS regional endpoints option bogus is invalid"),
    ],
)
def test_sts_settings_botocore_refuses_are_the_nodes_to_fix(
    ecr: tuple[FakeEcr, FakeServer], setting: dict[str, str], said: str
) -> None:
    """An STS endpoint botocore will not use was 'internal error: ValueError' (the client was
    made outside the call's error handling): one line naming the setting's fault and the fix."""
    fake, server = ecr
    run = run_plugin(
        PLUGIN,
        request_bytes(
            "public.ecr.aws/a/b", token=SA_TOKEN, annotations={"eks.amazonaws.com/role-arn": ROLE}
        ),
        env=ecr_env(server.url, NOWHERE, **setting),
    )
    assert (run.code, run.stdout) == (1, b"")
    [line] = run.error_lines
    assert line.startswith(f"{PLUGIN}: error: STS AssumeRoleWithWebIdentity for {ROLE} failed: ")
    assert said in line and line.endswith("or the node's ~/.aws files)"), line
    assert fake.calls == [] and "internal error" not in line


def test_malformed_role_arn_is_an_error(ecr: tuple[FakeEcr, FakeServer], moto_server: str) -> None:
    _, server = ecr
    run = run_plugin(
        PLUGIN,
        request_bytes(
            "public.ecr.aws/a/b",
            token=SA_TOKEN,
            annotations={"eks.amazonaws.com/role-arn": "image-puller"},
        ),
        env=ecr_env(server.url, moto_server),
    )
    assert run.code == 1
    assert run.error_lines == [
        f"{PLUGIN}: error: cannot assume a role for the service account: annotation "
        "eks.amazonaws.com/role-arn is 'image-puller', which is not an IAM role ARN"
    ]

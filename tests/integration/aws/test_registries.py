"""Which registry gets which token: every partition, ECR Public, ports, mirrors; and the
cacheDuration each answer carries."""

from __future__ import annotations

import re

import pytest

from credprovider.runtime.goformat import SECOND, parse_go_duration
from credprovider.runtime.matching import keyring_lookup
from emulators.aws import PRIVATE_TARGET, PUBLIC_TARGET, FakeEcr, ecr_env
from emulators.http import FakeServer
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.integration.aws.common import (
    NODE_KEY,
    NODE_SECRET,
    PLUGIN,
)

PRIVATE_HOSTS = [
    ("123456789012.dkr.ecr.us-east-1.amazonaws.com", "us-east-1"),
    ("123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
    ("123456789012.dkr-ecr.us-west-2.on.aws", "us-west-2"),
    ("123456789012.dkr-ecr-fips.us-east-2.on.aws", "us-east-2"),
    ("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn", "cn-north-1"),
    ("123456789012.dkr-ecr.cn-northwest-1.on.amazonwebservices.com.cn", "cn-northwest-1"),
    ("123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu", "eusc-de-east-1"),
    ("123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov", "us-iso-east-1"),
    ("123456789012.dkr.ecr.us-isob-east-1.sc2s.sgov.gov", "us-isob-east-1"),
    ("123456789012.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk", "eu-isoe-west-1"),
    ("123456789012.dkr.ecr.us-isof-south-1.csp.hci.ic.gov", "us-isof-south-1"),
]


@pytest.mark.parametrize(("host", "region"), PRIVATE_HOSTS)
def test_private_registry_of_every_partition(
    ecr: tuple[FakeEcr, FakeServer],
    moto_server: str,
    host: str,
    region: str,
    route: dict[str, str],
) -> None:
    fake, server = ecr
    fake.secret_keys[NODE_KEY] = NODE_SECRET
    image = f"{host}/team/app"
    run = run_plugin(PLUGIN, request_bytes(image), env=ecr_env(server.url, moto_server, **route))
    response = run.response
    assert [c.signature_valid for c in fake.calls] == [True]
    assert response["cacheKeyType"] == "Registry"
    assert response["auth"] == {host: {"username": "AWS", "password": fake.password}}
    assert [(c.target, c.region, c.access_key) for c in fake.calls] == [
        (PRIVATE_TARGET, region, NODE_KEY)
    ]
    assert keyring_lookup(list(response["auth"]), image) == [host]


def test_against_moto_ecr(moto_server: str, use_bundle: bool) -> None:
    image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/app"
    run = run_plugin(
        PLUGIN, request_bytes(image), env=ecr_env(moto_server, moto_server), use_bundle=use_bundle
    )
    # moto issues "AWS:<account>-auth-token" that expired in 2015: never cache an expired token.
    assert run.response["auth"] == {
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com": {
            "username": "AWS",
            "password": "123456789012-auth-token",
        }
    }
    assert run.response["cacheDuration"] == "0s"
    assert run.stderr_lines == [line for line in run.stderr_lines if "test mode" in line]


@pytest.mark.parametrize("host", ["public.ecr.aws", "ecr-public.aws.com"])
def test_public_registry_uses_ecr_public_in_us_east_1(
    ecr: tuple[FakeEcr, FakeServer],
    moto_server: str,
    host: str,
    use_bundle: bool,
    route: dict[str, str],
) -> None:
    fake, server = ecr
    fake.secret_keys[NODE_KEY] = NODE_SECRET
    run = run_plugin(
        PLUGIN,
        request_bytes(f"{host}/nginx/nginx"),
        env=ecr_env(server.url, moto_server, **route),
        use_bundle=use_bundle,
    )
    assert [c.signature_valid for c in fake.calls] == [True]
    assert run.response["auth"] == {host: {"username": "AWS", "password": fake.password}}
    assert [(c.target, c.region, c.service) for c in fake.calls] == [
        (PUBLIC_TARGET, "us-east-1", "ecr-public")
    ]


def test_private_host_with_public_ecr_in_the_path_is_private(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    fake, server = ecr
    image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/public.ecr.aws/x"
    assert run_plugin(PLUGIN, request_bytes(image), env=ecr_env(server.url, moto_server)).response
    assert [c.target for c in fake.calls] == [PRIVATE_TARGET]


@pytest.mark.parametrize(
    ("image", "key"),
    [
        (
            "123456789012.dkr.ecr.us-east-1.amazonaws.com:443/app",
            "123456789012.dkr.ecr.us-east-1.amazonaws.com:443",
        ),
        ("public.ecr.aws:443/x/y", "public.ecr.aws:443"),
    ],
)
def test_port_is_kept_in_the_auth_key(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, image: str, key: str
) -> None:
    _, server = ecr
    run = run_plugin(PLUGIN, request_bytes(image), env=ecr_env(server.url, moto_server))
    assert list(run.response["auth"]) == [key]
    assert keyring_lookup([key], image) == [key]  # upstream's port-less key would not match


@pytest.mark.parametrize(
    ("valid_seconds", "expected"),
    [
        (7200, ("1h0m0s", "59m59s")),
        (43200, ("6h0m0s", "5h59m59s")),
        (1, ("0s",)),
        (-60, ("0s",)),
    ],
)
def test_cache_duration_is_half_the_remaining_validity(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, valid_seconds: int, expected: tuple[str, ...]
) -> None:
    fake, server = ecr
    fake.valid_seconds = valid_seconds
    run = run_plugin(
        PLUGIN,
        request_bytes("123456789012.dkr.ecr.us-east-1.amazonaws.com/a"),
        env=ecr_env(server.url, moto_server),
    )
    assert run.response["cacheDuration"] in expected


def test_token_without_expiry_leaves_cache_duration_to_the_kubelet(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    fake, server = ecr
    fake.valid_seconds = None
    run = run_plugin(
        PLUGIN, request_bytes("public.ecr.aws/a/b"), env=ecr_env(server.url, moto_server)
    )
    assert "cacheDuration" not in run.response


def test_other_host_uses_the_default_region_and_says_so(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, route: dict[str, str]
) -> None:
    fake, server = ecr
    run = run_plugin(
        PLUGIN,
        request_bytes("mirror.example.com:5000/library/nginx"),
        args=["-v=1"],
        env=ecr_env(server.url, moto_server, AWS_REGION="eu-central-1", **route),
    )
    assert run.response["auth"] == {
        "mirror.example.com:5000": {"username": "AWS", "password": fake.password}
    }
    assert [c.region for c in fake.calls] == ["eu-central-1"]
    assert "mirror.example.com is not an ECR host" in run.stderr
    assert "getting an ECR token (the host is not an ECR host) for mirror.example.com" in run.stderr


@pytest.mark.parametrize("valid_seconds", [43200, None])
def test_the_log_states_cache_duration_as_the_response_does(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, valid_seconds: int | None
) -> None:
    """-v=1's answering line and the response give cacheDuration in the same (Go) form, with why."""
    fake, server = ecr
    fake.valid_seconds = valid_seconds
    run = run_plugin(
        PLUGIN,
        request_bytes("public.ecr.aws/a/b"),
        args=["-v=1"],
        env=ecr_env(server.url, moto_server),
    )
    if valid_seconds is None:
        assert (
            "cacheDuration=unset (the config's defaultCacheDuration: the provider knows no expiry) "
            in run.stderr
        )
    else:
        assert run.response["cacheDuration"] in ("6h0m0s", "5h59m59s", "5h59m58s")
        said = f"cacheDuration={run.response['cacheDuration']} (half the credential's remaining "
        assert re.search(re.escape(said) + r"(11h59m5\ds|12h0m0s)\) ", run.stderr), run.stderr


@pytest.mark.parametrize("args", [["get-credentials"], ["get-credentials", "--v=3"], []])
def test_upstream_argument_forms_are_accepted(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str, args: list[str]
) -> None:
    _, server = ecr
    run = run_plugin(
        PLUGIN, request_bytes("public.ecr.aws/a/b"), args=args, env=ecr_env(server.url, moto_server)
    )
    assert run.code == 0


def test_cache_duration_parses_as_go_duration(
    ecr: tuple[FakeEcr, FakeServer], moto_server: str
) -> None:
    _, server = ecr
    run = run_plugin(
        PLUGIN, request_bytes("public.ecr.aws/a/b"), env=ecr_env(server.url, moto_server)
    )
    assert 21590 * SECOND < parse_go_duration(run.response["cacheDuration"]) <= 21600 * SECOND

"""#30 class 2: a broken TLS setup on the node is the operator's to fix. Every CA bundle variable
each route honours, naming a missing file or one that is not PEM, is one line through the bundle:
which bundle, which variable, fix or unset it; never an internal error.

Routes: ECR on the stdlib (AWS_CA_BUNDLE) and through botocore (AWS_CA_BUNDLE, else
REQUESTS_CA_BUNDLE); the ACR token exchange on the stdlib and azure-identity (REQUESTS_CA_BUNDLE,
else CURL_CA_BUNDLE, as requests); google-auth with a key file (the same two). Nothing here can
reach a real endpoint: the plugins run in loopback-only mode and computed hosts resolve to
127.0.0.1:9.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from emulators.aws import NODE_KEY, NODE_SECRET
from emulators.gcp import write_service_account_key
from emulators.harness import Emulator
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.helpers import require_bundle

NOWHERE = "127.0.0.1:9"


@dataclass(frozen=True)
class Route:
    plugin: str
    image: str
    variables: tuple[str, ...]  # the CA bundle variables this route honours
    setup: Callable[[Path, dict[str, Emulator]], tuple[list[str], dict[str, str]]]


def _ecr_stdlib(tmp: Path, emulators: dict[str, Emulator]) -> tuple[list[str], dict[str, str]]:
    """Keys in the environment, no endpoint override: https://api.ecr.us-east-1.amazonaws.com/."""
    return [], {
        "AWS_ACCESS_KEY_ID": NODE_KEY,
        "AWS_SECRET_ACCESS_KEY": NODE_SECRET,
        "CREDPROVIDER_TEST_RESOLVE": f"api.ecr.us-east-1.amazonaws.com={NOWHERE}",
    }


def _ecr_botocore(tmp: Path, emulators: dict[str, Emulator]) -> tuple[list[str], dict[str, str]]:
    """The same, with a setting only botocore implements (so the botocore route is taken)."""
    args, env = _ecr_stdlib(tmp, emulators)
    return args, {**env, "AWS_USE_DUALSTACK_ENDPOINT": "false"}


def _acr_managed_identity(
    tmp: Path, emulators: dict[str, Emulator]
) -> tuple[list[str], dict[str, str]]:
    """IMDS (plain HTTP), then the exchange at the registry over TLS on the stdlib."""
    azure = emulators["azure"]
    return [azure.files["config"]], dict(azure.env)


def _acr_client_secret(
    tmp: Path, emulators: dict[str, Emulator]
) -> tuple[list[str], dict[str, str]]:
    """azure-identity's client secret credential (requests)."""
    config = tmp / "sp.json"
    config.write_text(json.dumps({"tenantId": "t", "aadClientId": "a", "aadClientSecret": "s"}))
    return [str(config)], dict(emulators["azure"].env)


def _gcp_key_file(tmp: Path, emulators: dict[str, Emulator]) -> tuple[list[str], dict[str, str]]:
    """google-auth with a service-account key (requests)."""
    key = tmp / "key.json"
    write_service_account_key(key, f"http://{NOWHERE}/token")
    return ["get-credentials"], {**emulators["gcp"].env, "GOOGLE_APPLICATION_CREDENTIALS": str(key)}


ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/app"
REQUESTS = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
ROUTES = {
    "ecr stdlib": Route("ecr-credential-provider", ECR_IMAGE, ("AWS_CA_BUNDLE",), _ecr_stdlib),
    "ecr botocore": Route(
        "ecr-credential-provider", ECR_IMAGE, ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE"), _ecr_botocore
    ),
    "acr exchange": Route(
        "acr-credential-provider", "contoso.azurecr.io/app", REQUESTS, _acr_managed_identity
    ),
    "acr azure-identity": Route(
        "acr-credential-provider", "contoso.azurecr.io/app", REQUESTS, _acr_client_secret
    ),
    "gcp google-auth": Route("auth-provider-gcp", "gcr.io/p/app", REQUESTS, _gcp_key_file),
}


def _fifo_in_a_directory(tmp: Path) -> Path:
    """A CA directory (OpenSSL's capath, which every variable here may name) whose hashed entry
    is a FIFO: OpenSSL would open it in the handshake that looked its name up, and wait."""
    directory = tmp / "certs"
    directory.mkdir()
    os.mkfifo(directory / "5ed36f99.0")
    return directory


PROBLEMS = {
    "FIFO in a directory": (
        _fifo_in_a_directory,
        "its entry 5ed36f99.0 is a FIFO, not a regular file",
    ),
    "missing": (lambda tmp: str(tmp / "no-such-bundle.pem"), "no such file or directory"),
    "not PEM": (
        lambda tmp: (tmp / "garbage.pem", (tmp / "garbage.pem").write_text("not a certificate\n"))[
            0
        ],
        "it holds no PEM certificate",
    ),
}
CASES = [
    (route, variable, problem)
    for route, spec in ROUTES.items()
    for variable in spec.variables
    for problem in PROBLEMS
]


@pytest.mark.parametrize(("route", "variable", "problem"), CASES, ids=["-".join(c) for c in CASES])
def test_a_broken_ca_bundle_is_the_operators_one_line(
    aws: Emulator,
    gcp: Emulator,
    azure: Emulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    route: str,
    variable: str,
    problem: str,
) -> None:
    require_bundle()
    spec = ROUTES[route]
    args, env = spec.setup(tmp_path, {"aws": aws, "gcp": gcp, "azure": azure})
    make_path, reason = PROBLEMS[problem]
    bundle = str(make_path(tmp_path))
    for name in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        env.pop(name, None)  # only the one under test is set (the first set one wins)
        monkeypatch.delenv(name, raising=False)
    env[variable] = bundle
    run = run_plugin(
        spec.plugin, request_bytes(spec.image), [*args, "--deadline=20s"], env, use_bundle=True
    )
    lines = [line for line in run.stderr.splitlines() if "test mode" not in line]
    assert run.code == 1 and run.stdout == b"", run.stderr
    assert "Traceback" not in run.stderr and "report it" not in run.stderr, run.stderr
    assert len(lines) == 1, run.stderr
    assert (
        f"CA bundle {bundle} named by {variable} cannot be used: {reason}; fix or unset {variable}"
        in lines[0]
    )

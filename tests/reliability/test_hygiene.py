"""Secret hygiene: at maximum verbosity no secret reaches stderr, an error message or any file except
the 0600 cache, in success and failure scenarios of every provider."""

from __future__ import annotations

import base64
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from emulators.aws import NOWHERE, aws_error
from emulators.azure import make_jwt
from emulators.gcp import write_service_account_key
from emulators.harness import ACR_REGISTRY, aws_emulator, azure_emulator, gcp_emulator
from emulators.http import FakeResponse
from emulators.kubelet_exec import PluginRun, request_bytes, run_plugin
from tests.reliability.checks import Figures, Outcome, leaked_secrets

SA_TOKEN = make_jwt({"sub": "system:serviceaccount:apps:puller", "aud": "sts.amazonaws.com"})
SP_SECRET = "sp-client-secret-0123456789abcdef"
CERT_PASSWORD = "certificate-password-987654"


@dataclass
class Scenario:
    name: str
    run: Callable[[Path], tuple[PluginRun, list[str]]]  # (run, secrets that must not leak)


def _workspace(tmp: Path) -> dict[str, str]:
    (tmp / "home").mkdir(exist_ok=True)
    return {
        "HOME": str(tmp / "home"),
        "CREDPROVIDER_CACHE_DIR": str(tmp / "cache"),
        "TMPDIR": str(tmp / "home"),
    }


def _aws(
    fault: FakeResponse | None, token: str | None = None
) -> Callable[[Path], tuple[PluginRun, list[str]]]:
    def run(tmp: Path) -> tuple[PluginRun, list[str]]:
        with aws_emulator() as aws:
            ecr = aws.fakes["ecr"]
            ecr.fault = fault  # type: ignore[attr-defined]
            annotations = (
                {"eks.amazonaws.com/ecr-role-arn": "arn:aws:iam::123456789012:role/r"}
                if token
                else None
            )
            result = run_plugin(
                "ecr-credential-provider",
                request_bytes(
                    "123456789012.dkr.ecr.us-east-1.amazonaws.com/a",
                    token=token,
                    annotations=annotations,
                ),
                ["-v=9"],
                {**aws.env, **_workspace(tmp)},
            )
            secrets = [
                aws.env["AWS_SECRET_ACCESS_KEY"],
                ecr.password,
                ecr.token(),  # type: ignore[attr-defined]
                SA_TOKEN,
            ]
            from moto.sts.models import sts_backends

            for account in sts_backends.values():
                for backend in account.values():
                    for role in backend.assumed_roles:
                        secrets += [role.secret_access_key, role.session_token]
            return result, secrets

    return run


def _gcp(flow: str) -> Callable[[Path], tuple[PluginRun, list[str]]]:
    def run(tmp: Path) -> tuple[PluginRun, list[str]]:
        with gcp_emulator() as gcp:
            meta, sts = gcp.fakes["metadata"], gcp.fakes["sts"]
            env = {**gcp.env, **_workspace(tmp)}
            args = ["get-credentials", "-v=9"]
            token, annotations = None, None
            secrets = [meta.access_token, sts.access_token, SA_TOKEN]  # type: ignore[attr-defined]
            if flow == "workload identity":
                args += ["--identity-provider=https://idp", "--project-id=p"]
                token, annotations = SA_TOKEN, {"iam.gke.io/enable-wi-image-pull": "true"}
            elif flow == "sts failure":
                args += ["--identity-provider=https://idp", "--project-id=p"]
                token, annotations = SA_TOKEN, {"iam.gke.io/enable-wi-image-pull": "true"}
                sts.fault = FakeResponse.json({"error": "invalid_grant"}, status=400)  # type: ignore[attr-defined]
            elif flow == "key file":
                key_file = tmp / "key.json"
                pem = write_service_account_key(key_file, f"{NOWHERE}/token")
                env["GOOGLE_APPLICATION_CREDENTIALS"] = str(key_file)
                secrets.append(pem.splitlines()[1])
            result = run_plugin(
                "auth-provider-gcp",
                request_bytes("gcr.io/p/a", token=token, annotations=annotations),
                args,
                env,
            )
            return result, secrets

    return run


def _azure(mode: str) -> Callable[[Path], tuple[PluginRun, list[str]]]:
    def run(tmp: Path) -> tuple[PluginRun, list[str]]:
        with azure_emulator() as azure:
            imds, aad, acr = azure.fakes["imds"], azure.fakes["aad"], azure.fakes["acr"]
            config, token, annotations = azure.files["config"], None, None
            if mode == "client secret":
                config = str(tmp / "sp.json")
                Path(config).write_text(
                    json.dumps({"tenantId": "t", "aadClientId": "a", "aadClientSecret": SP_SECRET})
                )
            elif mode == "secret rejected":
                config = str(tmp / "sp.json")
                Path(config).write_text(
                    json.dumps({"tenantId": "t", "aadClientId": "a", "aadClientSecret": SP_SECRET})
                )
                aad.fault = FakeResponse.json(
                    {
                        "error": "invalid_client",  # type: ignore[attr-defined]
                        "error_description": "AADSTS7000215",
                    },
                    status=401,
                )
            elif mode == "certificate":
                config = str(tmp / "cert.json")
                Path(config).write_text(
                    json.dumps(
                        {
                            "tenantId": "t",
                            "aadClientId": "a",
                            "aadClientCertPath": str(tmp / "missing.pfx"),
                            "aadClientCertPassword": CERT_PASSWORD,
                        }
                    )
                )
            elif mode == "service account":
                token = SA_TOKEN
                annotations = {
                    "kubernetes.azure.com/acr-client-id": "c",
                    "kubernetes.azure.com/acr-tenant-id": "t",
                }
            elif mode == "exchange refused":
                acr.exchange_fault = FakeResponse.json({"errors": [{"code": "DENIED"}]}, status=403)  # type: ignore[attr-defined]
            result = run_plugin(
                "acr-credential-provider",
                request_bytes(f"{ACR_REGISTRY}/a", token=token, annotations=annotations),
                [config, "-v=9"],
                {**azure.env, **_workspace(tmp)},
            )
            secrets = [
                imds.access_token,
                aad.access_token,
                SP_SECRET,
                CERT_PASSWORD,
                SA_TOKEN,  # type: ignore[attr-defined]
                *acr.refresh_tokens,
            ]  # type: ignore[attr-defined]
            return result, secrets

    return run


SCENARIOS = [
    Scenario("aws success", _aws(None)),
    Scenario("aws service account (assumed role)", _aws(None, SA_TOKEN)),
    Scenario(
        "aws denied",
        _aws(aws_error("AccessDeniedException", "no")),
    ),
    Scenario("gcp metadata", _gcp("metadata")),
    Scenario("gcp workload identity", _gcp("workload identity")),
    Scenario("gcp sts failure", _gcp("sts failure")),
    Scenario("gcp key file (token endpoint down)", _gcp("key file")),
    Scenario("azure managed identity", _azure("managed identity")),
    Scenario("azure client secret", _azure("client secret")),
    Scenario("azure secret rejected", _azure("secret rejected")),
    Scenario("azure certificate password", _azure("certificate")),
    Scenario("azure service account", _azure("service account")),
    Scenario("azure exchange refused", _azure("exchange refused")),
]


def file_violations(root: Path, secrets: list[str]) -> list[str]:
    """Secrets in any file under ``root`` other than the 0600 cache; wrong cache modes."""
    problems = []
    cache = root / "cache"
    if cache.exists() and stat.S_IMODE(cache.stat().st_mode) != 0o700:
        problems.append(f"cache directory mode {stat.S_IMODE(cache.stat().st_mode):o}")
    for path in root.rglob("*"):
        if not path.is_file() or (path.name.endswith(".json") and path.parent == root):
            continue
        if path.parent == cache:
            if stat.S_IMODE(path.stat().st_mode) != 0o600:
                problems.append(f"{path.name} mode {stat.S_IMODE(path.stat().st_mode):o}")
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        leaked = leaked_secrets(secrets, text)
        if leaked:
            problems.append(f"{path.relative_to(root)} contains {leaked}")
    return problems


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_no_secret_leaks_at_maximum_verbosity(
    figures: Figures, tmp_path: Path, scenario: Scenario
) -> None:
    run, secrets = scenario.run(tmp_path)
    encoded = [base64.b64encode(s.encode()).decode() for s in secrets if len(s) >= 12]
    problems = [f"stderr contains {leak}" for leak in leaked_secrets(secrets + encoded, run.stderr)]
    problems += file_violations(tmp_path, secrets)
    if run.code == 1 and run.stdout != b"":
        problems.append("stdout on failure")
    figures.record(
        Outcome(
            "hygiene", scenario.name, run.code, run.seconds, None, not problems, "; ".join(problems)
        )
    )
    assert not problems


def test_the_hygiene_check_catches_a_leak(tmp_path: Path) -> None:
    """The suite can fail: a plugin that writes a secret past the redacting logger is caught."""
    import subprocess
    import sys

    from release.bundle import REPO
    from tests.fakes.fake_plugin import SECRET

    leaky = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.stderr.write('debug: {SECRET}\\n')"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert leaked_secrets([SECRET], leaky.stderr) != []
    (tmp_path / "debug.log").write_text(f"token={SECRET}")
    assert file_violations(tmp_path, [SECRET]) == [
        f"debug.log contains {leaked_secrets([SECRET], SECRET)}"
    ]
    assert os.path.exists(REPO)

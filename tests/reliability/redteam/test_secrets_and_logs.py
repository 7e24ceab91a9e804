"""3. Secrets are scrubbed, then cut; 4. log injection and flooding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from credprovider.runtime.provider import one_line
from credprovider.runtime.redact import forget_secrets, register_secret
from emulators.aws import FakeEcr, aws_error
from emulators.http import FakeServer
from emulators.kubelet_exec import request_bytes, run_plugin
from tests.helpers import run_cli
from tests.reliability.checks import Figures
from tests.reliability.redteam.common import (
    ECR,
    IMAGE,
    REGISTRY,
    ecr_env,
    record,
)


@pytest.mark.parametrize("offset", [0, 200, 230, 280, 299, 310])
def test_an_error_detail_is_scrubbed_before_it_is_cut(offset: int) -> None:
    token = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9." + "p" * 40 + ".sig" + "n" * 20
    opaque = "opaque-refresh-token-" + "q" * 40
    forget_secrets()
    register_secret(opaque)
    try:
        for secret in (token, opaque):
            line = one_line("x" * offset + secret + " and more text after it " * 5)
            for start in range(0, len(secret) - 12):
                assert secret[start : start + 12] not in line
    finally:
        forget_secrets()


def test_get_does_not_print_the_service_account_token_a_plugin_echoes(
    tmp_path: Path, figures: Figures
) -> None:
    token = "sa-token-" + "t" * 60
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = bin_dir / "echo-plugin"
    plugin.write_text('#!/bin/sh\necho "failed on $(cat)" >&2\nexit 1\n')
    plugin.chmod(0o755)
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        "  - name: echo-plugin\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        "    defaultCacheDuration: 1m\n    matchImages: [registry.example]\n"
        "    tokenAttributes:\n      serviceAccountTokenAudience: aud\n"
        "      cacheType: ServiceAccount\n      requireServiceAccount: true\n"
    )
    (tmp_path / "token").write_text(token)
    for extra in ([], ["--json"]):
        result = run_cli(
            "get", "registry.example/app", "--config", str(config), "--bin-dir", str(bin_dir),
            "--sa-token-file", str(tmp_path / "token"), *extra,
        )  # fmt: skip
        assert "failed on" in result.stdout
        assert token not in result.stdout + result.stderr
        shown = result.stdout if not extra else json.loads(result.stdout)["providers"][0]["stderr"]
        assert "sa-…(69 chars)" in shown


HOSTILE_TEXT = "a\u009b31m\u202eb\x1b[2J\x07\rforged: line"
# What gets past request validation to the -v=1 request line: C1 controls and bidi overrides.
HOSTILE_IMAGE_PATH = "a\u009b31m\u202eb"


def test_the_request_line_escapes_what_a_terminal_would_interpret(
    ecr: tuple[FakeEcr, FakeServer], figures: Figures
) -> None:
    _, server = ecr
    run = run_plugin(
        ECR, request_bytes(f"{REGISTRY}/{HOSTILE_IMAGE_PATH}"), ["-v=1"], ecr_env(server)
    )
    problems = [f"raw {ch!r} on stderr" for ch in "\u009b\u202e" if ch in run.stderr]
    if "\\u202e" not in run.stderr or "\\u009b" not in run.stderr:
        problems.append("the escapes are not shown")
    record(figures, "log injection: the image in the -v=1 request line", run, problems)


def test_a_server_body_in_an_error_line_is_escaped(
    ecr: tuple[FakeEcr, FakeServer], figures: Figures
) -> None:
    fake, server = ecr
    fake.fault = aws_error("AccessDeniedException", HOSTILE_TEXT)
    run = run_plugin(ECR, request_bytes(IMAGE), [], ecr_env(server))
    problems = [f"raw {ch!r} on stderr" for ch in "\u009b\u202e\x1b\x07\r" if ch in run.stderr]
    if "\\x1b[2J" not in run.stderr or "AccessDeniedException" not in run.stderr:
        problems.append(f"the server's message is not shown escaped: {run.stderr[-300:]}")
    record(figures, "log injection: a server's error message", run, problems, verbose=False)


@pytest.mark.parametrize("verbosity", ["-v=0", "-v=4"])
def test_a_huge_image_does_not_flood_the_log(
    ecr: tuple[FakeEcr, FakeServer], figures: Figures, verbosity: str
) -> None:
    _, server = ecr
    image = "quay.example/" + "a" * 600_000
    run = run_plugin(ECR, request_bytes(image), [verbosity], ecr_env(server))
    problems = [] if len(run.stderr) < 10_000 else [f"{len(run.stderr)} bytes of stderr"]
    if run.code != 1:
        problems.append(f"exit {run.code}")
    record(
        figures, f"log flooding: a 600 kB image at {verbosity}", run, problems, verbosity != "-v=0"
    )

"""5. One clear line, never a traceback: bad plugin input, insane metadata, bad tool input."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.configs import HEAD, provider_yaml
from emulators.aws import FakeEcr
from emulators.harness import SAFE_ENV
from emulators.http import FakeResponse, FakeServer, serve
from emulators.kubelet_exec import request_bytes, run_plugin
from release.bundle import REPO
from tests.helpers import run_cli
from tests.reliability.checks import Figures, Outcome
from tests.reliability.redteam.common import (
    ECR,
    IMAGE,
    ecr_env,
    record,
)

BIG_NUMBER = "9" * 5000
PLUGIN_INPUTS = [
    ("--deadline=99999999999", ["--deadline=99999999999"], {}, request_bytes(IMAGE), "at most"),
    ("CREDPROVIDER_DEADLINE huge", [], {"CREDPROVIDER_DEADLINE": "99999999999"}, request_bytes(IMAGE), "at most"),
    (
        "a 5000-digit number as an extra field",
        [],
        {},
        request_bytes(IMAGE)[:-2] + f',"x":{BIG_NUMBER}}}'.encode(),
        "invalid request",
    ),
    (
        "a 5000-digit number as the image",
        [],
        {},
        f'{{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":{BIG_NUMBER}}}'.encode(),
        "invalid request",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("scenario", "args", "extra_env", "stdin", "message"),
    PLUGIN_INPUTS,
    ids=[case[0] for case in PLUGIN_INPUTS],
)
def test_bad_plugin_input_is_one_clear_line(
    ecr: tuple[FakeEcr, FakeServer],
    figures: Figures,
    scenario: str,
    args: list[str],
    extra_env: dict[str, str],
    stdin: bytes,
    message: str,
) -> None:
    _, server = ecr
    run = run_plugin(ECR, stdin, args, ecr_env(server, **extra_env))
    problems = [] if run.code == 1 else [f"exit {run.code}"]
    if message not in run.stderr or "internal error" in run.stderr:
        problems.append(f"not the expected line: {run.stderr[-300:]}")
    record(figures, f"one line: {scenario}", run, problems, verbose=False)


def test_insane_metadata_lifetimes_are_one_line(figures: Figures) -> None:
    """expires_in of 1e300 or NaN: no real metadata server sends it, so the answer is refused
    by the bounded decoder (numbers within 2**53, no NaN) with one line naming the server."""
    from emulators.gcp import FakeMetadata

    for lifetime in ("1e300", "NaN", "-Infinity"):
        fake = FakeMetadata()
        with serve(
            lambda request, fake=fake, lifetime=lifetime: FakeResponse(
                200,
                fake(request).body.replace(b"3599", lifetime.encode()),
                {"Content-Type": "application/json", "Metadata-Flavor": "Google"},
            )
        ) as server:
            env = {**SAFE_ENV, "GCE_METADATA_HOST": server.url.removeprefix("http://")}
            run = run_plugin(
                "auth-provider-gcp", request_bytes("gcr.io/p/app"), ["get-credentials"], env
            )
        problems = [] if run.code == 1 else [f"exit {run.code}: {run.stdout[:200]!r}"]
        reason = "out of range" if lifetime[-1].isdigit() else f"has {lifetime}"
        if not any(reason in line and "metadata server" in line for line in run.error_lines):
            problems.append(f"not the expected line: {run.stderr[-300:]}")
        record(figures, f"one line: metadata expires_in {lifetime}", run, problems, verbose=False)


def test_a_bad_tenant_id_is_one_clear_line(tmp_path: Path, figures: Figures) -> None:
    config = tmp_path / "azure.json"
    config.write_text(json.dumps({"tenantId": "bad tenant/", "useManagedIdentityExtension": True}))
    run = run_plugin(
        "acr-credential-provider",
        request_bytes("contoso.azurecr.io/app"),
        [str(config), "-v=9"],
        SAFE_ENV,
    )
    problems = [] if run.code == 1 else [f"exit {run.code}"]
    if "is not a tenant ID" not in run.stderr or "internal error" in run.stderr:
        problems.append(f"not the expected line: {run.stderr[-300:]}")
    record(figures, "one line: azure.json tenantId 'bad tenant/'", run, problems)


def _deep_yaml(tmp: Path) -> list[str]:
    path = tmp / "deep.yaml"
    path.write_text("a: " + "[" * 50_000 + "]" * 50_000 + "\n")
    return ["validate", str(path)]


def _billion_laughs(tmp: Path) -> list[str]:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 10):
        refs = ",".join(f"*a{level - 1}" for _ in range(9))
        lines.append(f"a{level}: &a{level} [{refs}]")
    path = tmp / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")
    return ["validate", str(path)]


def _binary_file(tmp: Path) -> list[str]:
    path = tmp / "config.yaml"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe" * 100)
    return ["validate", str(path)]


def _nul_in_a_provider_name(tmp: Path) -> list[str]:
    path = tmp / "config.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        '  - name: "ecr\\0credential"\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n'
        "    defaultCacheDuration: 1m\n    matchImages: [registry.example]\n"
    )
    return ["validate", str(path), "--bin-dir", str(tmp)]


def _nul_in_a_provider_name_get(tmp: Path) -> list[str]:
    return ["get", "registry.example/a", "--config", *_nul_in_a_provider_name(tmp)[1:]]


def _missing_token_file(tmp: Path) -> list[str]:
    config = tmp / "config.yaml"
    config.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        "  - name: some-plugin\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        "    defaultCacheDuration: 1m\n    matchImages: [registry.example]\n"
    )
    return [
        "get", "registry.example/a", "--config", str(config), "--bin-dir", str(tmp),
        "--sa-token-file", str(tmp / "x"),
    ]  # fmt: skip


def _directory_as_token_file(tmp: Path) -> list[str]:
    args = _missing_token_file(tmp)
    return [*args[:-1], str(tmp)]


def _missing_kubelet_config(tmp: Path) -> list[str]:
    return ["migrate", "--kubelet-config", str(tmp / "missing.yaml")]


def _invalid_kubelet_config(tmp: Path) -> list[str]:
    path = tmp / "kubelet.yaml"
    path.write_text("kind: KubeletConfiguration\n  bad: [indent\n")
    return ["migrate", "--kubelet-config", str(path)]


def _unbalanced_flags(tmp: Path) -> list[str]:
    return ["migrate", '--kubelet-flags=--cloud-provider="aws']


def _non_utf8_config_out(tmp: Path) -> list[str]:
    out = tmp / "existing.yaml"
    out.write_bytes(b"\xff\xfe not utf-8")
    # A working credprovider (install refuses a target that does not answer as one): the bundle's
    # dispatch, given argv[0] as the bundle's launcher gives it.
    target = tmp / "credprovider"
    run_entry = "import sys; from credprovider.entry import main; main(sys.argv[1:])"
    target.write_text(
        f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -c "{run_entry}" "$0" "$@"\n'
    )
    target.chmod(0o755)
    return [
        "install", "--bin-dir", str(tmp / "bin"), "--config-out", str(out), "--target", str(target),
        "--providers", "aws",
    ]  # fmt: skip


def _huge_duration(tmp: Path) -> list[str]:
    path = tmp / "config.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
        "  - name: ecr-credential-provider\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
        f"    defaultCacheDuration: {BIG_NUMBER}s\n    matchImages: [registry.example]\n"
    )
    return ["validate", str(path)]


def _million_digit_yaml_integer(tmp: Path) -> list[str]:
    path = tmp / "config.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\n"
        f"providers: []\nx: {'9' * 1_000_000}\n"
    )
    return ["validate", str(path)]


def _many_providers(tmp: Path) -> list[str]:
    """Ten thousand providers and no alias: the kubelet reads it, so must validate."""
    path = tmp / "config.yaml"
    path.write_text(
        HEAD + "".join(provider_yaml(f"p{i}", [f"r{i}.example"]) for i in range(10_000))
    )
    return ["validate", str(path), "--bin-dir", str(tmp)]


def _many_match_images(tmp: Path) -> list[str]:
    """A hundred thousand matchImages and no alias."""
    path = tmp / "config.yaml"
    images = [f"r{i}.example" for i in range(100_000)]
    path.write_text(HEAD + provider_yaml("ecr-credential-provider", images))
    return ["validate", str(path), "--bin-dir", str(tmp)]


CLI_INPUTS: list[tuple[str, Callable[[Path], list[str]], str]] = [
    ("validate: 10,000 providers, no alias", _many_providers, "well-formed (10000 provider(s)"),
    ("validate: 100,000 matchImages, no alias", _many_match_images, "well-formed (1 provider(s)"),
    ("validate: a 5000-digit duration", _huge_duration, "time: invalid duration"),
    ("validate: a million-digit YAML integer", _million_digit_yaml_integer, 'unknown field "x"'),
    ("validate: YAML nested 50,000 deep", _deep_yaml, "max depth"),
    ("validate: a billion laughs", _billion_laughs, "excessive aliasing"),
    ("validate: a binary file", _binary_file, "not UTF-8"),
    ("validate: NUL in a provider name", _nul_in_a_provider_name, "\\x00"),
    ("get: NUL in a provider name", _nul_in_a_provider_name_get, "embedded null byte"),
    ("get: --sa-token-file missing", _missing_token_file, "cannot read --sa-token-file"),
    ("get: --sa-token-file a directory", _directory_as_token_file, "cannot read --sa-token-file"),
    ("migrate: --kubelet-config missing", _missing_kubelet_config, "no such file or directory"),
    ("migrate: --kubelet-config not YAML", _invalid_kubelet_config, "not YAML"),
    ("migrate: unbalanced quotes in the flags", _unbalanced_flags, "No closing quotation"),
    ("install: a non-UTF-8 --config-out", _non_utf8_config_out, "exists with other content"),
]


@pytest.mark.parametrize(
    ("scenario", "make", "message"), CLI_INPUTS, ids=[c[0] for c in CLI_INPUTS]
)
def test_bad_tool_input_is_a_clear_message(
    tmp_path: Path,
    figures: Figures,
    scenario: str,
    make: Callable[[Path], list[str]],
    message: str,
) -> None:
    result = run_cli(*make(tmp_path))
    output = result.stdout + result.stderr
    problems = [] if result.returncode in (1, 2) else [f"exit {result.returncode}"]
    if "Traceback" in output or "internal error" in output:
        problems.append(f"a traceback: {output[-300:]}")
    if message not in output:
        problems.append(f"no {message!r} in: {output[-300:]}")
    figures.record(
        Outcome("redteam", f"tool: {scenario}", result.returncode, 0.0, None, not problems,
                "; ".join(problems))
    )  # fmt: skip
    assert not problems, problems

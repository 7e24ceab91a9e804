"""``make demo`` (``python -m demo``): every plugin in dist/credprovider answering kubelet-style
requests on loopback.

Starts the emulators (the project's fakes, and moto for STS), then runs each bundled
plugin exactly as the kubelet would: the provider's args, a CredentialProviderRequest on stdin, one
CredentialProviderResponse on stdout. Passwords are shown redacted.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field

from credprovider.entry import PLUGIN_MODULES
from credprovider.runtime.redact import redact
from emulators.harness import (
    ACR_REGISTRY,
    aws_emulator,
    azure_emulator,
    gcp_emulator,
    registries_emulator,
)
from emulators.kubelet_exec import request_bytes, run_plugin
from release.bundle import BUNDLE_DIR

SA_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YXBwOnB1bGxlciJ9.c2ln"


@dataclass
class Scenario:
    title: str
    plugin: str
    image: str
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    token: str | None = None
    annotations: dict[str, str] | None = None


@contextmanager
def aws_scenarios() -> Iterator[list[Scenario]]:
    # ECR is the project's fake, whose tokens live 12 hours as real ones do (moto's expire in
    # 2015, which would make every answer's cacheDuration 0s); moto answers STS.
    with aws_emulator() as aws:
        yield [
            Scenario(
                "ECR private registry (token valid 12 h: cached for half of that)",
                "ecr-credential-provider",
                "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/app",
                ["get-credentials"],
                aws.env,
            ),
            Scenario(
                "ECR Public (port kept in the key)",
                "ecr-credential-provider",
                "public.ecr.aws:443/nginx/nginx",
                [],
                aws.env,
            ),
            Scenario(
                "ECR with a service-account token (STS AssumeRoleWithWebIdentity at moto)",
                "ecr-credential-provider",
                "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/app",
                [],
                aws.env,
                token=SA_TOKEN,
                annotations={
                    "eks.amazonaws.com/ecr-role-arn": "arn:aws:iam::123456789012:role/image-puller"
                },
            ),
        ]


@contextmanager
def azure_scenarios() -> Iterator[list[Scenario]]:
    with azure_emulator() as azure:
        node = azure.files["config"]
        yield [
            Scenario(
                "ACR with the node's managed identity (IMDS -> /oauth2/exchange)",
                "acr-credential-provider",
                f"{ACR_REGISTRY}/team/app",
                [node],
                azure.env,
            ),
            Scenario(
                "ACR serving an mcr.microsoft.com mirror (--registry-mirror)",
                "acr-credential-provider",
                "mcr.microsoft.com/oss/nginx/nginx",
                [node, f"--registry-mirror=mcr.microsoft.com:{ACR_REGISTRY}"],
                azure.env,
            ),
            Scenario(
                "ACR with the pod's service account token (Entra workload identity)",
                "acr-credential-provider",
                f"{ACR_REGISTRY}/team/app",
                [node],
                azure.env,
                token=SA_TOKEN,
                annotations={
                    "kubernetes.azure.com/acr-client-id": "pod-app-client-id",
                    "kubernetes.azure.com/acr-tenant-id": "demo-tenant",
                },
            ),
        ]


@contextmanager
def gcp_scenarios() -> Iterator[list[Scenario]]:
    with gcp_emulator() as gcp:
        idp = "https://container.googleapis.com/v1/projects/demo/locations/us-central1/clusters/c"
        yield [
            Scenario(
                "Artifact Registry with the node's service account (metadata server)",
                "auth-provider-gcp",
                "us-central1-docker.pkg.dev/demo/repo/app",
                ["get-credentials", "--v=3"],
                gcp.env,
            ),
            Scenario(
                "GKE Workload Identity: the pod's token exchanged at STS (TLS, test CA)",
                "auth-provider-gcp",
                "gcr.io/demo/app",
                ["get-credentials", "--identity-provider", idp, "--project-id", "demo"],
                gcp.env,
                token=SA_TOKEN,
                annotations={"iam.gke.io/enable-wi-image-pull": "true"},
            ),
        ]


@contextmanager
def registries_scenarios() -> Iterator[list[Scenario]]:
    with registries_emulator() as emulator:
        token = emulator.fakes["issuer"].token(audience="registry.example.test")  # type: ignore[attr-defined]
        ca = ["--ca-file", emulator.files["ca"], "--registry", "registry.example.test"]
        url = {name: server.url.rstrip("/") for name, server in emulator.servers.items()}
        yield [
            Scenario(
                "Quay robot federation: the pod's token for the robot's (any registry: issue #64)",
                "registry-credential-provider",
                "registry.example.test/team/app",
                ["--backend", "quay", "--url", url["quay"], "--robot", "team+puller", *ca],
                emulator.env,
                token=token,
            ),
            Scenario(
                "Vault: a kubernetes login with the pod's token, then a KV v2 username/password",
                "registry-credential-provider",
                "registry.example.test/team/app",
                [
                    "--backend",
                    "vault",
                    "--url",
                    url["vault"],
                    "--role",
                    "pull",
                    "--secret-path",
                    "registry/team",
                    *ca,
                ],
                emulator.env,
                token=token,
            ),
            Scenario(
                "The namespace's pull Secret, read as the pod through the API server",
                "registry-credential-provider",
                "registry.example.test/team/app",
                ["--backend", "secret", "--url", url["secrets"], *ca],
                emulator.env,
                token=token,
                annotations={"registry.credprovider.io/pull-secret": "pull"},
            ),
        ]


SCENARIO_SOURCES: dict[str, Callable[[], AbstractContextManager[list[Scenario]]]] = {
    "ecr-credential-provider": aws_scenarios,
    "acr-credential-provider": azure_scenarios,
    "auth-provider-gcp": gcp_scenarios,
    "registry-credential-provider": registries_scenarios,
}


def show(scenario: Scenario, use_bundle: bool) -> bool:
    request = request_bytes(scenario.image, token=scenario.token, annotations=scenario.annotations)
    run = run_plugin(scenario.plugin, request, scenario.args, scenario.env, use_bundle=use_bundle)
    shown_request = json.loads(request)
    if "serviceAccountToken" in shown_request:
        shown_request["serviceAccountToken"] = redact(shown_request["serviceAccountToken"])
    print(f"\n== {scenario.title}")
    print(f"$ {scenario.plugin} {' '.join(scenario.args)}".rstrip())
    print(f"stdin : {json.dumps(shown_request, separators=(',', ':'), ensure_ascii=False)}")
    if run.code != 0:
        print(f"exit {run.code}: {run.stderr.strip()}")
        return False
    response = json.loads(run.stdout)
    for entry in response.get("auth", {}).values():
        entry["password"] = redact(entry["password"])
    print(f"stdout: {json.dumps(response, separators=(',', ':'), ensure_ascii=False)}")
    print(f"exit 0 in {run.seconds * 1000:.0f} ms")
    return True


def main() -> int:
    use_bundle = (BUNDLE_DIR / "credprovider").exists()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request access log
    for key in [k for k in os.environ if k.startswith(("AWS_", "AZURE_", "GOOGLE_", "GCE_"))]:
        del os.environ[key]
    print(
        f"Running the plugins from {'the bundle ' + str(BUNDLE_DIR) if use_bundle else 'source'}"
        " against loopback emulators (passwords redacted)."
    )
    ok = True
    with ExitStack() as stack:
        for name in PLUGIN_MODULES:
            for scenario in stack.enter_context(SCENARIO_SOURCES[name]()):
                ok = show(scenario, use_bundle) and ok
    print("\nAll plugins answered." if ok else "\nSome plugins failed (see above).")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

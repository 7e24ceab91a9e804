"""The registry plugin's run through the real control plane (issue #64): pure data, and the steps
tests/e2e/node.py takes inside the sandbox for it.

Six providers of ``registry-credential-provider``, each on a registry host of its own, each pod's
credential traded with the token the real API server signed for the pod's service account:

* ``quay`` and ``quay-sts``: Quay robot federation (the shipped endpoint, and the RFC 8693 one);
  the stand-in checks the token with the API server's key and trusts one service account
  (``quay-puller``) as the robot;
* ``artifactory`` and ``cloudsmith``: JFrog's OIDC exchange (an identity mapping of
  ``jfrog-puller``) and Cloudsmith's (a service trusting ``cloudsmith-puller``);
* ``vault``: a Vault role bound to ``vault-puller``; the KV secret's username and password;
* ``secret``: the real API server itself, read as the pod: the Secret ``secret-puller``'s
  annotation names, which a Role lets it get (audience: the API server's own).

A pod whose service account the backend does not trust pulls with no credential at all.

On the real runtime (tests/e2e/test_real_runtime.py) the same pods, and config/examples'
Pod Identity ones, are pulled by containerd from a registry front whose hosts take only what the
stand-ins issued (:func:`verifiers`): the exchanged credential, and nothing the pod or node holds.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from emulators import registry
from emulators.federation import (
    FakeArtifactory,
    FakeCloudsmith,
    FakeQuay,
    FakeVault,
    Verifier,
    dockerconfigjson,
)
from emulators.http import serve
from tests.e2e import controlplane, tokens
from tests.e2e.tokens import NAMESPACE, TokenPull

PLUGIN = "registry-credential-provider"
AUDIENCE = "registry.e2e.example"  # what Quay's and Vault's entries trust
SECRET_AUDIENCE = controlplane.ISSUER  # the API server accepts its own issuer (no --api-audiences)
QUAY_HOST, VAULT_HOST, SECRET_HOST = "quay.e2e.example", "harbor.e2e.example", "private.e2e.example"
STS_HOST, JFROG_HOST, CLOUDSMITH_HOST = (
    "sts.e2e.example",
    "jfrog.e2e.example",
    "docker.cloudsmith.io",
)
# inside the sandbox's own network namespace
QUAY_PORT, VAULT_PORT, JFROG_PORT, CLOUDSMITH_PORT = 18441, 18442, 18443, 18444
ROBOT = "team+puller"
ANNOTATION = "registry.credprovider.io/pull-secret"
VAULT_USER, VAULT_PASSWORD = "harbor-robot", "harbor-password-from-vault"
SECRET_USER, SECRET_PASSWORD = "private-user", "private-password-from-the-secret"

SERVICE_ACCOUNTS = {
    "quay-puller": {},
    "vault-puller": {},
    "secret-puller": {ANNOTATION: "pull-creds"},
    "secret-stranger": {ANNOTATION: "pull-creds"},  # names the Secret, may not get it
    "nobody-trusts": {},
    "jfrog-puller": {},
    "cloudsmith-puller": {},
}
JFROG_USER = "k8s-puller"
PULLS = (
    TokenPull("quay", "quay-puller", f"{QUAY_HOST}/team/app:1", PLUGIN, "quay"),
    TokenPull("quay-untrusted", "nobody-trusts", f"{QUAY_HOST}/team/other:1", None, None),
    TokenPull("vault", "vault-puller", f"{VAULT_HOST}/team/app:1", f"{PLUGIN}-vault", "vault"),
    TokenPull("vault-untrusted", "nobody-trusts", f"{VAULT_HOST}/team/other:1", None, None),
    TokenPull("secret", "secret-puller", f"{SECRET_HOST}/team/app:1", f"{PLUGIN}-secret", "secret"),
    TokenPull("secret-forbidden", "secret-stranger", f"{SECRET_HOST}/team/other:1", None, None),
    TokenPull("quay-sts", "quay-puller", f"{STS_HOST}/team/app:1", f"{PLUGIN}-sts", "quay-sts"),
    TokenPull("jfrog", "jfrog-puller", f"{JFROG_HOST}/team/app:1", f"{PLUGIN}-jfrog", "artifactory"),
    TokenPull("jfrog-untrusted", "nobody-trusts", f"{JFROG_HOST}/team/other:1", None, None),
    TokenPull("cloudsmith", "cloudsmith-puller", f"{CLOUDSMITH_HOST}/acme/app:1",
              f"{PLUGIN}-cloudsmith", "cloudsmith"),
    TokenPull("cloudsmith-untrusted", "nobody-trusts", f"{CLOUDSMITH_HOST}/acme/other:1", None,
              None),
)  # fmt: skip
# the real-runtime run: the registry plugin's pods and EKS Pod Identity's (ECR's own registry)
REAL_PULLS = (*PULLS, *tokens.POD_IDENTITY_PULLS)
NAMES = (PLUGIN, f"{PLUGIN}-vault", f"{PLUGIN}-secret", f"{PLUGIN}-sts", f"{PLUGIN}-jfrog",
         f"{PLUGIN}-cloudsmith")  # fmt: skip


def _entry(name: str, host: str, args: list[str], audience: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "matchImages": [host], "defaultCacheDuration": "1m", "args": args,
            "tokenAttributes": {"serviceAccountTokenAudience": audience, "cacheType": "Token",
                                "requireServiceAccount": True, **more}}  # fmt: skip


def config(run_dir: Path) -> dict[str, Any]:
    """The kubelet's config: the three providers, pointing at the stand-ins' fixed loopback ports
    and at the API server (its CA is made at ``run_dir``/control-plane/pki when the plane
    starts)."""
    ca = run_dir / "control-plane" / "pki" / "ca.pem"
    quay = ["--backend", "quay", "--url", f"http://127.0.0.1:{QUAY_PORT}", "--robot", ROBOT,
            "--registry", QUAY_HOST]  # fmt: skip
    vault = ["--backend", "vault", "--url", f"http://127.0.0.1:{VAULT_PORT}", "--role", "pull",
             "--secret-path", "registry/harbor", "--registry", VAULT_HOST]  # fmt: skip
    secret = ["--backend", "secret", "--url", f"https://127.0.0.1:{controlplane.API_PORT}",
              "--ca-file", str(ca)]  # fmt: skip
    sts = ["--backend", "quay-sts", "--url", f"http://127.0.0.1:{QUAY_PORT}", "--robot", ROBOT,
           "--registry", STS_HOST]  # fmt: skip
    jfrog = ["--backend", "artifactory", "--url", f"http://127.0.0.1:{JFROG_PORT}",
             "--provider-name", "k8s", "--audience", AUDIENCE, "--registry", JFROG_HOST]  # fmt: skip
    cloudsmith = ["--backend", "cloudsmith", "--url", f"http://127.0.0.1:{CLOUDSMITH_PORT}",
                  "--org", "acme", "--service-slug", "pullers"]  # fmt: skip
    return {
        "apiVersion": "kubelet.config.k8s.io/v1",
        "kind": "CredentialProviderConfig",
        "providers": [
            _entry(PLUGIN, QUAY_HOST, quay, AUDIENCE),
            _entry(f"{PLUGIN}-vault", VAULT_HOST, vault, AUDIENCE),
            _entry(f"{PLUGIN}-sts", STS_HOST, sts, AUDIENCE),
            _entry(f"{PLUGIN}-jfrog", JFROG_HOST, jfrog, AUDIENCE),
            _entry(f"{PLUGIN}-cloudsmith", CLOUDSMITH_HOST, cloudsmith, AUDIENCE),
            _entry(
                f"{PLUGIN}-secret",
                SECRET_HOST,
                secret,
                SECRET_AUDIENCE,
                optionalServiceAccountAnnotationKeys=[ANNOTATION],
            ),
        ],
    }


def real_config(run_dir: Path, path: Path) -> Path:
    """:func:`config` and config/examples/aws-pod-identity.yaml's provider, as one file: the
    real-runtime run's."""
    found = config(run_dir)
    found["providers"].append(tokens.shipped(tokens.POD_IDENTITY_EXAMPLE))  # as shipped
    path.write_text(json.dumps(found))
    return path


def verifiers(backends: dict[str, Any]) -> dict[str, registry.Verifier]:
    """Each registry host's say on whose a credential is, as the registry behind the backend
    decides (emulators/registry.py): a Quay robot token, an Artifactory or Cloudsmith access token
    only if that stand-in issued it; Harbor's robot password only once Vault handed it out; the
    pull Secret's own. ``backends`` (:func:`start_backends`) may be filled after the front starts."""

    def issued_by(backend: str, user: str = "") -> registry.Verifier:
        def verify(host: str, username: str, password: str) -> str:
            fake = backends.get(backend)
            if fake is None or password not in fake.issued:
                raise registry.Refused(f"not a credential {backend} issued")
            if user and username != user:
                raise registry.Refused(f"{username!r} is not {user!r}")
            return f"{backend}:{username}"

        return verify

    def the_secret(host: str, username: str, password: str) -> str:
        if (username, password) != (SECRET_USER, SECRET_PASSWORD):
            raise registry.Refused("not the pull Secret's credential")
        return f"secret:{username}"

    return {
        QUAY_HOST: issued_by("quay", ROBOT),
        STS_HOST: issued_by("quay", ROBOT),
        JFROG_HOST: issued_by("artifactory", JFROG_USER),
        CLOUDSMITH_HOST: issued_by("cloudsmith"),
        VAULT_HOST: issued_by("vault", VAULT_USER),
        SECRET_HOST: the_secret,
    }


def prepare(plane: controlplane.ControlPlane) -> None:
    """What an admin does: the audiences, the service accounts, the pull Secret and the Role that
    lets ``secret-puller`` (only) get it."""
    for audience in (AUDIENCE, SECRET_AUDIENCE):
        plane.grant_audience(audience)
    for name, keys in SERVICE_ACCOUNTS.items():
        plane.service_account(NAMESPACE, name, keys)
    secret = dockerconfigjson({SECRET_HOST: (SECRET_USER, SECRET_PASSWORD)})
    plane.create(f"/api/v1/namespaces/{NAMESPACE}/secrets",
                 {**secret, "metadata": {"name": "pull-creds"}})  # fmt: skip
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    plane.create(f"{rbac}/namespaces/{NAMESPACE}/roles", {
        "metadata": {"name": "read-pull-creds"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["pull-creds"],
                   "verbs": ["get"]}],
    })  # fmt: skip
    plane.create(f"{rbac}/namespaces/{NAMESPACE}/rolebindings", {
        "metadata": {"name": "read-pull-creds"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "read-pull-creds"},
        "subjects": [{"kind": "ServiceAccount", "name": "secret-puller", "namespace": NAMESPACE}],
    })  # fmt: skip


def start_backends(stack: ExitStack, signing_key: str) -> dict[str, Any]:
    """Quay (both endpoints), Vault, Artifactory and Cloudsmith on their loopback ports, each
    checking tokens with the API server's key."""
    verifier = Verifier(controlplane.ISSUER, public_key=signing_key)

    def subject(name: str) -> str:
        return f"system:serviceaccount:{NAMESPACE}:{name}"

    quay = FakeQuay(verifier, robots={ROBOT: (controlplane.ISSUER, subject("quay-puller"))},
                    audience=AUDIENCE)  # fmt: skip
    jfrog = FakeArtifactory(
        verifier, providers={"k8s": (AUDIENCE, {subject("jfrog-puller"): JFROG_USER})}
    )
    cloudsmith = FakeCloudsmith(
        verifier, services={"pullers": (AUDIENCE, subject("cloudsmith-puller"))}
    )
    vault = FakeVault(verifier, roles={("kubernetes", "pull"): (AUDIENCE, NAMESPACE, "vault-puller")},
                      kv={("secret", "registry/harbor"): {"username": VAULT_USER,
                                                          "password": VAULT_PASSWORD}})  # fmt: skip
    stack.enter_context(serve(quay, port=QUAY_PORT))
    stack.enter_context(serve(vault, port=VAULT_PORT))
    stack.enter_context(serve(jfrog, port=JFROG_PORT))
    stack.enter_context(serve(cloudsmith, port=CLOUDSMITH_PORT))
    return {"quay": quay, "vault": vault, "artifactory": jfrog, "cloudsmith": cloudsmith}


def issued(backends: dict[str, Any]) -> dict[str, Any]:
    """What each stand-in issued and was asked, for the test to check the pulls against."""
    return {name: {"issued": sorted(fake.issued), "calls": fake.calls}
            for name, fake in backends.items()}  # fmt: skip


def write_config(run_dir: Path, path: Path) -> Path:
    """:func:`config` as a file, for the kubelet's --image-credential-provider-config."""
    path.write_text(json.dumps(config(run_dir)))
    return path

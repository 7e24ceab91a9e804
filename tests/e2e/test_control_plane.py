"""KEP-4412 through a real control plane: the kubelet (registered as a node, Node authorizer,
NodeRestriction) requests a service account token per pod from kube-apiserver, with each
provider's audience, and hands it with the service account's annotations to the plugin, which
exchanges it at the loopback emulators (Google STS, STS AssumeRoleWithWebIdentity, Entra).

Pull by pull the runtime gets exactly what the emulators issued for that pod's service account, the
tokens the emulators saw are the API server's (signature checked with its key, audience, subject),
the exec counts follow each provider's ``cacheType``, and the pods that must get nothing (a required
annotation missing, an audience the node may not request) get nothing.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from emulators.aws import NODE_KEY
from release.bundle import BUNDLE_DIR
from tests.e2e import federated, tokens
from tests.e2e.sandbox import host_state, left_running, linked_bin_dir, run_with_control_plane
from tests.helpers import config_file


def assumed_role(result: dict[str, Any], password: str) -> str:
    """The role whose session keys got the ECR token ``password`` (STS in front of moto recorded
    which role each key was issued for)."""
    key = result["identities"]["ecr"].get(password, "(a password ECR never issued)")
    role: str = result["exchanges"]["assumed_roles"].get(key, f"(no role: key {key})")
    return role


def claims(token: str, signing_key: str) -> dict[str, Any]:
    """A service account token's claims, once its RS256 signature checks out with the API
    server's public key."""
    header, payload, signature = token.split(".")
    key = serialization.load_pem_public_key(signing_key.encode())
    assert isinstance(key, rsa.RSAPublicKey)

    def decode(part: str) -> bytes:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

    key.verify(
        decode(signature), f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256()
    )
    found: dict[str, Any] = json.loads(decode(payload))
    return found


@pytest.mark.parametrize("policy", list(tokens.VERIFICATION), ids=lambda p: p or "default-policy")
def test_service_account_tokens_reach_the_clouds_through_a_real_api_server(
    binaries: tuple[Path, Path],
    control_plane_binaries: tuple[Path, Path],
    tmp_path: Path,
    policy: str | None,
) -> None:
    providers = tokens.providers()
    config = config_file(tmp_path, *providers)
    bin_dir = linked_bin_dir(tmp_path, (provider["name"] for provider in providers))
    before = host_state()
    result = run_with_control_plane(
        binaries,
        control_plane_binaries,
        config,
        tmp_path,
        bin_dir=str(bin_dir),
        bundle=str(BUNDLE_DIR.resolve()),
        verify=True,
        verification_policy=policy,
        uninitialized_doctor=True,
    )
    after = host_state()
    log_tail = result["kubelet_log"][-6000:]
    assert "error" not in result, f"{result.get('error')}\n{log_tail}"
    exchanges, signing_key = result["exchanges"], result["tokens"]["signing_key"]
    pods = result["tokens"]["pods"]

    # every pod of waves 1 and 2 pulled once; each got exactly what its service account's identity
    # was issued
    by_image = {pull.image: pull for pull in tokens.PULLS}
    pulls, verify_pulls = result["pulls"][: len(by_image)], result["pulls"][len(by_image) :]
    assert sorted(p["image"] for p in pulls) == sorted(by_image)
    issued = {
        "sts": ("_token", exchanges["sts_token"]),
        "node": ("_token", result["issued"]["gcp"][0]),
    }
    for received in pulls:
        pull = by_image[received["image"]]
        got = (received["username"], received["password"])
        if pull.credential is None:
            assert got == ("", ""), pull.pod
        elif pull.credential == "acr":
            assert received["username"] == "00000000-0000-0000-0000-000000000000"
            assert received["password"] in result["issued"]["acr"], pull.pod
        elif pull.credential == "ecr":  # the annotated role, assumed with the pod's token
            assert received["username"] == "AWS"
            assert assumed_role(result, received["password"]) == tokens.ECR_ROLE, pull.pod
        else:
            assert got == issued[pull.credential], pull.pod

    # the tokens the clouds saw: the API server's, for the provider's audience, bound to a pod of
    # the right service account
    def subject(token: str, audience: str) -> tuple[str, str]:
        found = claims(token, signing_key)
        assert found["aud"] == [audience]
        assert found["iss"] == "https://kubernetes.default.svc.cluster.local"
        pod = found["kubernetes.io"]["pod"]["name"]
        return found["sub"], pod

    sts_subjects = {subject(t, tokens.GCP_AUDIENCE) for t in exchanges["sts_subject_tokens"]}
    assert {sub for sub, _ in sts_subjects} == {"system:serviceaccount:default:gcp-wi"}
    aad = [form for form in exchanges["aad_forms"] if "client_assertion" in form]
    assert [form["client_id"] for form in aad] == [tokens.ACR_CLIENT_ID]
    assert {subject(form["client_assertion"], tokens.ACR_AUDIENCE) for form in aad} == {
        ("system:serviceaccount:default:acr-wi", "acr-wi")
    }
    # ECR: each pod's token assumed the role (moto's session keys), never the node's keys
    ecr_calls = exchanges["ecr_calls"]
    assert len(ecr_calls) == 2
    assert all(call["session_token"] and call["access_key"] != NODE_KEY for call in ecr_calls)

    # execs: per service account for cacheType ServiceAccount, per pod for Token, none without a
    # token; no plugin failed
    # KEP-2535 (wave 3): pods on the image wi-1 pulled, by imagePullCredentialsVerificationPolicy
    extra_execs, extra_pulls = tokens.VERIFICATION[policy]
    assert [p["image"] for p in verify_pulls] == [tokens.PULLS[0].image] * len(extra_pulls)
    assert [
        next(kind for kind, creds in issued.items() if creds == (p["username"], p["password"]))
        for p in verify_pulls
    ] == extra_pulls
    gcp_execs = 'kubelet_credential_provider_plugin_duration_count{plugin_name="auth-provider-gcp"}'
    assert result["waves"]["3"][gcp_execs] == result["waves"]["2"][gcp_execs] + extra_execs

    for wave, expected in tokens.EXPECTED_EXECS.items():
        metrics = result["waves"][str(wave)]
        execs = {
            name: int(
                metrics.get(
                    f'kubelet_credential_provider_plugin_duration_count{{plugin_name="{name}"}}', 0
                )
            )
            for name in expected
        }
        assert execs == expected, f"wave {wave}: {metrics}"
        errors = {key: value for key, value in metrics.items() if "errors_total" in key and value}
        assert errors == {}, f"{errors}\n{log_tail}"

    # the negative cases, as the kubelet logs them
    log = result["kubelet_log"]
    assert "ungranted-project.svc.id.goog" in log and "forbidden" in log.lower(), log_tail
    assert pods["ungranted"]["spec"]["serviceAccountName"] == "gcp-wi"
    refused = (
        'serviceaccounts \\"gcp-wi\\" is forbidden: audience \\"ungranted-project.svc.id.goog\\" '
        "not found in pod spec volume, system:node:credprovider-e2e is not authorized to request "
        "tokens for this audience"
    )
    assert refused in log, log_tail
    # credprovider doctor on this node names the provider, the kubelet's reason, and the grant
    report = result["tokens"]["doctor"]
    assert [c for c in report["checks"] if c["status"] == "fail"] == [], report["stderr"]
    not_run = {
        c["provider"]: c["message"]
        for c in report["checks"]
        if c["area"] == "image" and c["status"] == "info" and c["provider"]
    }
    assert set(not_run) == {"acr-credential-provider", "auth-provider-gcp-ungranted"}
    assert all("pulls only with a pod's service account token" in m for m in not_run.values())
    warned = [c for c in report["checks"] if c["area"] == "kubelet" and c["status"] == "warn"]
    assert [c["provider"] for c in warned] == ["auth-provider-gcp-ungranted"], report["checks"]
    assert "is not authorized to request tokens for this audience" in warned[0]["message"]
    # #64: asked of the real API server as the kubelet (a SelfSubjectAccessReview, through the
    # Node and RBAC authorizers), before any pull: the granted audiences pass, the ungranted warns
    asked = {
        c["provider"]: (c["status"], c["message"])
        for c in report["checks"]
        if c["area"] == "service-account" and "(asked as the kubelet)" in c["message"]
    }
    assert asked["auth-provider-gcp-ungranted"][0] == "warn", asked
    assert (
        "does not let this node request service account tokens for the audience "
        in (asked["auth-provider-gcp-ungranted"][1])
    )
    granted = {name: status for name, (status, _) in asked.items() if "ungranted" not in name}
    assert granted and set(granted.values()) == {"pass"}, asked
    assert not [c for c in report["checks"] if "not asked of the API server" in c["message"]]
    # KEP-2395 from the real API server, with the kubelet's own kubeconfig (the Node authorizer
    # lets it get its own Node): no cloud provider, no providerID; then, tainted as a node no
    # cloud controller manager initialized: one FAIL naming the taint
    assert (
        "info",
        "Node credprovider-e2e has no providerID and its kubelet runs no cloud provider: a node "
        "no cloud controller manager serves",
    ) in [(c["status"], c["message"]) for c in report["checks"] if c["area"] == "kubelet"]
    tainted = result["tokens"]["doctor_uninitialized"]
    [failed] = [c for c in tainted["checks"] if c["status"] == "fail"]
    assert failed["area"] == "kubelet" and failed["message"].startswith(
        "Node credprovider-e2e keeps the node.cloudprovider.kubernetes.io/uninitialized taint"
    )
    assert "cloud controller manager" in failed["fix"]
    assert warned[0]["fix"].startswith(
        "let the nodes request tokens for the audience ungranted-project.svc.id.goog: an RBAC rule "
        "with verb request-serviceaccounts-token-audience"
    )

    assert after == before
    assert left_running(*binaries, *control_plane_binaries) == []


def test_two_aws_accounts_each_pull_with_their_own_role(
    binaries: tuple[Path, Path], control_plane_binaries: tuple[Path, Path], tmp_path: Path
) -> None:
    """config/examples/aws-two-accounts.yaml as shipped (#33): two providers of the ECR plugin,
    each assuming its own role with the pod's service account token; a service account that
    names a role of its own overrides the provider's."""
    config = tokens.EXAMPLES / tokens.ACCOUNTS_EXAMPLE
    bin_dir = linked_bin_dir(tmp_path, {str(pull.provider) for pull in tokens.ACCOUNT_PULLS})
    result = run_with_control_plane(
        binaries,
        control_plane_binaries,
        config,
        tmp_path,
        bin_dir=str(bin_dir),
        token_scenario="accounts",
    )
    assert "error" not in result, f"{result.get('error')}\n{result['kubelet_log'][-6000:]}"
    by_image = {pull.image: pull for pull in tokens.ACCOUNT_PULLS}
    assert sorted(p["image"] for p in result["pulls"]) == sorted(by_image)
    pulled_as = {
        by_image[p["image"]].pod: (p["username"], assumed_role(result, p["password"]))
        for p in result["pulls"]
    }
    assert pulled_as == {pull.pod: ("AWS", pull.credential) for pull in tokens.ACCOUNT_PULLS}
    assert sorted(set(result["exchanges"]["assumed_roles"].values())) == sorted(
        {str(pull.credential) for pull in tokens.ACCOUNT_PULLS}
    )
    assert left_running(*binaries, *control_plane_binaries) == []


def test_eks_pod_identity_pulls_with_the_associations_role(
    binaries: tuple[Path, Path], control_plane_binaries: tuple[Path, Path], tmp_path: Path
) -> None:
    """config/examples/aws-pod-identity.yaml as shipped (#64): the kubelet's token for the pod's
    service account (audience pods.eks.amazonaws.com, from the real API server) is traded at EKS
    Auth, whose stand-in checks it with the API server's signing key, for the role of the
    service account's association; ECR is called with that role. A service account without an
    association pulls with the node's keys."""
    config = tokens.EXAMPLES / tokens.POD_IDENTITY_EXAMPLE
    bin_dir = linked_bin_dir(tmp_path, {str(p.provider) for p in tokens.POD_IDENTITY_PULLS})
    result = run_with_control_plane(
        binaries, control_plane_binaries, config, tmp_path, bin_dir=str(bin_dir),
        token_scenario="pod-identity",
    )  # fmt: skip
    assert "error" not in result, f"{result.get('error')}\n{result['kubelet_log'][-6000:]}"
    by_image = {pull.image: pull for pull in tokens.POD_IDENTITY_PULLS}
    assert sorted(p["image"] for p in result["pulls"]) == sorted(by_image)
    password = {by_image[p["image"]].pod: p["password"] for p in result["pulls"]}
    assert assumed_role(result, password["associated"]) == tokens.POD_ROLE
    assert password["unassociated"] == result["issued"]["ecr"][0]  # the node keys' tokens
    assert left_running(*binaries, *control_plane_binaries) == []


def test_the_registry_plugin_pulls_with_each_pods_own_identity(
    binaries: tuple[Path, Path], control_plane_binaries: tuple[Path, Path], tmp_path: Path
) -> None:
    """registry-credential-provider (#64) under the real kubelet and API server: each pod's
    token, signed by the API server for its service account, traded at Quay's and Vault's
    stand-ins (which check it with the API server's key) or used against the API server itself
    for the pull Secret a Role lets the service account get; a service account the backend does
    not trust, or may not get the Secret, pulls with no credential."""
    config = federated.write_config(tmp_path / "run", tmp_path / "registries.json")
    bin_dir = linked_bin_dir(tmp_path, federated.NAMES)
    result = run_with_control_plane(
        binaries, control_plane_binaries, config, tmp_path, bin_dir=str(bin_dir),
        token_scenario="registries",
    )  # fmt: skip
    assert "error" not in result, f"{result.get('error')}\n{result['kubelet_log'][-6000:]}"
    by_image = {pull.image: pull for pull in federated.PULLS}
    assert sorted(p["image"] for p in result["pulls"]) == sorted(by_image)
    got = {by_image[p["image"]].pod: (p["username"], p["password"]) for p in result["pulls"]}
    quay_user, quay_password = got["quay"]
    assert quay_user == federated.ROBOT
    assert quay_password in result["federated"]["quay"]["issued"]
    assert got["vault"] == (federated.VAULT_USER, federated.VAULT_PASSWORD)
    assert got["secret"] == (federated.SECRET_USER, federated.SECRET_PASSWORD)
    issued = result["federated"]
    assert got["quay-sts"][0] == federated.ROBOT and got["quay-sts"][1] in issued["quay"]["issued"]
    assert got["jfrog"][0] == federated.JFROG_USER
    assert got["jfrog"][1] in issued["artifactory"]["issued"]
    assert got["cloudsmith"][0] == "token"
    assert got["cloudsmith"][1] in issued["cloudsmith"]["issued"]
    for refused in ("quay-untrusted", "vault-untrusted", "secret-forbidden", "jfrog-untrusted",
                    "cloudsmith-untrusted"):  # fmt: skip
        assert got[refused] == ("", ""), refused
    log = result["kubelet_log"]
    assert "Invalid robot" in log and "permission denied" in log
    assert 'cannot get resource \\"secrets\\"' in log or 'cannot get resource "secrets"' in log
    assert left_running(*binaries, *control_plane_binaries) == []

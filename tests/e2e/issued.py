"""What the emulators give each identity of the e2e runs, and what they issued and received:
inside the sandbox (tests/e2e/node.py), read back by the tests as its result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from emulators.harness import Emulator
from tests.e2e.scenario import ACR_CLIENT_IDS, AZURE_JSON_TEAM_B, ECR_KEYS, GCP_ACCOUNTS


def give_identities(aws: Emulator, gcp: Emulator, azure: Emulator) -> None:
    """Each team of the identities scenario gets an identity of its own in every cloud: an AWS key
    whose ECR tokens carry a password of their own, a user-assigned identity with its own IMDS
    token (and azure.json), and a service account the node may impersonate."""
    ecr: Any = aws.fakes["ecr"]
    for team, key in ECR_KEYS.items():
        ecr.passwords[key] = f"ecr-password-{team}-0123456789"
    imds: Any = azure.fakes["imds"]
    for client_id in ACR_CLIENT_IDS.values():
        imds.identity(client_id)
    team_b = json.loads(Path(azure.files["config"]).read_text())
    team_b["userAssignedIdentityID"] = ACR_CLIENT_IDS["team-b"]
    Path(AZURE_JSON_TEAM_B).write_text(json.dumps(team_b))
    iam: Any = gcp.fakes["iam"]
    for account in GCP_ACCOUNTS.values():
        iam.allow(gcp.fakes["metadata"].email, account)  # type: ignore[attr-defined]


def exchanges(aws: Emulator, gcp: Emulator, azure: Emulator) -> dict[str, Any]:
    """What the token exchanges received: the subject tokens Google STS exchanged, and the
    federated token it issued; each ECR call's access key and session token; each Entra token
    request's form."""
    sts: Any = gcp.fakes["sts"]
    ecr: Any = aws.fakes["ecr"]
    aad: Any = azure.fakes["aad"]
    return {
        "sts_subject_tokens": [form.get("subject_token", "") for form in sts.forms],
        "sts_token": sts.access_token,
        "ecr_calls": [
            {"access_key": call.access_key, "session_token": call.session_token}
            for call in ecr.calls
        ],
        "aad_forms": [form for _, _, form in aad.token_requests],
    }


def issued_identities(aws: Emulator, gcp: Emulator, azure: Emulator) -> dict[str, dict[str, str]]:
    """Per cloud, each credential the emulators issued -> the identity it was issued to."""
    ecr: Any = aws.fakes["ecr"]
    acr: Any = azure.fakes["acr"]
    client_of = {token: client for client, token in azure.fakes["imds"].identities.items()}  # type: ignore[attr-defined]
    return {
        "ecr": {password: key for key, password in ecr.passwords.items()},
        "acr": {
            refresh: client_of.get(aad, "(the node's default identity)")
            for refresh, aad in acr.exchanged_for.items()
        },
        "gcp": dict(gcp.fakes["iam"].issued),  # type: ignore[attr-defined]
    }

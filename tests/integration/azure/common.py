"""What the acr-credential-provider tests share: the ACR refresh-token answer they expect, a service
account token and a client secret."""

from __future__ import annotations

from credprovider.runtime.goformat import parse_go_duration
from emulators.azure import make_jwt
from tests.integration.conftest import Azure

PLUGIN = "acr-credential-provider"
NULL_GUID = "00000000-0000-0000-0000-000000000000"
SA_TOKEN = make_jwt(
    {"sub": "system:serviceaccount:apps:puller", "aud": ["api://AzureADTokenExchange"]}
)
SECRET = "sp-client-secret-value-0123456789"


def assert_refresh_token_answer(azure: Azure, run, key: str) -> None:  # type: ignore[no-untyped-def]
    response = run.response
    assert response["cacheKeyType"] == "Registry"
    assert response["auth"] == {
        key: {"username": NULL_GUID, "password": azure.acr.refresh_tokens[-1]}
    }
    # The refresh token lives 3h: half of its remaining validity.
    assert 5390 <= parse_go_duration(response["cacheDuration"]) / 1e9 <= 5400

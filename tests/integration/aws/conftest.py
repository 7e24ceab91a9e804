"""ecr-credential-provider against moto (ECR, STS) and the project's ECR/ECR Public fake.

Endpoints are pointed at loopback with the SDK's standard ``AWS_ENDPOINT_URL_<SERVICE>`` settings.
With keys in the environment and no profile file a token is fetched by the stdlib path
(``credprovider/aws/direct.py``); the ``route`` fixture runs the main cases a second time with an
(empty) profile file, which sends them through botocore's endpoint resolution, signing, retries and
parsing. The fake checks every signature with botocore's signer.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["stdlib", "botocore"])
def route(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Extra env that selects the path: none (stdlib), or an empty profile file (botocore)."""
    if request.param == "stdlib":
        return {}
    config = tmp_path / "aws-config"
    config.write_text("")
    return {"AWS_CONFIG_FILE": str(config)}

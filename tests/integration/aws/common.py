"""What the ecr-credential-provider tests share: the node's keys, the role, and the env that points
the plugin at the ECR fake and moto's STS."""

from __future__ import annotations

PLUGIN = "ecr-credential-provider"
NODE_KEY = "AKIDNODE0000000000"
NODE_SECRET = "node-secret-access-key-0123456789"
SA_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2E6ZGVmYXVsdDphcHAifQ.c2lnbmF0dXJl"
ROLE = "arn:aws:iam::123456789012:role/image-puller"


def aws_env(ecr_url: str, sts_url: str, **extra: str) -> dict[str, str]:
    env = {
        "AWS_ACCESS_KEY_ID": NODE_KEY,
        "AWS_SECRET_ACCESS_KEY": NODE_SECRET,
        "AWS_ENDPOINT_URL_ECR": ecr_url,
        "AWS_ENDPOINT_URL_ECR_PUBLIC": ecr_url,
        "AWS_ENDPOINT_URL_STS": sts_url,
    }
    env.update(extra)
    return env


def assumed_role_arn(access_key_id: str) -> str | None:
    """The role moto issued ``access_key_id`` for (moto runs in this process)."""
    from moto.sts.models import sts_backends

    for account in sts_backends.values():
        for backend in account.values():
            for role in backend.assumed_roles:
                if role.access_key_id == access_key_id:
                    return str(role.role_arn)
    return None

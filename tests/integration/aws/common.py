"""What the ecr-credential-provider tests share: the node's keys and its environment (from the
emulators), the role, the service account token."""

from __future__ import annotations

from emulators.aws import NODE_KEY, NODE_SECRET

__all__ = ["NODE_KEY", "NODE_SECRET"]

PLUGIN = "ecr-credential-provider"
SA_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2E6ZGVmYXVsdDphcHAifQ.c2lnbmF0dXJl"
ROLE = "arn:aws:iam::123456789012:role/image-puller"


def assumed_role_arn(access_key_id: str) -> str | None:
    """The role moto issued ``access_key_id`` for (moto runs in this process)."""
    from moto.sts.models import sts_backends

    for account in sts_backends.values():
        for backend in account.values():
            for role in backend.assumed_roles:
                if role.access_key_id == access_key_id:
                    return str(role.role_arn)
    return None

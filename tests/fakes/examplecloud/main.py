"""``example-credential-provider``: the token in a node file, for the example cloud's registries."""

from __future__ import annotations

from credprovider.errors import ProviderError, UsageError
from credprovider.runtime.api import AuthConfig, CredentialProviderRequest
from credprovider.runtime.imageref import ImageRef
from credprovider.runtime.provider import (
    Context,
    Credentials,
    Plan,
    PluginSpec,
    Provider,
    fingerprint_file,
)
from credprovider.runtime.redact import register_secret
from tests.fakes.examplecloud.descriptor import NAME

USERNAME = "example"
TOKEN_SECONDS = 3600.0


class TokenFileProvider:
    def __init__(self, token_file: str) -> None:
        self.token_file = token_file

    def plan(self, image: ImageRef, request: CredentialProviderRequest, ctx: Context) -> Plan:
        identity = {"token_file": fingerprint_file(self.token_file)}
        return Plan(image, (image.registry,), identity)

    def fulfil(self, plan: Plan, request: CredentialProviderRequest, ctx: Context) -> Credentials:
        try:
            with open(self.token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as exc:
            raise ProviderError(f"cannot get example credentials: {exc}") from None
        register_secret(token)
        ctx.log.v(1, f"token for {plan.image.registry} read from {self.token_file}")
        entry = AuthConfig(USERNAME, token)
        return Credentials(
            auth={key: entry for key in plan.keys}, expires_at=ctx.now() + TOKEN_SECONDS
        )


def build(args: list[str], ctx: Context) -> Provider:
    files = [arg for arg in args if not arg.startswith("-")]
    if len(files) != 1 or len(args) != 1:
        raise UsageError(f"expected exactly one argument, the token file; got {args}")
    return TokenFileProvider(files[0])


SPEC = PluginSpec(
    name=NAME,
    summary="Test-only plugin of the example cloud.",
    build=build,
    arguments_help="<token file>\n",
)

"""``example-credential-provider``: the token in a node file, for the example cloud's registries."""

from __future__ import annotations

from credprovider.errors import ProviderError, UsageError
from credprovider.runtime.api import AuthConfig, CredentialProviderRequest
from credprovider.runtime.cachestore import CacheScope, fingerprint_file
from credprovider.runtime.imageref import ImageError, parse_image
from credprovider.runtime.provider import Context, Credentials, PluginSpec, Provider
from credprovider.runtime.redact import register_secret
from tests.fakes.examplecloud.descriptor import NAME

USERNAME = "example"
TOKEN_SECONDS = 3600.0


class TokenFileProvider:
    def __init__(self, token_file: str) -> None:
        self.token_file = token_file

    def cache_scope(self, request: CredentialProviderRequest, ctx: Context) -> CacheScope | None:
        try:
            image = parse_image(request.image)
        except ImageError:
            return None
        identity = {"token_file": fingerprint_file(self.token_file)}
        return CacheScope(NAME, image.registry, identity, (image.registry,))

    def get_credentials(self, request: CredentialProviderRequest, ctx: Context) -> Credentials:
        try:
            registry = parse_image(request.image).registry
            with open(self.token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except (ImageError, OSError) as exc:
            raise ProviderError(f"cannot get example credentials: {exc}") from None
        register_secret(token)
        ctx.log.v(1, f"token for {registry} read from {self.token_file}")
        return Credentials(
            auth={registry: AuthConfig(USERNAME, token)}, expires_at=ctx.now() + TOKEN_SECONDS
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

"""The legacy flows: a .dockercfg from the instance attribute ``google-dockercfg``, or downloaded
from the URL in ``google-dockercfg-url`` (``--authFlow dockercfg`` / ``dockercfg-url``)."""

from __future__ import annotations

from credprovider.errors import ProviderError
from credprovider.gcp.googleauth import download, metadata_get
from credprovider.gcp.registry import (
    DOCKERCFG_ATTRIBUTE,
    DOCKERCFG_URL_ATTRIBUTE,
    DockerCfgError,
    parse_dockercfg,
)
from credprovider.runtime._typing import Final
from credprovider.runtime.api import CACHE_KEY_GLOBAL, AuthConfig
from credprovider.runtime.goformat import SECOND, format_go_duration
from credprovider.runtime.provider import Context, Credentials
from credprovider.runtime.redact import register_secret

# A .dockercfg answer has no expiry and may be rotated at any time: a short, bounded cache rather than
# none (upstream answers 0s, an exec per pull) or the config's defaultCacheDuration (often hours).
DOCKERCFG_CACHE_DURATION: Final = 60 * SECOND


def dockercfg_credentials(auth_flow: str, ctx: Context) -> Credentials:
    """The credentials of ``--authFlow dockercfg`` or ``dockercfg-url`` (Global, one minute)."""
    if auth_flow == "dockercfg":
        text = metadata_get(
            ctx,
            f"instance/attributes/{DOCKERCFG_ATTRIBUTE}",
            f"instance attribute {DOCKERCFG_ATTRIBUTE}",
        )
        text = text if isinstance(text, str) else _json_text(text)
        auth = _dockercfg_credentials(text, f"instance attribute {DOCKERCFG_ATTRIBUTE}")
    else:
        auth = dockercfg_url_credentials(ctx)
    ctx.log.v(
        4,
        f"cacheDuration {format_go_duration(DOCKERCFG_CACHE_DURATION)}: a .dockercfg carries no "
        "expiry and may be rotated at any time",
    )
    return Credentials(
        auth, cache_key_type=CACHE_KEY_GLOBAL, cache_duration=DOCKERCFG_CACHE_DURATION
    )


def _dockercfg_credentials(text: str, source: str) -> dict[str, AuthConfig]:
    try:
        entries = parse_dockercfg(text)
    except DockerCfgError as exc:
        raise ProviderError(f"{source} is not a usable .dockercfg: {exc}") from None
    for _, password in entries.values():
        register_secret(password)
    return {registry: AuthConfig(user, password) for registry, (user, password) in entries.items()}


def dockercfg_url_credentials(ctx: Context) -> dict[str, AuthConfig]:
    url = metadata_get(
        ctx,
        f"instance/attributes/{DOCKERCFG_URL_ATTRIBUTE}",
        f"instance attribute {DOCKERCFG_URL_ATTRIBUTE}",
    )
    url = str(url).strip()
    if not url.lower().startswith(("http://", "https://")):
        raise ProviderError(
            f"instance attribute {DOCKERCFG_URL_ATTRIBUTE} is {url!r}: only http(s) URLs are supported"
        )
    return _dockercfg_credentials(download(url, "the .dockercfg", ctx), url)


def _json_text(value: object) -> str:
    import json

    return json.dumps(value)

"""The registry plugin as the ``credprovider`` tool sees it (credprovider/cloud.py). Pure.

Unlike a cloud's, its registries are the operator's: it ships no matchImages, no args and no
sample images, is installed only when ``--providers`` names it, and always needs the kubelet's
service-account token."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final

from credprovider.cloud import CloudPlugin, Explanation, IdentityProbe
from credprovider.errors import UsageError
from credprovider.registries import PLUGIN_NAME
from credprovider.registries.backends import (
    SECRET_ANNOTATION,
    Backend,
    Settings,
    serves,
    settings_from_args,
)
from credprovider.runtime.excerpt import quoted


def explain(host: str, registry: str, args: Sequence[str] = ()) -> Explanation:
    """With the entry's args: the backend that answers, and whether the image's registry is one
    its credential is for (``recognized``); without them, what any entry would do."""
    settings = _settings(args) if args else None
    if settings is None:
        return Explanation(
            False,
            "trade the pod's service account token at the backend the provider's --backend names "
            f"({', '.join(b.value for b in Backend)}) for a credential of its own, returned under "
            f"{registry} only if it is one of that backend's registries (--registry)",
        )
    facts = {"backend": settings.backend.value, "url": settings.url}
    if not serves(settings, registry):
        return Explanation(
            False,
            f"nothing: {registry} is not one of the registries the {settings.backend.title} "
            f"credential is for ({', '.join(settings.registries)}), so the pull fails",
            facts,
        )
    if settings.backend is Backend.SECRET:
        return Explanation(
            True,
            f"read, as the pod, the Secret its service account's annotation {settings.annotation} "
            f"names in its own namespace from the API server at {settings.url}, and return that "
            f"Secret's auths entry for {registry}, if it has one (cacheKeyType Image)",
            facts,
        )
    return Explanation(
        True,
        f"trade the pod's service account token at {settings.backend.title} ({settings.url}) for "
        f"a credential of its own, returned under {registry} (cacheKeyType Registry)",
        facts,
    )


def lints(match_images: Sequence[str], args: Sequence[str], env: Collection[str]) -> list[str]:
    """The args as the plugin reads them, and matchImages its credential is not for."""
    try:
        settings = settings_from_args(args)
    except UsageError as exc:
        return [f"every pull through it fails: the plugin refuses these args: {exc}"]
    if not match_images:
        return ["matchImages is empty: the kubelet sends this provider no image"]
    if settings.backend is Backend.SECRET:
        return []
    foreign = [
        pattern
        for pattern in match_images
        if "*" not in (host := pattern.split("/")[0]) and not serves(settings, host.lower())
    ]
    return (
        [
            f"matchImages {', '.join(foreign)} name hosts the {settings.backend.title} "
            f"credential is not for ({', '.join(settings.registries)}): pulls from them fail; "
            "add them to --registry if the credential is theirs"
        ]
        if foreign
        else []
    )


def annotation_lints(args: Sequence[str], passed: Sequence[str]) -> list[str]:
    """The secret backend reads one annotation, which the kubelet passes only if tokenAttributes
    lists it; no other backend reads any."""
    settings = _settings(args)
    if settings is None:
        return []  # said by lints
    if settings.backend is not Backend.SECRET:
        return [
            f"tokenAttributes annotation {quoted(key)} is not read by the {settings.backend.value} backend"
            for key in passed
        ]
    missing = (
        [
            f"the secret backend reads annotation {quoted(settings.annotation)}, which the kubelet passes "
            "only when tokenAttributes lists it: add it to optionalServiceAccountAnnotationKeys "
            "(a service account without it then gets one clear line; in "
            "requiredServiceAccountAnnotationKeys the kubelet skips the plugin silently)"
        ]
        if settings.annotation not in passed
        else []
    )
    return missing + [
        f"tokenAttributes annotation {quoted(key)} is not read by the secret backend (it reads "
        f"{settings.annotation})"
        for key in passed
        if key != settings.annotation
    ]


# Each backend's unauthenticated health endpoint: what doctor asks to show it is reachable. Quay's
# /health/instance (quay/quay endpoints/web.py), JFrog Access's system ping (JFrog REST API
# "Access: Ping"), Vault's /v1/sys/health (200 when initialized, unsealed and active), the API
# server's /readyz (system:public-info-viewer lets anyone read it), Cloudsmith's basic status
# check (its API reference, "status": GET /v1/status/check/basic/).
HEALTH: Final = {
    Backend.QUAY: "/health/instance",
    Backend.QUAY_STS: "/health/instance",
    Backend.ARTIFACTORY: "/access/api/v1/system/ping",
    Backend.CLOUDSMITH: "/v1/status/check/basic/",
    Backend.VAULT: "/v1/sys/health",
    Backend.SECRET: "/readyz",
}


def identity(
    environ: Mapping[str, str],
    args: Sequence[str],
    read: Callable[[str], str | None],
    exists: Callable[[str], bool],
) -> IdentityProbe | str:
    """The backend's health endpoint, over the TLS the plugin uses (--ca-file)."""
    settings = _settings(args)
    if settings is None:
        return "the backend: not probed (the args are refused: see validate)"
    return IdentityProbe(
        what=f"{settings.backend.title} ({settings.url})",
        method="GET",
        url=f"{settings.url}{HEALTH[settings.backend]}",
        silence=f"check that {settings.url} is reachable from this node and --url names the "
        "backend (a firewall, a proxy: HTTPS_PROXY and NO_PROXY in the provider's env)",
        ca_file=settings.ca_file,
        ca_setting="--ca-file",
        then="the pod's own credential (exchanged at each pull)",
    )


def _settings(args: Sequence[str]) -> Settings | None:
    """The entry's settings, or ``None`` for args the plugin refuses (lints says why)."""
    try:
        return settings_from_args(args)
    except UsageError:
        return None


DESCRIPTOR = CloudPlugin(
    key="registries",
    name=PLUGIN_NAME,
    match_images=(),
    default_cache_duration="1m",
    args=(),
    annotation_keys=(SECRET_ANNOTATION,),
    sample_images={},
    explain=explain,
    lints=lints,
    dry_run_needs_own_registry=True,
    opt_in=True,
    needs_token=True,
    annotation_lints=annotation_lints,
    identity=identity,
)

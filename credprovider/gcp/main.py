"""``auth-provider-gcp``: drop-in for kubernetes/cloud-provider-gcp's plugin."""

from __future__ import annotations

from credprovider.errors import UsageError
from credprovider.gcp import PLUGIN_NAME
from credprovider.gcp.impersonation import IMPERSONATE_FLAG, parse_chain
from credprovider.gcp.registry import (
    AUTH_FLOWS,
    CREDENTIALS_FILE_ENV,
    STS_ENDPOINT,
    check_sts_audience,
    parse_cache_overrides,
)
from credprovider.runtime._typing import TYPE_CHECKING
from credprovider.runtime.args import parse_arguments
from credprovider.runtime.provider import Context, PluginSpec

if TYPE_CHECKING:
    from credprovider.gcp.provider import GcpProvider

ARGUMENTS_HELP = """get-credentials [--authFlow gcr|dockercfg|dockercfg-url] [--identity-provider URL --project-id ID]
                [--sts-audience AUDIENCE] [--impersonate-service-account [DELEGATE,...]EMAIL]

Arguments (as upstream):
  get-credentials            the subcommand the kubelet config passes (args: [get-credentials])
  --authFlow, -a FLOW        gcr (default): an access token for gcr.io, *.gcr.io, *.pkg.dev and
                             container.cloud.google.com, from GOOGLE_APPLICATION_CREDENTIALS (a
                             service-account key or workload identity federation config) when set,
                             else from the GCE metadata server (GCE_METADATA_HOST honoured);
                             dockercfg / dockercfg-url: the instance attribute google-dockercfg, or
                             the .dockercfg at the http(s) URL in google-dockercfg-url
  --identity-provider URL    GKE Workload Identity for image pulls: service accounts annotated
  --project-id ID            iam.gke.io/enable-wi-image-pull: "true" get a federated token for the
                             pod's service account token (kubelet tokenAttributes); both required
  --sts-audience AUDIENCE    Workload Identity Federation off GKE (as upstream's PR #1248): the
                             same opt-in and exchange, with a workload identity pool provider as
                             the audience, //iam.googleapis.com/projects/NUMBER/locations/global/
                             workloadIdentityPools/POOL/providers/PROVIDER (instead of
                             --identity-provider and --project-id)
  --sts-endpoint URL         token exchange endpoint (default https://sts.googleapis.com/v1/token),
                             e.g. a Private Service Connect endpoint
  --impersonate-service-account [DELEGATE,...]EMAIL
                             pull as the service account EMAIL (not upstream): the token above is
                             exchanged at the IAM Credentials API (generateAccessToken, scope
                             cloud-platform, 1h) for one of EMAIL's. As in gcloud, a comma-separated
                             list is a delegation chain: the last email is pulled as, each account
                             needs roles/iam.serviceAccountTokenCreator on the next, the first from
                             the source identity. gcr flow only
Env: KUBE_SIDECAR_CACHE_DURATION (Go duration) and KUBE_SIDECAR_CACHE_TYPE (image|registry|global)
override the computed cacheDuration / cacheKeyType (Global, half the token's validity).
"""


def _check_sts_endpoint(url: str) -> str:
    """``url``, if the subject token may be sent to it (the runtime's one rule for that)."""
    from credprovider.runtime.excerpt import quoted
    from credprovider.runtime.http import HttpError, credential_endpoint

    try:
        credential_endpoint(url)
    except HttpError as exc:
        raise UsageError(f"--sts-endpoint {quoted(url)} {exc}") from None
    return url


def build(args: list[str], ctx: Context) -> GcpProvider:
    values, positionals = parse_arguments(
        args,
        {
            "--authFlow": "auth_flow",
            "-a": "auth_flow",
            "--identity-provider": "identity_provider",
            "--project-id": "project_id",
            "--sts-audience": "sts_audience",
            "--sts-endpoint": "sts_endpoint",
            IMPERSONATE_FLAG: "impersonate",
        },
    )
    if len(positionals) > 1:
        raise UsageError(f"unrecognized arguments: {' '.join(positionals[1:])} (see --help)")
    command = positionals[0] if positionals else None
    auth_flow = values.get("auth_flow", "gcr")
    identity_provider = values.get("identity_provider", "")
    project_id = values.get("project_id", "")
    if command not in (None, "get-credentials"):
        raise UsageError(f"unknown command {command!r}: the only command is get-credentials")
    if command is None:
        ctx.log.v(
            1, "no get-credentials subcommand given (upstream requires it): running it anyway"
        )
    if auth_flow not in AUTH_FLOWS:
        raise UsageError(
            f'invalid value "{auth_flow}" for authFlow '
            '(must be one of "gcr", "dockercfg", or "dockercfg-url")'
        )
    sts_audience = values.get("sts_audience", "")
    if sts_audience and identity_provider:
        raise UsageError(
            "give --sts-audience (Workload Identity Federation) or --identity-provider with "
            "--project-id (GKE Workload Identity), not both"
        )
    if identity_provider and not project_id:
        raise UsageError("--project-id is required when --identity-provider is set")
    if sts_audience:
        try:
            check_sts_audience(sts_audience)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    for flag, given in (
        ("--identity-provider", identity_provider),
        ("--sts-audience", sts_audience),
    ):
        if given and auth_flow != "gcr":
            ctx.log.warning(
                f"{flag} was set but --authFlow is {auth_flow!r}. "
                "This flag only has effect when --authFlow=gcr."
            )
    chain = parse_chain(values["impersonate"]) if "impersonate" in values else None
    if chain is not None and auth_flow != "gcr":
        raise UsageError(
            f"{IMPERSONATE_FLAG} needs --authFlow gcr: a .dockercfg holds its own credentials"
        )
    try:
        overrides = parse_cache_overrides(ctx.environ)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from credprovider.gcp.provider import GcpOptions, GcpProvider

    return GcpProvider(
        GcpOptions(
            auth_flow=auth_flow,
            identity_provider=identity_provider,
            project_id=project_id,
            sts_audience=sts_audience,
            # the given one checked (the URL reader loads only then: not on a cache hit's path)
            sts_endpoint=(
                _check_sts_endpoint(values["sts_endpoint"])
                if "sts_endpoint" in values
                else STS_ENDPOINT
            ),
            impersonate=chain,
        ),
        overrides,
    )


def check(args: list[str], ctx: Context) -> None:
    """The start check (``--version`` with the args): the args, then the credentials file
    GOOGLE_APPLICATION_CREDENTIALS names, when the gcr flow reads it and the node has it, loaded
    as a pull loads it (a hand edit's slip there fails every pull; one not there yet, validate
    warns of). Nothing is fetched."""
    import os

    path = ctx.environ.get(CREDENTIALS_FILE_ENV, "")
    if build(args, ctx).options.auth_flow == "gcr" and path and os.path.lexists(path):
        from credprovider.gcp.googleauth import credentials_from_file

        credentials_from_file(path, ctx)


SPEC = PluginSpec(
    name=PLUGIN_NAME,
    summary="Kubelet image credential provider for Google Artifact Registry and Container Registry.",
    build=build,
    check=check,
    arguments_help=ARGUMENTS_HELP,
)

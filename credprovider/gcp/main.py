"""``auth-provider-gcp``: drop-in for kubernetes/cloud-provider-gcp's plugin."""

from __future__ import annotations

from credprovider.gcp.registry import AUTH_FLOWS, STS_ENDPOINT, parse_cache_overrides
from credprovider.loopback import is_loopback_address
from credprovider.plugin import (
    Context,
    PluginSpec,
    Provider,
    UsageError,
    argument_parser,
)
from credprovider.plugin import main as run_plugin

NAME = "auth-provider-gcp"

ARGUMENTS_HELP = """get-credentials [--authFlow gcr|dockercfg|dockercfg-url] [--identity-provider URL --project-id ID]

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
  --sts-endpoint URL         token exchange endpoint (default https://sts.googleapis.com/v1/token),
                             e.g. a Private Service Connect endpoint
Env: KUBE_SIDECAR_CACHE_DURATION (Go duration) and KUBE_SIDECAR_CACHE_TYPE (image|registry|global)
override the computed cacheDuration / cacheKeyType (Global, half the token's validity).
"""


def _check_sts_endpoint(url: str) -> str:
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].rsplit(":", 1)[0]
    if scheme == "https" or (scheme == "http" and is_loopback_address(host)):
        return url
    raise UsageError(f"--sts-endpoint {url!r} must be an https:// URL")


def build(args: list[str], ctx: Context) -> Provider:
    parser = argument_parser(NAME)
    parser.add_argument("command", nargs="?")
    parser.add_argument("--authFlow", "-a", dest="auth_flow", default="gcr")
    parser.add_argument("--identity-provider", default="")
    parser.add_argument("--project-id", default="")
    parser.add_argument("--sts-endpoint", default=STS_ENDPOINT)
    options = parser.parse_args(args)
    if options.command not in (None, "get-credentials"):
        raise UsageError(
            f"unknown command {options.command!r}: the only command is get-credentials"
        )
    if options.command is None:
        ctx.log.v(
            1, "no get-credentials subcommand given (upstream requires it): running it anyway"
        )
    if options.auth_flow not in AUTH_FLOWS:
        raise UsageError(
            f'invalid value "{options.auth_flow}" for authFlow '
            '(must be one of "gcr", "dockercfg", or "dockercfg-url")'
        )
    if options.identity_provider and not options.project_id:
        raise UsageError("--project-id is required when --identity-provider is set")
    if options.identity_provider and options.auth_flow != "gcr":
        ctx.log.warning(
            f"--identity-provider was set but --authFlow is {options.auth_flow!r}. "
            "This flag only has effect when --authFlow=gcr."
        )
    try:
        overrides = parse_cache_overrides(ctx.environ)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    from credprovider.gcp.provider import GcpOptions, GcpProvider

    return GcpProvider(
        GcpOptions(
            auth_flow=options.auth_flow,
            identity_provider=options.identity_provider,
            project_id=options.project_id,
            sts_endpoint=_check_sts_endpoint(options.sts_endpoint),
        ),
        overrides,
    )


SPEC = PluginSpec(
    name=NAME,
    summary="Kubelet image credential provider for Google Artifact Registry and Container Registry.",
    build=build,
    arguments_help=ARGUMENTS_HELP,
)


def main(argv: list[str]) -> None:
    run_plugin(SPEC, argv)

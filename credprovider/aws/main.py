"""``ecr-credential-provider``: drop-in for kubernetes/cloud-provider-aws's plugin."""

from __future__ import annotations

from credprovider.aws import PLUGIN_NAME
from credprovider.errors import UsageError
from credprovider.runtime.provider import Context, PluginSpec, Provider

ARGUMENTS_HELP = """[get-credentials]

Arguments: positional arguments (such as the historical get-credentials) are accepted and ignored,
as upstream does. Credentials come from the standard AWS chain (env, shared profile, web identity,
container credentials, IMDSv2); the region is read from the registry host. With a service account
token (kubelet tokenAttributes), the role in annotation eks.amazonaws.com/ecr-role-arn, else
eks.amazonaws.com/role-arn, else env AWS_ECR_ROLE_ARN is assumed with AssumeRoleWithWebIdentity.
"""


def build(args: list[str], ctx: Context) -> Provider:
    # Positional arguments (get-credentials) are ignored, as upstream; any other flag is an error.
    # No argparse here: it is the plugin's only argument rule and this path runs on every exec.
    flags = [arg for arg in args if arg.startswith("-") and arg != "-"]
    if flags:
        raise UsageError(f"unrecognized arguments: {' '.join(flags)} (see --help)")
    from credprovider.aws.provider import EcrProvider

    return EcrProvider()


def check(args: list[str], ctx: Context) -> None:
    """The start check (``--version`` with the args): the args, then the AWS settings as botocore
    reads them for a pull (the profile files, named or at their defaults, AWS_PROFILE, the AWS_*
    values it checks): a file a hand edit left unparseable, or a profile that is not there, fails
    every pull botocore makes. Nothing is fetched."""
    build(args, ctx)
    from credprovider.aws import botocore_api, botocore_chain

    botocore_api.configured_region(botocore_chain.session(ctx.environ))


SPEC = PluginSpec(
    name=PLUGIN_NAME,
    summary="Kubelet image credential provider for Amazon ECR and ECR Public.",
    build=build,
    check=check,
    arguments_help=ARGUMENTS_HELP,
)

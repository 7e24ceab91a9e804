"""``registry-credential-provider``: the pod's own identity, traded at the backend its args name."""

from __future__ import annotations

from credprovider.registries import PLUGIN_NAME
from credprovider.registries.backends import settings_from_args
from credprovider.runtime.provider import Context, PluginSpec, Provider

ARGUMENTS_HELP = """--backend BACKEND [its options]

Every pull trades the pod's service account token (tokenAttributes, kubelet 1.34+) for a
credential of the registry's own; the credential is sent only for the backend's registries.
Backends and their options:
  quay          --url https://QUAY --robot NAMESPACE+ROBOT
                Quay 3.13+ robot federation (GET /oauth2/federation/robot/token); answers
                NAMESPACE+ROBOT and a JWT valid for its exp (an hour)
  quay-sts      --url https://QUAY --robot NAMESPACE+ROBOT
                Quay's RFC 8693 token exchange (POST <url>/sts/token)
  artifactory   --url https://HOST --provider-name NAME [--provider-type TYPE] [--audience A]
                [--project-key KEY] [--identity-mapping NAME]
                JFrog OIDC token exchange (POST /access/api/v1/oidc/token); provider type
                default "Generic OpenID Connect"
  cloudsmith    --org ORG --service-slug SLUG [--url https://api.cloudsmith.io]
                Cloudsmith OIDC (POST /openid/ORG/); registry docker.cloudsmith.io
  vault         --url https://VAULT --role ROLE --secret-path PATH --registry HOST[,HOST]
                [--auth-mount kubernetes] [--kv-mount secret] [--vault-namespace NS]
                [--username-field username] [--password-field password]
                login at auth/MOUNT/login (kubernetes or jwt method), then the KV v2 secret
                KV-MOUNT/data/PATH's username and password fields
  secret        --url https://API-SERVER [--annotation registry.credprovider.io/pull-secret]
                the kubernetes.io/dockerconfigjson Secret the service account's annotation
                names, read from the pod's own namespace with the pod's token (the service
                account needs get on it); its auths entry for the image's host
Common:
  --registry HOST[,HOST]  the hosts the credential is for (default: the --url host for quay,
                          quay-sts and artifactory; docker.cloudsmith.io for cloudsmith)
  --ca-file PATH          CA bundle the backend's TLS certificate is checked against (default:
                          certifi's bundle); https:// only, http:// only to a loopback address
cacheDuration: half the time left of the shorter of the credential's expiry and the token's.
"""


def build(args: list[str], ctx: Context) -> Provider:
    settings = settings_from_args(args)
    from credprovider.registries.provider import RegistryProvider

    return RegistryProvider(settings)


SPEC = PluginSpec(
    name=PLUGIN_NAME,
    summary="Kubelet image credential provider for any registry that trusts the pod's own "
    "identity: Quay, Artifactory, Cloudsmith, Vault, or a namespace's pull Secret.",
    build=build,
    arguments_help=ARGUMENTS_HELP,
)

"""``registry-credential-provider``: any registry that trusts the pod's own identity.

The kubelet's service-account token for the pod (KEP-4412, ``tokenAttributes``) is traded at the
provider entry's backend for a registry credential: Quay robot federation (its shipped endpoint
and the RFC 8693 one), Artifactory's OIDC token exchange, Cloudsmith's OIDC, Vault (a
kubernetes/jwt login, then a KV v2 read of a username and password), or a
``kubernetes.io/dockerconfigjson`` Secret of the pod's own namespace, read through the API server.

The package is the plugin: ``main`` (its arguments and PluginSpec), ``backends`` (the backends,
their settings from the args, the hosts a credential may go to: pure), ``wire`` (each backend's
calls and how to read its answers: pure), ``provider`` (the calls sent, one line for each
failure) and ``descriptor`` (what the tool knows of it). No SDK: the runtime's own client.
"""

# The executable's name in the kubelet's bin dir, defined here only.
PLUGIN_NAME = "registry-credential-provider"

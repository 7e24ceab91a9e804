"""``acr-credential-provider``: the kubelet credential provider plugin for Azure Container Registry.

The package is the plugin: ``main`` (its arguments and PluginSpec), ``provider`` (the plan and
the answer), ``identities`` (which Entra identity a pull uses, and its AAD token), ``bindings``
(AKS identity bindings), ``registry`` (pure facts: login servers, clouds), ``cloudconfig``
(azure.json), ``imds`` (the instance metadata service's tokens), ``exchange`` (the ACR refresh
token exchange) and ``descriptor`` (what the tool knows of it).
"""

# The executable's name in the kubelet's bin dir, defined here only.
PLUGIN_NAME = "acr-credential-provider"

"""``auth-provider-gcp``: the kubelet credential provider plugin for Google Artifact Registry and Container Registry.

The package is the plugin: ``main`` (its arguments and PluginSpec), ``provider`` (where
credentials come from), ``registry`` (pure facts: hosts), ``metadata`` (the GCE metadata server
client, stdlib), ``googleauth`` (its google-auth route: every call into it, and its errors),
``credfile`` (GOOGLE_APPLICATION_CREDENTIALS, read by the plugin for google-auth's loaders),
``sources`` (a federation config's subject token sources, read and run within the plugin's bounds),
``impersonation`` (``--impersonate-service-account``: the chain, each refusal's line),
``dockercfg`` (the legacy .dockercfg flows) and ``descriptor`` (what the tool knows of it).
"""

# The executable's name in the kubelet's bin dir, defined here only.
PLUGIN_NAME = "auth-provider-gcp"

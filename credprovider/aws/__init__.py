"""``ecr-credential-provider``: the kubelet credential provider plugin for Amazon ECR and ECR Public.

The package is the plugin: ``main`` (its arguments and PluginSpec), ``provider`` (where
credentials come from), ``registry`` (pure facts), ``descriptor`` (what the tool knows of it).
"""

# The executable's name in the kubelet's bin dir, defined here only.
PLUGIN_NAME = "ecr-credential-provider"

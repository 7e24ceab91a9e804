"""``ecr-credential-provider``: the kubelet credential provider plugin for Amazon ECR and ECR Public.

The package is the plugin: ``main`` (its arguments and PluginSpec), ``provider`` (where
credentials come from), ``registry`` (pure facts: hosts, partitions, tokens), ``tokenapi``
(GetAuthorizationToken's seam: one answer parser, one set of errors), ``direct`` and ``sigv4``
(its stdlib route, the common node case, and the SigV4 signer), ``botocore_api`` (its botocore
route: profiles, web identity, assumed roles), ``botocore_chain`` (the session and the credential
chain made for botocore: every file it reads bounded; ``process``: a profile's credential_process
run under the deadline), ``podidentity`` (EKS Pod Identity: the pod's token
traded at EKS Auth for its association's role), ``bundle`` (which botocore data the bundle keeps;
build time only) and ``descriptor`` (what the tool knows of it).
"""

# The executable's name in the kubelet's bin dir, defined here only.
PLUGIN_NAME = "ecr-credential-provider"

"""credprovider: kubelet image credential provider plugins for AWS ECR, Azure ACR, Google and any
registry that trusts the pod's own identity.

One package, two sides. The exec path (what a plugin imports when the kubelet runs it): ``entry``
(dispatch by program name; the one table of clouds), ``runtime/`` (stdin -> provider -> stdout,
written once), one folder per cloud (``aws/``, ``azure/``, ``gcp/``) and one for the other
registries (``registries/``: Quay, Artifactory, Cloudsmith, Vault, a namespace's Secret), ``errors`` (the one error
root) and ``version``. The operator's side, never on the exec path: ``tool/`` (the ``credprovider``
command), ``cloud`` (what each cloud's ``descriptor`` tells the tool) and ``paths`` (where things
live on a node). Each package's docstring lists its modules.
"""

__version__ = "0.1.0"

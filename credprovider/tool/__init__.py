"""The operator tool, ``credprovider``: never on a plugin's exec path.

``cli`` is the parser and the error edge, ``terminal`` sanitizes what it prints, ``catalog`` is the
clouds it knows (each cloud's ``descriptor``, filling in :mod:`credprovider.cloud`), ``errors`` the
errors its packages share, ``slips`` the operator's typo (a name one slip from the one meant). The rest is grouped by what it works on, each package using only those
listed before it:

* ``node/``: the node as files and processes (the kubelet, its flags, layouts, discovery);
* ``kubeconfig/``: the CredentialProviderConfig, as the kubelet reads and validates it;
* ``images/``: which providers run for an image, and running them as the kubelet does;
* ``change/``: node changes as transactions (the engine, its journal and durable writes; install,
  migrate; the node's lock);
* ``cluster/``: the cluster's API server (a bounded client, and what a Node says of its cloud);
* ``doctor/`` and ``agent/``: the node's credential chain checked link by link; the fleet agent;
* ``commands/``: one module per subcommand; they parse arguments and print, nothing else.

A module imports other packages at its top. Only a command imports its packages inside the function
that runs it: the parser loads every command module, and the whole tool at once would cost each run
about 90 ms more (tests/unit/test_architecture.py holds both).

May import YAML, pydantic, and anything in :mod:`credprovider.runtime`; the runtime never imports
this package. Paths on the node are in :mod:`credprovider.paths`.
"""

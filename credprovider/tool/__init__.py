"""The operator tool, ``credprovider``: never on a plugin's exec path.

``cli`` is the parser and the error edge; ``commands/`` holds one module per subcommand (argument
parsing and printing only); the modules beside it are the decisions those commands share: the
kubelet's config and its validation (``config``, ``config_validate``, ``config_lint``,
``yamldoc``), which providers run for an image (``selection``, ``claims``, ``lookup``), what
install and migrate write (``install_config``, ``install_plan``, ``migration``, ``flagfiles``),
and reading what an operator names (``nodefiles``, ``startcheck``, ``childproc``). The clouds are
known through their ``descriptor`` modules (``catalog``).

May import YAML, pydantic, and anything in :mod:`credprovider.runtime`; the runtime never
imports this package.
"""

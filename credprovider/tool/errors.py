"""The tool's errors that more than one of its packages raise, under the one root
(:class:`credprovider.errors.CredproviderError`); each package's own errors live with it."""

from __future__ import annotations

from credprovider.errors import CredproviderError


class NodeChangeError(CredproviderError):
    """install, migrate or the agent cannot plan or make its change to the node: it would
    overwrite something that is not credprovider's, cannot find what to install, or cannot read
    the kubelet's flags."""

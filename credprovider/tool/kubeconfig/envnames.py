"""A provider's ``env`` name that is a near miss of one its plugin reads (``AWS_REGOIN``,
``aws_region``): the kubelet passes it as given, and the plugin sees the name it reads unset.
The names read are the runtime's own (below) and the plugin's (``CloudPlugin.env_read``)."""

from __future__ import annotations

from typing import Final

from credprovider.cloud import CloudPlugin
from credprovider.runtime.deadline import DEADLINE_ENV
from credprovider.runtime.excerpt import quoted
from credprovider.runtime.http import PROXY_ENV
from credprovider.runtime.serve import CACHE_DIR_ENV, CACHE_READ_ONLY_ENV, KEY_LOG_ENV
from credprovider.runtime.tls import REQUESTS_CA_BUNDLE_ENV
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.kubeconfig.model import CredentialProvider
from credprovider.tool.slips import one_slip

# What every plugin reads: its runtime's settings, the proxies its SDKs honour (with NO_PROXY, and
# the lower-case forms), the CA bundles they load (OpenSSL's SSL_CERT_FILE and SSL_CERT_DIR too).
RUNTIME_ENV: Final = (
    DEADLINE_ENV,
    CACHE_DIR_ENV,
    CACHE_READ_ONLY_ENV,
    KEY_LOG_ENV,
    *PROXY_ENV,
    "NO_PROXY",
    "no_proxy",
    *REQUESTS_CA_BUNDLE_ENV,
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)
# A shorter name is one letter from too many others to call a slip (its case still is).
_SLIP_LENGTH: Final = 6
# Names some plugin reads: one set for another cloud's plugin is not a near miss of this one's.
_ANY_READ: Final = frozenset(RUNTIME_ENV).union(*(plugin.env_read for plugin in PLUGINS.values()))


def near_miss_lints(provider: CredentialProvider, plugin: CloudPlugin) -> list[str]:
    """Each env name of ``provider`` that no plugin reads and is one slip from a name ``plugin``
    reads: a letter left out, added, changed or two swapped, or another case."""
    names = dict.fromkeys(name for name, _ in provider.env_pairs())  # each name once
    return [lint for lint in (near_miss(name, plugin) for name in names) if lint]


def near_miss(name: str, plugin: CloudPlugin) -> str:
    """Why the env name ``name`` given to ``plugin`` looks like a slip ("": it does not)."""
    if name in _ANY_READ:
        return ""
    read = (*RUNTIME_ENV, *plugin.env_read)
    near = next((known for known in read if one_slip(name, known, _SLIP_LENGTH)), None)
    if near is None:
        return ""
    return (
        f"env {quoted(name)} is read by no plugin, and {quoted(near)}, which this one "
        f"reads, differs from it only {_how(name, near)}: did you mean {quoted(near)}? "
        "(as given, it does nothing)"
    )


def _how(name: str, near: str) -> str:
    return "in case" if name.upper() == near.upper() else "by one slip of a letter"

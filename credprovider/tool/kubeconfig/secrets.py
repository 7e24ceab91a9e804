"""A secret others than root may read on a node: given in a provider's ``env``
(``AWS_SECRET_ACCESS_KEY``, ``CloudPlugin.secret_env``) in a config file others may read, or held
in a file the plugin reads (azure.json's ``aadClientSecret``, a service account key, a token
file: ``CloudPlugin.secret_files``) that others may read. Every user of the node can read it
there, and be the node's identity. Only the secret's name is said, never its value."""

from __future__ import annotations

import os
import stat

from credprovider.cloud import CloudPlugin
from credprovider.runtime.excerpt import quoted
from credprovider.tool.catalog import SECRET_ENV
from credprovider.tool.kubeconfig.model import CredentialProvider, LoadedConfig
from credprovider.tool.node.access import FileProblem, UnreadableError, read_bytes

_OTHERS = stat.S_IRWXG | stat.S_IRWXO


def secret_lints(loaded: LoadedConfig) -> list[str]:
    """Each provider whose env gives a secret (a key, a token) from a config file that others
    than its owner may read: every user of the node can read it there."""
    found = []
    for provider, source in zip(loaded.providers, loaded.provider_sources, strict=True):
        secrets = [name for name, value in provider.env_pairs() if name in SECRET_ENV and value]
        if not secrets:
            continue
        mode = _mode(str(source))
        if mode & _OTHERS:
            found.append(
                f"provider {quoted(provider.name or '')}: env {quoted(secrets[0])} gives a secret "
                f"in {source}, which others may read (mode {stat.filemode(mode)}): chmod 600 "
                f"{source} (install and the agent write such a config so), or give the plugin an "
                "identity instead (an instance role, a workload identity)"
            )
    return found


def secret_file_lints(provider: CredentialProvider, plugin: CloudPlugin) -> list[str]:
    """The files ``provider``'s plugin reads, with its args and env, that hold a secret and that
    others than their owner may read (checked on a node only: the files are this node's)."""
    if plugin.secret_files is None:
        return []
    return [
        f"{path} gives {secret}, and others may read it (mode {stat.filemode(mode)}): chmod 600 "
        f"{path}, or give the plugin an identity instead (an instance role, a workload identity)"
        for path, secret in plugin.secret_files(
            provider.args or [], dict(provider.env_pairs()), _read
        )
        if (mode := _mode(path)) & _OTHERS
    ]


def _read(path: str) -> str | None:
    """The text of a regular file (at most the cap every node file has; what is not UTF-8, such
    as a PKCS#12 certificate, with each such byte replaced), else ``None``."""
    if not path.startswith("/"):
        return None
    try:
        return read_bytes(path).decode("utf-8", "replace")
    except (UnreadableError, FileProblem):  # not this user's to read, not a regular file
        return None


def _mode(path: str) -> int:
    try:
        return os.stat(path).st_mode
    except (OSError, ValueError):
        return 0

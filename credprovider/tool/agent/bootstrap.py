"""The bootstrap of the chart's mode files: what provisioning lays beside the kubelet's two flags
so that a new node's kubelet starts before the agent's pod ever ran, and what the agent leaves
there when it is uninstalled.

The kubelet does not start when the config its flags name is missing, holds no provider, or names
a provider whose plugin is not in the bin dir (k8s.io/kubernetes pkg/credentialprovider/plugin:
``readCredentialProviderConfig``, ``validateCredentialProviderConfig``: "at least 1 item in plugins
is required", and each plugin's binary must exist). So the bootstrap is a config of one provider,
:data:`BOOTSTRAP_PROVIDER`, whose only image host lies under ``.invalid`` (RFC 2606: no such host
exists, so the kubelet runs it for no image), and its plugin, a shell script that refuses any
request. The agent replaces the bootstrap's provider with ours (it is never kept as another
provider) and, at uninstall, puts the bootstrap back where the node had no config before: the
flags set at provisioning keep naming files that exist. Pure: texts only.
"""

from __future__ import annotations

import shlex
from typing import Final

from credprovider.paths import AGENT_BIN_DIR, AGENT_CONFIG
from credprovider.runtime.api import API_V1

BOOTSTRAP_PROVIDER: Final = "credprovider-bootstrap"
BOOTSTRAP_IMAGE_HOST: Final = "credprovider-bootstrap.invalid"
PLUGIN_MODE: Final = 0o755
CONFIG_MODE: Final = 0o644

PLUGIN_TEXT: Final = (
    "#!/bin/sh\n"
    f"# {BOOTSTRAP_PROVIDER}: a placeholder until the credprovider agent installs the plugins.\n"
    f'echo "{BOOTSTRAP_PROVIDER}: the credprovider agent has not installed the plugins on this '
    'node" >&2\n'
    "exit 1\n"
)

CONFIG_TEXT: Final = (
    f"# {BOOTSTRAP_PROVIDER}: the kubelet starts with it; the credprovider agent replaces it.\n"
    "apiVersion: kubelet.config.k8s.io/v1\n"
    "kind: CredentialProviderConfig\n"
    "providers:\n"
    f"  - name: {BOOTSTRAP_PROVIDER}\n"
    f"    apiVersion: {API_V1}\n"
    f'    matchImages: ["{BOOTSTRAP_IMAGE_HOST}"]\n'
    "    defaultCacheDuration: 1m\n"
)


# Where the script writes a file before it renames it into place.
UNFINISHED_SUFFIX: Final = ".credprovider-unfinished"


def provisioning_script(config: str = AGENT_CONFIG, bin_dir: str = AGENT_BIN_DIR) -> str:
    """The shell commands provisioning runs before the kubelet's first start (cloud-init's
    ``runcmd``, a launch template's user data, an image build), creating only what is not
    there: a node the agent already installed keeps its files. Each file is written beside its
    place, flushed (``sync``) and renamed there: a boot cut short at any point leaves either
    nothing or the whole file, never a half config the kubelet would refuse to start with (and
    that ``[ -e ]`` would keep at the next run); the next run removes what it left beside."""
    directories = dict.fromkeys([bin_dir, config.rsplit("/", 1)[0] or "/"])
    return f"mkdir -p {' '.join(shlex.quote(d) for d in directories)}\n" + "".join(
        _made_whole(path, text, mode)
        for path, text, mode in (
            (f"{bin_dir}/{BOOTSTRAP_PROVIDER}", PLUGIN_TEXT, PLUGIN_MODE),
            (config, CONFIG_TEXT, CONFIG_MODE),
        )
    )


def _made_whole(path: str, text: str, mode: int) -> str:
    """Shell commands that make ``path`` hold ``text`` (mode ``mode``) unless something is there."""
    final, unfinished = shlex.quote(path), shlex.quote(path + UNFINISHED_SUFFIX)
    return (
        f"rm -f {unfinished}; [ -e {final} ] || {{ cat > {unfinished} <<'EOF'\n{text}EOF\n"
        f"chmod {mode:o} {unfinished} && sync && mv -f {unfinished} {final}; }}\n"
    )

"""The clouds the ``credprovider`` tool knows, read from each cloud's descriptor. Pure: no SDK is
imported."""

from __future__ import annotations

import importlib
from typing import Final

from credprovider.entry import PLUGIN_PACKAGES, plugin_of, without_exe
from credprovider.tool.descriptor import CloudPlugin

# Where install and migrate put things by default, and where get looks when not told.
NODE_BIN_DIR: Final = "/etc/kubernetes/image-credential-provider"
NODE_CONFIG: Final = "/etc/kubernetes/image-credential-provider-config.yaml"
# What the .deb and .rpm install (release/packages.py): the bundle in one versioned directory under
# PACKAGE_LIB_DIR, every name linked in PACKAGE_BIN_DIR (the kubelet's bin dir; the links follow
# each upgrade), the tool on PATH, and the example configs under PACKAGE_DOC_DIR.
PACKAGE_LIB_DIR: Final = "/usr/lib/credprovider"
PACKAGE_BIN_DIR: Final = f"{PACKAGE_LIB_DIR}/bin"
PACKAGE_TOOL_LINK: Final = "/usr/bin/credprovider"
PACKAGE_DOC_DIR: Final = "/usr/share/doc/credprovider"
# The links install made to the package's bin dir, one path a line: the package's removal deletes
# those still pointing into PACKAGE_LIB_DIR, so that no bin dir is left with dangling links.
PACKAGE_LINKS_FILE: Final = "/var/lib/credprovider/package-links"


def _descriptor(package: str) -> CloudPlugin:
    descriptor: CloudPlugin = importlib.import_module(f"{package}.descriptor").DESCRIPTOR
    return descriptor


# key (aws, azure, gcp) -> descriptor, in the order of entry.PLUGIN_PACKAGES
PLUGINS: Final = {
    plugin.key: plugin for plugin in (_descriptor(p) for p in PLUGIN_PACKAGES.values())
}
BY_NAME: Final = {plugin.name: plugin for plugin in PLUGINS.values()}


def plugin_for_name(provider_name: str) -> CloudPlugin | None:
    """Our plugin behind a config's provider name (``.exe`` tolerated), if any: its own name, or
    the plugin it suffixes (``<plugin name>-<suffix>``, entry.plugin_of)."""
    return BY_NAME.get(plugin_of(without_exe(provider_name)) or "")

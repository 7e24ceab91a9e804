"""Whether the node's kubelet runs plugins from the distribution package: what the package's
removal must not take away (its ``prerm`` / ``%preun`` asks ``credprovider package-removal-check``
before anything is removed; release/distpackages.py).

A plugin is the package's when the executable the kubelet would run for a provider of its config
(``bin dir / name``, every link followed) is inside the package's directory: the package's own bin
dir, or a link ``credprovider install`` made to it in another bin dir. The kubelet reads its config
and bin dir at start; a config naming a plugin it cannot find keeps it from starting.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from credprovider.paths import PACKAGE_LIB_DIR


@dataclass(frozen=True)
class InUse:
    """A provider of the kubelet's config whose plugin the package holds."""

    name: str
    path: str  # as the kubelet names it: bin dir / name


def package_plugins(
    provider_names: list[str], bin_dir: str, package_dir: str = PACKAGE_LIB_DIR
) -> list[InUse]:
    """The providers among ``provider_names`` whose executable in ``bin_dir`` resolves into
    ``package_dir``."""
    inside = package_dir.rstrip("/") + "/"
    found = []
    for name in provider_names:
        path = os.path.join(bin_dir, name)
        if os.path.realpath(path).startswith(inside) or os.path.realpath(bin_dir).startswith(
            inside
        ):
            found.append(InUse(name, path))
    return found

"""Where credprovider's files live on a node: one definition, read by the tool, by ``release/``
(the packages) and checked against the chart (tests/chart).

One layout per install form, each for a reason:

* **By hand from the tarball** (``install``, ``migrate``): the plugins in :data:`NODE_BIN_DIR` and
  the kubelet's config in :data:`NODE_CONFIG`, beside the kubelet's other files under
  ``/etc/kubernetes`` (what EKS, AKS and kubeadm guides use), unless the node already names others.
* **The .deb and .rpm**: the bundle in one versioned directory under :data:`PACKAGE_LIB_DIR`, every
  name linked in :data:`PACKAGE_BIN_DIR` (the kubelet's bin dir: the links follow each upgrade and
  the package manager owns every file), the tool at :data:`PACKAGE_TOOL_LINK`, examples under
  :data:`PACKAGE_DOC_DIR`.
* **The chart's agent**: bundles under :data:`AGENT_HOME` (``versions/<version>``, ``current``),
  linked in :data:`AGENT_BIN_DIR` where the platform does not fix a bin dir: on the node's disk,
  beside its state, so a rollback is a link's change. In the chart's mode ``files`` the config is
  :data:`AGENT_CONFIG` too, so that the pod mounts only ``/var/lib/credprovider`` of the host
  (never ``/etc/kubernetes``, which holds a control plane's keys).

Not on the exec path: nothing here is imported by a plugin.
"""

from __future__ import annotations

from typing import Final

# By hand: where install and migrate put things when the node names nothing, and where get looks.
NODE_BIN_DIR: Final = "/etc/kubernetes/image-credential-provider"
NODE_CONFIG: Final = "/etc/kubernetes/image-credential-provider-config.yaml"

# The packages (release/distpackages.py).
PACKAGE_LIB_DIR: Final = "/usr/lib/credprovider"
PACKAGE_BIN_DIR: Final = f"{PACKAGE_LIB_DIR}/bin"
PACKAGE_TOOL_LINK: Final = "/usr/bin/credprovider"
PACKAGE_DOC_DIR: Final = "/usr/share/doc/credprovider"
# The links install made to the package's bin dir, one path a line: the package's removal deletes
# those still pointing into PACKAGE_LIB_DIR, so that no bin dir is left with dangling links.
PACKAGE_LINKS_FILE: Final = "/var/lib/credprovider/package-links"

# The agent: the bundles it places (versions/<version>/, current -> the one in use) and what it
# must remember across pod restarts (state.json: on the node's disk, not on tmpfs).
AGENT_HOME: Final = "/var/lib/credprovider/agent"
# The directory the chart mounts for it (the home is made and removed whole by a rename in it);
# the kubelet makes it for the pod, and the agent's uninstall has the host remove it when empty.
AGENT_HOME_PARENT: Final = "/var/lib/credprovider"
AGENT_BIN_DIR: Final = f"{AGENT_HOME}/bin"
AGENT_CONFIG: Final = f"{AGENT_HOME}/config.yaml"  # the chart's mode files (charts/credprovider)
# Where the agent places the bundles on a node whose /var is mounted noexec: COS mounts /var and
# /home noexec, and remounts only /home/kubernetes/bin exec, at every boot (kubernetes/kubernetes
# cluster/gce/gci/node.yaml: kube-node-installation.service's ExecStartPre "mount --bind
# /home/kubernetes/bin /home/kubernetes/bin" then "mount -o remount,exec /home/kubernetes/bin").
# The agent's state stays in AGENT_HOME; only versions/ and current/ move.
AGENT_EXEC_HOME: Final = "/home/kubernetes/bin/credprovider"
# The only places the agent puts bundles in (its state names one: a forged one is refused).
AGENT_BUNDLE_HOMES: Final = (AGENT_HOME, AGENT_EXEC_HOME)

# Every form: the node's one change lock (tmpfs: a reboot ends every change).
LOCK_DIR: Final = "/run/credprovider"
LOCK_PATH: Final = f"{LOCK_DIR}/node.lock"

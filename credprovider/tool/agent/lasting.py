"""The lasting way on a platform whose node the agent may not change (agent/platforms.py refuses
them), rendered: what the platform itself applies at every boot. Pure: texts only
(``credprovider render`` prints them; docs/platforms.md says how to apply each).

* **Talos**: a machine config patch setting ``machine.kubelet.credentialProviderConfig`` (Talos
  then writes ``/etc/kubernetes/kubelet-credentialproviderconfig.yaml`` and passes both flags:
  siderolabs/talos ``pkg/machinery/constants``); the plugins come from the system extension
  ``make release`` builds (release/talos.py).
* **OpenShift (RHCOS)**: a MachineConfig. The Machine Config Operator renders both kubelet flags
  inline in ``kubelet.service``, naming ``/etc/kubernetes/credential-providers/<cloud>.yaml`` and
  the read-only ``/usr/libexec/kubelet-image-credential-provider-plugins`` (platforms.md,
  OpenShift row). The MachineConfig, named ``99-…`` so that its file replaces the MCO's own of the
  same path (the MCO reads machine configs in name order and the last one wins: Red Hat,
  "Changing Ignition configs after installation"), writes that config with our providers under
  the plugins' own names, and a unit that, before the kubelet starts, lays a read-only overlay on
  the plugin dir: links to the bundle the chart's agent (mode files) placed in
  ``/var/lib/credprovider/agent/current`` over OpenShift's own binaries. A plugin the agent has
  not placed yet is OpenShift's own where it has one (our config is the upstream plugins', so it
  serves it), else a placeholder that refuses every request (agent/bootstrap.py): the kubelet
  starts either way. The overlay is made once per boot and never changed while mounted.
"""

from __future__ import annotations

import base64
import shlex
from collections.abc import Mapping
from typing import Any, Final

import yaml

from credprovider.paths import AGENT_HOME
from credprovider.tool.agent.bootstrap import PLUGIN_TEXT
from credprovider.tool.agent.plan import validated
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.change.render import render_config

TALOS_CONFIG: Final = "/etc/kubernetes/kubelet-credentialproviderconfig.yaml"

# OpenShift (the MCO's kubelet template): the config per cluster platform (each cloud's
# descriptor names its own; a cluster on none of them: the generic one), the plugins' read-only
# dir.
CREDENTIAL_PROVIDERS_DIR: Final = "/etc/kubernetes/credential-providers"
NO_CLOUD: Final = "none"
OPENSHIFT_CONFIGS: Final = {
    **{
        plugin.openshift_platform: f"{CREDENTIAL_PROVIDERS_DIR}/{plugin.openshift_config}"
        for plugin in PLUGINS.values()
        if plugin.openshift_platform
    },
    NO_CLOUD: f"{CREDENTIAL_PROVIDERS_DIR}/generic-credential-provider.yaml",
}
OPENSHIFT_PLUGIN_DIR: Final = "/usr/libexec/kubelet-image-credential-provider-plugins"
OPENSHIFT_HOME: Final = "/var/lib/credprovider/openshift"
# /usr/local is writable on RHCOS (a link into /var): where a MachineConfig puts a script.
OPENSHIFT_SCRIPT: Final = "/usr/local/bin/credprovider-openshift-plugins"
OPENSHIFT_UNIT: Final = "credprovider-plugins.service"
IGNITION_VERSION: Final = "3.2.0"
ROLE_LABEL: Final = "machineconfiguration.openshift.io/role"
# The roles of the pools the MCO makes itself (openshift/machine-config-operator
# manifests/{master,worker,arbiter}.machineconfigpool.yaml, each selecting its MachineConfigs by
# ROLE_LABEL): a MachineConfig for another role reaches only a custom pool of that role.
BUILT_IN_ROLES: Final = ("worker", "master", "arbiter")


def talos_patch(text: str) -> str:
    """The Talos machine config patch giving the kubelet the config ``text`` (:func:`talos_config`;
    ``talosctl patch mc --patch @FILE``, or ``--config-patch`` at ``talosctl gen config``); the
    config validated as the kubelet validates it at start
    (:class:`~credprovider.tool.agent.plan.RefusedConfig` if it would not start)."""
    validated(TALOS_CONFIG, text)  # Talos writes it there for a kubelet that must start
    config = yaml.safe_load(text)
    patch = {"machine": {"kubelet": {"credentialProviderConfig": config}}}
    header = (
        "# credprovider render talos: Talos writes this config to "
        f"{TALOS_CONFIG} and passes both kubelet flags;\n"
        "# the plugins come from the credprovider system extension (docs/platforms.md).\n"
    )
    return header + yaml.safe_dump(patch, sort_keys=False, default_flow_style=False)


def talos_config(keys: list[str], settings: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """The kubelet's config the Talos patch gives (Talos writes it at :data:`TALOS_CONFIG`)."""
    return render_config(keys, writer="render talos", settings=settings)


def openshift_config(
    keys: list[str], settings: Mapping[str, Mapping[str, Any]] | None = None
) -> str:
    """The kubelet's config the MachineConfig writes: our providers under the plugins' names."""
    files = {
        key: PLUGINS[key].openshift_node_file for key in keys if PLUGINS[key].openshift_node_file
    }
    return render_config(keys, files, writer="render openshift", settings=settings)


def openshift_script(keys: list[str]) -> str:
    """The boot script (run by :data:`OPENSHIFT_UNIT` before the kubelet): the overlay of our
    plugins over OpenShift's. ``CREDPROVIDER_ROOT`` prefixes every path (a test's node root;
    empty on a node)."""
    names = " ".join(shlex.quote(PLUGINS[key].name) for key in keys)
    return f"""#!/bin/sh
# credprovider: its plugins over OpenShift's read-only plugin dir, before the kubelet starts
# (credprovider render openshift; docs/platforms.md). Once per boot: the overlay is never
# changed while it is mounted.
set -eu
root="${{CREDPROVIDER_ROOT:-}}"
plugins={OPENSHIFT_PLUGIN_DIR}
home={OPENSHIFT_HOME}
current={AGENT_HOME}/current
if grep -q " $root$plugins overlay " /proc/self/mounts; then
  exit 0
fi
mkdir -p "$root$home"
rm -rf "$root$home/links.new"
mkdir "$root$home/links.new"
for name in {names}; do
  if [ -x "$root$current/$name" ]; then
    ln -s "$current/$name" "$root$home/links.new/$name"
  elif [ ! -e "$root$plugins/$name" ]; then
    ln -s "$home/placeholder" "$root$home/links.new/$name"
  fi
done
cat > "$root$home/placeholder.new" <<'EOF'
{PLUGIN_TEXT}EOF
chmod 755 "$root$home/placeholder.new"
mv "$root$home/placeholder.new" "$root$home/placeholder"
rm -rf "$root$home/links"
mv "$root$home/links.new" "$root$home/links"
mount -t overlay -o "ro,lowerdir=$root$home/links:$root$plugins" credprovider-plugins "$root$plugins"
"""


def openshift_unit() -> str:
    return (
        "[Unit]\n"
        "Description=credprovider: its plugins over OpenShift's read-only plugin dir\n"
        "Before=kubelet.service\n"
        "After=local-fs.target\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        f"ExecStart={OPENSHIFT_SCRIPT}\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target kubelet.service\n"
    )


def _data_url(text: str) -> dict[str, str]:
    return {
        "source": "data:text/plain;charset=utf-8;base64," + base64.b64encode(text.encode()).decode()
    }


def openshift_machineconfig(keys: list[str], cloud: str, config: str, role: str = "worker") -> str:
    """The MachineConfig for the nodes of ``role`` on a cluster of the platform ``cloud`` (a key
    of :data:`OPENSHIFT_CONFIGS`): ``config`` (:func:`openshift_config`) where the MCO's kubelet
    flags name it, the boot script for ``keys`` and its unit. The config is validated as the
    kubelet validates it at start (:class:`~credprovider.tool.agent.plan.RefusedConfig` if it
    would not start)."""
    validated(OPENSHIFT_CONFIGS[cloud], config)
    document = {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": f"99-{role}-credprovider", "labels": {ROLE_LABEL: role}},
        "spec": {
            "config": {
                "ignition": {"version": IGNITION_VERSION},
                "storage": {
                    "files": [
                        {
                            "path": OPENSHIFT_CONFIGS[cloud],
                            "mode": 0o644,
                            "overwrite": True,
                            "contents": _data_url(config),
                        },
                        {
                            "path": OPENSHIFT_SCRIPT,
                            "mode": 0o755,
                            "overwrite": True,
                            "contents": _data_url(openshift_script(keys)),
                        },
                    ]
                },
                "systemd": {
                    "units": [
                        {"name": OPENSHIFT_UNIT, "enabled": True, "contents": openshift_unit()}
                    ]
                },
            }
        },
    }
    header = (
        f"# credprovider render openshift: oc apply -f this; the MCO reboots each {role} node.\n"
        "# The plugins: the chart in mode files (docs/platforms.md, OpenShift).\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)

"""The pairing the in-tree removal requires of a node (KEP-2395): the kubelet on
``--cloud-provider=external`` with a cloud controller manager, not a built-in cloud its version no
longer has, and the built-in registry login not turned back on. Read from the kubelet's flags and
version; pure."""

from __future__ import annotations

from credprovider.tool.catalog import PLUGINS
from credprovider.tool.doctor.model import FAIL, INFO, WARN, Diagnosis
from credprovider.tool.node.kubelet_facts import (
    BUILT_IN_CLOUDS_GONE_SINCE,
    CLOUD_LOGIN_GATE,
    CLOUD_LOGIN_GATE_GONE_AFTER,
)
from credprovider.tool.node.kubelet_flags import KubeletSettings

MIGRATE_COMMAND = "credprovider migrate --kubelet-flags-file FILE"


def _release(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def check_cloud_provider(
    settings: KubeletSettings,
    version: tuple[int, int] | None,
    diagnosis: Diagnosis,
    migrate: str = MIGRATE_COMMAND,
) -> None:
    """One line for each thing wrong with the kubelet's cloud pairing (nothing when it is
    right: ``external``, or no cloud at all); ``migrate`` is the command that moves this node."""
    _check_gate(settings, version, diagnosis, migrate)
    cloud = settings.cloud_provider
    if cloud is None or cloud in ("", "external"):
        return
    plugin = next((p for p in PLUGINS.values() if cloud in p.in_tree_clouds), None)
    flag = f"--cloud-provider={cloud}"
    manager = plugin.controller_manager if plugin is not None else "the cloud's controller manager"
    fix = (
        f"move it to --cloud-provider=external ({migrate} does) and run {manager} (it "
        "initializes the node and its addresses)"
    )
    if version is None:
        diagnosis.add(
            "kubelet",
            WARN,
            f"the kubelet runs {flag}: a kubelet {_release(BUILT_IN_CLOUDS_GONE_SINCE)} or newer "
            "does not start with it (its version is not known here)",
            fix,
        )
    elif version >= BUILT_IN_CLOUDS_GONE_SINCE:
        diagnosis.add(
            "kubelet",
            FAIL,
            f"the kubelet's flags say {flag}, which kubelet {_release(version)} refuses (no "
            f"built-in cloud provider since {_release(BUILT_IN_CLOUDS_GONE_SINCE)}): it does not "
            "start with these flags",
            fix,
        )
    elif plugin is not None and version >= plugin.in_tree_removed_in:
        diagnosis.add(
            "kubelet",
            WARN,
            f"the kubelet runs {flag}, whose built-in registry login kubelet "
            f"{_release(plugin.in_tree_removed_in)} removed: pulls get credentials from "
            f"{plugin.name} only, and kubelet {_release(BUILT_IN_CLOUDS_GONE_SINCE)} will not "
            "start with this flag",
            fix,
        )
    else:
        diagnosis.add(
            "kubelet",
            INFO,
            f"the kubelet runs {flag} (its built-in cloud provider): before upgrading it past "
            f"{_release(plugin.in_tree_removed_in if plugin else BUILT_IN_CLOUDS_GONE_SINCE)} {fix}",
        )


def _check_gate(
    settings: KubeletSettings, version: tuple[int, int] | None, diagnosis: Diagnosis, migrate: str
) -> None:
    if settings.feature_gates.get(CLOUD_LOGIN_GATE) is not False:
        return
    where = settings.sources.get(f"featureGates.{CLOUD_LOGIN_GATE}", "the feature gates")
    if version is not None and version > CLOUD_LOGIN_GATE_GONE_AFTER:
        said, status = "which this kubelet no longer has: it does not start", FAIL
    elif version is not None and version >= BUILT_IN_CLOUDS_GONE_SINCE:
        said, status = "which is locked on in this kubelet: it does not start", FAIL
    else:
        said, status = "turning the built-in registry logins back on where they remain", WARN
    diagnosis.add(
        "kubelet",
        status,
        f"{where} sets {CLOUD_LOGIN_GATE}=false, {said}",
        f"remove {CLOUD_LOGIN_GATE} from the kubelet's feature gates ({migrate} does)",
    )

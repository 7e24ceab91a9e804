"""``credprovider render``: a platform's own lasting way, printed for the operator to apply
(agent/lasting.py): a Talos machine config patch, an OpenShift MachineConfig. Nothing on the node
is read or changed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from credprovider.runtime.excerpt import quoted
from credprovider.tool.catalog import PLUGINS
from credprovider.tool.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Subcommands,
    chosen_providers,
)
from credprovider.tool.slips import one_slip


def _role(text: str) -> str:
    """``--role`` (argparse ``type``): a lowercase DNS label, since it names the MachineConfig
    (``99-ROLE-credprovider``, a DNS subdomain) and is a label value: "Worker", "a b" or "w/x"
    printed a MachineConfig that ``oc apply`` refuses."""
    if not (
        0 < len(text) <= MAX_ROLE_CHARS
        and text.isascii()
        and text.replace("-", "a").isalnum()
        and text == text.lower()
        and text[0].isalnum()
        and text[-1].isalnum()
    ):
        raise argparse.ArgumentTypeError(
            f"{quoted(text)} is not a pool role (lowercase letters, digits and '-', at most "
            f"{MAX_ROLE_CHARS})"
        )
    return text


# A label value is at most 63 characters, and "99-" and "-credprovider" go around it in the name.
MAX_ROLE_CHARS = 63


def _cmd_talos(args: argparse.Namespace) -> int:
    from credprovider.tool.agent.lasting import TALOS_CONFIG, talos_config, talos_patch

    keys = chosen_providers(args, f"render {args.platform}")
    if keys is None:
        return EXIT_USAGE
    config = talos_config(keys, args.settings)
    return _printed(args.platform, lambda: talos_patch(config), (TALOS_CONFIG, config), keys)


def _printed(
    platform: str, rendered: Callable[[], str], config: tuple[str, str], keys: list[str]
) -> int:
    """What ``rendered()`` gives, or, where the kubelet would not start with its ``config`` (path,
    text), or a plugin of ``keys`` refuses the args and env it gives (run from this bundle), one
    line saying so and nothing on stdout."""
    from credprovider.tool.agent.plan import RefusedConfig
    from credprovider.tool.change.startcheck import own_plugin_refusing

    try:
        text = rendered()
        refusing = own_plugin_refusing(*config, {PLUGINS[key].name for key in keys})
    except RefusedConfig as exc:
        refusing = str(exc)
    if refusing:
        print(
            f"credprovider render {platform}: nothing printed: {refusing} "
            "(fix --provider-settings)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    sys.stdout.write(text)
    return EXIT_OK


def _cmd_openshift(args: argparse.Namespace) -> int:
    from credprovider.tool.agent.lasting import (
        BUILT_IN_ROLES,
        OPENSHIFT_CONFIGS,
        openshift_config,
        openshift_machineconfig,
    )

    keys = chosen_providers(args, f"render {args.platform}")
    if keys is None:
        return EXIT_USAGE
    if args.cloud not in OPENSHIFT_CONFIGS:
        print(
            f"credprovider render openshift: --cloud takes {', '.join(OPENSHIFT_CONFIGS)} "
            f"(not {args.cloud})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    near = next((r for r in BUILT_IN_ROLES if one_slip(args.role, r)), None)
    if near is not None:  # a custom pool's role is taken as given: said, not refused
        print(
            f"credprovider render openshift: note: --role {quoted(args.role)} is one slip from "
            f"the MCO's pool {quoted(near)}: a MachineConfig reaches only the nodes of a pool "
            f"whose role it names, and none if no pool has this one",
            file=sys.stderr,
        )
    config = openshift_config(keys, args.settings)
    return _printed(
        args.platform,
        lambda: openshift_machineconfig(keys, args.cloud, config, args.role),
        (OPENSHIFT_CONFIGS[args.cloud], config),
        keys,
    )


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--providers",
        required=True,
        help=f"comma list of the plugins to give the kubelet: {', '.join(PLUGINS)}",
    )
    parser.add_argument(
        "--provider-settings",
        default="",
        help="JSON, per provider key, of matchImages, args, env, defaultCacheDuration or "
        "tokenAttributes replacing the defaults (as the chart's providerSettings; default: none)",
    )


def register(sub: Subcommands) -> None:
    render = sub.add_parser(
        "render",
        help="print a read-only platform's own lasting way (Talos, OpenShift) to apply",
        description="Talos and OpenShift (RHCOS) nodes are changed only through the platform "
        "itself (agent apply refuses them): this prints what the platform applies at every boot. "
        "Nothing on this machine is read or changed. docs/platforms.md says how to apply each.",
    )
    platforms = render.add_subparsers(dest="platform", metavar="PLATFORM", required=True)
    talos = platforms.add_parser(
        "talos",
        help="a machine config patch: machine.kubelet.credentialProviderConfig",
        description="Apply with talosctl patch mc --patch @FILE (or gen config --config-patch). "
        "The plugins come from the Talos system extension make release builds "
        "(credprovider-<version>-talos-extension-oci.tar), named in the installer image.",
    )
    _common(talos)
    talos.set_defaults(handler=_cmd_talos)
    openshift = platforms.add_parser(
        "openshift",
        help="a MachineConfig: the config the MCO's kubelet reads, and the plugins over its "
        "read-only plugin dir",
        description="Apply with oc apply -f FILE (the MCO reboots each node of the role). The "
        "bundle itself is placed by the chart in mode files; until it is, OpenShift's own "
        "plugin of the same name serves (our config is the upstream plugins').",
    )
    _common(openshift)
    openshift.add_argument(
        "--cloud",
        required=True,
        help="the cluster's platform (AWS, GCP, Azure, or none: as OpenShift names it, "
        "lowercase): it decides which config file the MCO's kubelet reads",
    )
    openshift.add_argument(
        "--role",
        default="worker",
        type=_role,
        help="the machine config pool's role, a DNS label (default: %(default)s)",
    )
    openshift.set_defaults(handler=_cmd_openshift)

"""The kubelet's command line, read the way its flag parser (spf13/pflag) reads it, for the few
settings the credential chain depends on. Pure functions.

Facts, from k8s.io/kubernetes v1.36 ``cmd/kubelet/app/options`` and k8s.io/kubelet v0.36/v0.37
``config/v1beta1``: the credential provider config and bin dir are *flags only*
(``--image-credential-provider-config``, ``--image-credential-provider-bin-dir``); no
KubeletConfiguration field sets them. ``staticPodPath`` and ``featureGates`` are KubeletConfiguration
fields with the flags ``--pod-manifest-path`` and ``--feature-gates`` over them. ``--config-dir``
drop-ins end in ``.conf`` and are merged in lexical order (subdirectories included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

CONFIG_FLAG: Final = "image-credential-provider-config"
BIN_DIR_FLAG: Final = "image-credential-provider-bin-dir"
KUBELET_CONFIG_FLAG: Final = "config"
KUBELET_CONFIG_DIR_FLAG: Final = "config-dir"
ROOT_DIR_FLAG: Final = "root-dir"
POD_MANIFEST_FLAG: Final = "pod-manifest-path"
FEATURE_GATES_FLAG: Final = "feature-gates"
READ_ONLY_PORT_FLAG: Final = "read-only-port"
ADDRESS_FLAG: Final = "address"
RUNTIME_ENDPOINT_FLAG: Final = "container-runtime-endpoint"
IMAGE_ENDPOINT_FLAG: Final = "image-service-endpoint"
CLOUD_PROVIDER_FLAG: Final = "cloud-provider"
DEFAULT_ROOT_DIR: Final = "/var/lib/kubelet"
# cmd/kubelet/app/options applyLegacyDefaults: 10255 without --config; the file's default is 0.
LEGACY_READ_ONLY_PORT: Final = 10255
DROP_IN_SUFFIX: Final = ".conf"
# Keys people write in a KubeletConfiguration hoping to set the credential provider: no kubelet
# version has them, so the kubelet ignores them (with at most an "unknown field" warning).
NOT_CONFIG_FIELDS: Final = ("imageCredentialProviderConfigPath", "imageCredentialProviderBinDir")


def _name(word: str) -> str:
    """A flag word's name as pflag normalizes it for the kubelet (``_`` reads as ``-``)."""
    return word.lstrip("-").split("=", 1)[0].replace("_", "-")


def flag_values(args: Sequence[str], name: str) -> list[str]:
    """Every value ``--name=value`` or ``--name value`` is given in ``args``, in order."""
    found: list[str] = []
    for i, arg in enumerate(args):
        if not arg.startswith("-") or _name(arg) != name:
            continue
        if "=" in arg:
            found.append(arg.split("=", 1)[1])
        elif i + 1 < len(args):
            found.append(args[i + 1])
    return found


def flag_value(args: Sequence[str], name: str) -> str | None:
    """The value the kubelet takes for ``--name``: the last one given."""
    values = flag_values(args, name)
    return values[-1] if values else None


def parse_feature_gates(text: str) -> dict[str, bool]:
    """``A=true,B=false`` (pflag's mapStringBool): unparseable items are left out."""
    gates: dict[str, bool] = {}
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        if sep and name.strip() and value.strip().lower() in ("true", "false"):
            gates[name.strip()] = value.strip().lower() == "true"
    return gates


@dataclass(frozen=True)
class KubeletSettings:
    """What the credential chain depends on, with where each value came from."""

    provider_config: str | None = None
    bin_dir: str | None = None
    kubelet_config: str | None = None
    config_dir: str | None = None
    root_dir: str = DEFAULT_ROOT_DIR
    static_pod_path: str | None = None
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    read_only_port: int = 0  # the unauthenticated API (/metrics, /pods); 0 is off
    address: str = "0.0.0.0"
    runtime_endpoint: str | None = None  # the CRI socket (unset: the runtime's default)
    image_endpoint: str | None = None
    cloud_provider: str | None = None  # --cloud-provider (a flag only), None when not given
    sources: Mapping[str, str] = field(default_factory=dict)  # setting -> "flag", "config", ...
    notes: tuple[str, ...] = ()


def settings_from(
    args: Sequence[str], configs: Sequence[tuple[str, Mapping[str, Any]]] = ()
) -> KubeletSettings:
    """The settings of a kubelet started with ``args`` whose KubeletConfiguration documents are
    ``configs`` ((path, document) in merge order: the ``--config`` file, then the drop-ins)."""
    sources: dict[str, str] = {}
    notes: list[str] = []
    static_pod_path: str | None = None
    gates: dict[str, bool] = {}
    read_only_port = 0 if flag_value(args, KUBELET_CONFIG_FLAG) else LEGACY_READ_ONLY_PORT
    address = "0.0.0.0"
    endpoints: dict[str, str] = {}
    for path, document in configs:
        if isinstance(document.get("readOnlyPort"), int):
            read_only_port = document["readOnlyPort"]
        if isinstance(document.get("address"), str) and document["address"]:
            address = document["address"]
        for key in ("containerRuntimeEndpoint", "imageServiceEndpoint"):
            if isinstance(document.get(key), str) and document[key]:
                endpoints[key] = document[key]
        if isinstance(document.get("staticPodPath"), str) and document["staticPodPath"]:
            static_pod_path = document["staticPodPath"]
            sources["staticPodPath"] = path
        if isinstance(document.get("featureGates"), Mapping):
            for name, value in document["featureGates"].items():
                if isinstance(value, bool):
                    gates[str(name)] = value
                    sources[f"featureGates.{name}"] = path
        for key in NOT_CONFIG_FIELDS:
            if key in document:
                notes.append(
                    f"{path} sets {key}, which no KubeletConfiguration has: the kubelet ignores it "
                    f"(the setting is the flag --{CONFIG_FLAG if 'Config' in key else BIN_DIR_FLAG})"
                )
    if (value := flag_value(args, POD_MANIFEST_FLAG)) is not None:
        static_pod_path = value
        sources["staticPodPath"] = f"--{POD_MANIFEST_FLAG}"
    if (
        (value := flag_value(args, READ_ONLY_PORT_FLAG)) is not None
        and value.isascii()
        and value.isdigit()
        and len(value) <= 5
    ):
        read_only_port = int(value)
    address = flag_value(args, ADDRESS_FLAG) or address
    runtime = flag_value(args, RUNTIME_ENDPOINT_FLAG) or endpoints.get("containerRuntimeEndpoint")
    image = flag_value(args, IMAGE_ENDPOINT_FLAG) or endpoints.get("imageServiceEndpoint")
    for text in flag_values(args, FEATURE_GATES_FLAG):
        for name, enabled in parse_feature_gates(text).items():
            gates[name] = enabled
            sources[f"featureGates.{name}"] = f"--{FEATURE_GATES_FLAG}"
    chosen = {}
    for name in (CONFIG_FLAG, BIN_DIR_FLAG, KUBELET_CONFIG_FLAG, KUBELET_CONFIG_DIR_FLAG):
        chosen[name] = flag_value(args, name)
        if chosen[name] is not None:
            sources[name] = f"--{name}"
    return KubeletSettings(
        provider_config=chosen[CONFIG_FLAG],
        bin_dir=chosen[BIN_DIR_FLAG],
        kubelet_config=chosen[KUBELET_CONFIG_FLAG],
        config_dir=chosen[KUBELET_CONFIG_DIR_FLAG],
        root_dir=flag_value(args, ROOT_DIR_FLAG) or DEFAULT_ROOT_DIR,
        static_pod_path=static_pod_path,
        feature_gates=gates,
        read_only_port=read_only_port,
        address=address,
        runtime_endpoint=runtime,
        image_endpoint=image or runtime,
        cloud_provider=flag_value(args, CLOUD_PROVIDER_FLAG),
        sources=sources,
        notes=tuple(notes),
    )

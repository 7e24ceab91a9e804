"""The example cloud as the ``credprovider`` tool sees it (credprovider/cloud.py). Pure."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from credprovider.cloud import CloudPlugin, Explanation, both_port_forms, samples_with_port

NAME = "example-credential-provider"
HOST_SUFFIX = ".registry.example.test"
DEFAULT_TOKEN_FILE = "/etc/kubernetes/example-token"


def explain(host: str, registry: str, args: Sequence[str] = ()) -> Explanation:
    recognized = host.endswith(HOST_SUFFIX)
    return Explanation(
        recognized,
        f"read the node's token file and return it under {registry}"
        if recognized
        else f"{host} is not an example registry",
    )


def lints(match_images: Sequence[str], args: Sequence[str], env: Collection[str]) -> list[str]:
    if not args:
        return [f"{NAME} has no args: it needs the node's token file as its first argument"]
    return []


DESCRIPTOR = CloudPlugin(
    key="example",
    name=NAME,
    match_images=both_port_forms((f"*{HOST_SUFFIX}",)),
    default_cache_duration="5m",
    args=(DEFAULT_TOKEN_FILE,),
    annotation_keys=(),
    sample_images=samples_with_port({"regional": f"eu{HOST_SUFFIX}/team/app"}),
    explain=explain,
    lints=lints,
    node_file_arg=DEFAULT_TOKEN_FILE,
    node_file_flags=("example-token-file",),
)

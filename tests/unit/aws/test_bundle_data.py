"""The bundle's trimmed botocore data resolves every endpoint the plugin can ask for as before."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import botocore
import pytest
from botocore.regions import EndpointResolver

from credprovider.aws.bundle import BOTOCORE_SERVICES, ENDPOINT_PREFIXES, trim_endpoints

DATA = Path(botocore.__file__).parent / "data"


def _load(path: Path) -> Any:
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    return json.loads(gzip.decompress(path.with_name(path.name + ".gz").read_bytes()))


FULL = _load(DATA / "endpoints.json")
TRIMMED = trim_endpoints(FULL)
REGIONS = [
    (partition["partition"], region)
    for partition in FULL["partitions"]
    for region in [*partition["regions"], "us-fake-1", "cn-fake-1"]
]


def test_endpoint_prefixes_are_those_of_the_kept_services() -> None:
    prefixes = set()
    for service in BOTOCORE_SERVICES:
        (version,) = sorted(p.name for p in (DATA / service).iterdir() if p.is_dir())[-1:]
        model = _load(DATA / service / version / "service-2.json")
        prefixes.add(model["metadata"]["endpointPrefix"])
    assert prefixes == set(ENDPOINT_PREFIXES)


def test_trimming_keeps_only_our_services_and_every_partition() -> None:
    assert [p["partition"] for p in TRIMMED["partitions"]] == [
        p["partition"] for p in FULL["partitions"]
    ]
    kept = {name for p in TRIMMED["partitions"] for name in p["services"]}
    assert kept <= set(ENDPOINT_PREFIXES) and "api.ecr" in kept
    assert len(json.dumps(TRIMMED)) < len(json.dumps(FULL)) / 20
    assert "ec2" in FULL["partitions"][0]["services"], "the input must not be modified"


def _resolve(resolver: EndpointResolver, *args: Any, **kwargs: Any) -> object:
    """The endpoint, or the error botocore raises (some variants do not exist)."""
    try:
        return resolver.construct_endpoint(*args, **kwargs)
    except Exception as exc:  # compared, not handled
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("prefix", ENDPOINT_PREFIXES)
@pytest.mark.parametrize(("fips", "dualstack"), [(False, False), (True, False), (False, True)])
def test_trimmed_data_resolves_like_the_full_data(prefix: str, fips: bool, dualstack: bool) -> None:
    full, trimmed = EndpointResolver(FULL), EndpointResolver(TRIMMED)
    for partition, region in REGIONS:
        assert trimmed.get_partition_for_region(region) == full.get_partition_for_region(region)
        variant = {"use_fips_endpoint": fips, "use_dualstack_endpoint": dualstack}
        assert _resolve(trimmed, prefix, region, **variant) == _resolve(
            full, prefix, region, **variant
        ), (partition, region)
    for partition in FULL["partitions"]:
        name = partition["partition"]
        assert trimmed.get_available_endpoints(prefix, name) == full.get_available_endpoints(
            prefix, name
        )

"""What the bundle keeps of botocore's data: only the services the plugin calls (read by build.spec).

botocore parses its 1.2 MB ``endpoints.json`` on every client creation, i.e. on every cache miss;
trimmed to our services it is about 20 kB. Build-time only: nothing here runs on the exec path.
"""

from __future__ import annotations

import copy
from typing import Any, Final

# Service model directories under botocore/data.
BOTOCORE_SERVICES: Final = ("ecr", "ecr-public", "sts", "eks-auth")
# Their endpointPrefix: the keys botocore looks up in endpoints.json.
ENDPOINT_PREFIXES: Final = ("api.ecr", "api.ecr-public", "sts", "eks-auth")


def trim_endpoints(endpoints: dict[str, Any]) -> dict[str, Any]:
    """``endpoints.json`` with every partition's services limited to :data:`ENDPOINT_PREFIXES`."""
    trimmed = copy.deepcopy(endpoints)
    for partition in trimmed["partitions"]:
        partition["services"] = {
            name: value
            for name, value in partition["services"].items()
            if name in ENDPOINT_PREFIXES
        }
    return trimmed

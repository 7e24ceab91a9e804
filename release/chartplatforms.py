"""``charts/credprovider/platforms.yaml``: what the chart mounts in mode ``flags`` for each value of
``flags.platform``, written from :mod:`credprovider.tool.agent.mounts` (the one definition: the
agent follows the same rows). ``python -m release.chartplatforms`` rewrites it; a chart test fails
when it differs from what this would write.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

import yaml

from credprovider.tool.agent.mounts import chart_table

TABLE: Final = Path(__file__).resolve().parent.parent / "charts" / "credprovider" / "platforms.yaml"
HEADER: Final = (
    "# Written by python -m release.chartplatforms from credprovider/tool/agent/mounts.py: do not\n"
    "# edit. Per flags.platform (mode flags), the host paths the agent's pod mounts at /host.\n"
)


def text() -> str:
    return HEADER + yaml.safe_dump(chart_table(), sort_keys=False, width=100)


def main() -> int:
    TABLE.write_text(text())
    print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

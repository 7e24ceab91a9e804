"""``make reliability-report``: the figures from the last run of tests/reliability."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

from tests.reliability.checks import FIGURES_DIR, recorded_outcomes


def summarize(outcomes: list[dict[str, Any]]) -> list[str]:
    by_category = Counter(o["category"] for o in outcomes)
    ok = Counter(o["category"] for o in outcomes if o["ok"])
    timed = [o for o in outcomes if o["deadline"]]
    worst = max(timed, key=lambda o: o["seconds"] / o["deadline"]) if timed else None
    secrets_found = sum(1 for o in outcomes if o["category"] == "hygiene" and not o["ok"])
    lines = [
        f"scenarios run:              {len(outcomes)}",
        f"faults survived:            {ok['fault']}/{by_category['fault']} (answered correctly before the deadline)",
        f"bad inputs handled:         {ok['hostile']}/{by_category['hostile']} (refused or answered as asserted)",
        f"spoofing attempts blocked:  {ok['spoofing']}/{by_category['spoofing']}",
        f"hygiene scenarios (-v=9):   {ok['hygiene']}/{by_category['hygiene']} clean",
        f"red-team classes held:      {ok['redteam']}/{by_category['redteam']} (cache path and content, "
        "secrets, log injection, one line, install)",
        f"secrets found:              {secrets_found}",
    ]
    if worst is not None:
        lines.append(
            f"worst time to answer:       {worst['seconds']:.1f}s against a {worst['deadline']:g}s deadline "
            f"({worst['scenario']})"
        )
    failed = [o for o in outcomes if not o["ok"]]
    for outcome in failed:
        lines.append(f"FAILED {outcome['category']}: {outcome['scenario']}: {outcome['detail']}")
    return lines


def main() -> int:
    outcomes: Any = recorded_outcomes()
    if outcomes is None:
        print(f"no figures in {FIGURES_DIR}: run pytest tests/reliability first", file=sys.stderr)
        return 1
    print("\n".join(summarize(outcomes)))
    return 0 if all(o["ok"] for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())

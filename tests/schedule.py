"""The slowest test modules first, when pytest-xdist's workers share the suite (issue #60).

``make test`` runs the suite with ``--dist loadscope --no-loadscope-reorder``: each module runs on
one worker (its module fixtures, one fleet cluster or control plane, built once), handed out in
collection order (the scheduler below: the ``tests/e2e`` directory one unit, the crash points
test by test). Handing out the longest modules first (the longest-processing-time rule) keeps a
3-minute module from starting last on a worker while the others are idle. A module's time is read
from the last run's figures (``dist/test-times.json``, tests/timing.py), else from the copy kept in
the tree (``tests/module-times.json``, for a fresh clone); a module neither names runs first, as
if it were the slowest, since nothing says it is quick.

Only the workers reorder (they collect; the controller hands out what they collected, in their
order, which must be the same on every worker: the same file, the same sort). A run without
workers keeps pytest's own order.

One unit is wider than a module: every test under ``tests/e2e`` runs on one worker, one after the
other. Their kubelets, containerd and control planes are each in namespaces of their own, but what
they check of the host (``tests/e2e/sandbox.py``: its mounts, network devices and cgroups before and
after a run) is the host's, and another run beside it would show there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest

from tests.timing import module_of

TESTS: Final = Path(__file__).resolve().parent
LAST_RUN: Final = TESTS.parent / "dist" / "test-times.json"
KEPT: Final = TESTS / "module-times.json"
# Tests under these directories share one worker, in order (see the module).
ONE_WORKER: Final = ("tests/e2e/",)
# Modules whose tests go to any worker one by one: long, and their module fixtures cheap (the
# crash points' fake kubelet health endpoints), so the longest module is not one worker's alone.
EACH_TEST: Final = ("tests/reliability/test_crash_points.py",)


def module_times(*sources: Path) -> dict[str, float]:
    """Each module's seconds from the first source that has a ``modules`` table; none: empty."""
    for source in sources:
        try:
            modules = json.loads(source.read_text()).get("modules")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(modules, dict) and modules:
            return {str(k): float(v) for k, v in modules.items() if isinstance(v, int | float)}
    return {}


def slowest_first(nodeids: list[str], times: dict[str, float]) -> list[int]:
    """The order (indexes into ``nodeids``) that runs the slowest units (:func:`scope_of`: a
    module, or a directory of ``ONE_WORKER``) first, each unit's tests together in their own
    order; a unit's time is its modules', and a module without a time counts as the slowest."""
    unknown = max(times.values(), default=0.0) + 1.0
    first_seen: dict[str, int] = {}
    per_module: dict[str, int] = {}
    shares: dict[str, dict[str, int]] = {}  # scope -> module -> its tests in the scope
    for index, nodeid in enumerate(nodeids):
        scope, module = scope_of(nodeid), module_of(nodeid)
        first_seen.setdefault(scope, index)
        per_module[module] = per_module.get(module, 0) + 1
        held = shares.setdefault(scope, {})
        held[module] = held.get(module, 0) + 1
    seconds = {
        scope: sum(times.get(m, unknown) * n / per_module[m] for m, n in held.items())
        for scope, held in shares.items()
    }

    def key(index: int) -> tuple[float, int, int]:
        scope = scope_of(nodeids[index])
        return (-seconds[scope], first_seen[scope], index)

    return sorted(range(len(nodeids)), key=key)


def scope_of(nodeid: str) -> str:
    """The unit a worker is handed: a test's module, its directory for ``ONE_WORKER``, the test
    itself for ``EACH_TEST``."""
    for directory in ONE_WORKER:
        if nodeid.startswith(directory):
            return directory
    module = module_of(nodeid)
    return nodeid if module in EACH_TEST else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's load-by-scope scheduling, the scope being :func:`scope_of`'s."""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ByModule(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):
        return
    order = slowest_first([item.nodeid for item in items], module_times(LAST_RUN, KEPT))
    items[:] = [items[index] for index in order]

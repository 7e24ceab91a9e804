"""A plugin's provider in this test process: the seams a subprocess would get from its environment,
injected instead.

* the environment: the emulators' variables go only into ``Context.environ`` (this process's
  environment plus them), never into ``os.environ``; the provider fetches through the runtime's
  :class:`~credprovider.runtime.serve.SdkSeam`, within :meth:`Context.sdk_environment`, so an SDK
  (or a provider) that read the process environment outside that seam would miss the emulators.
  The seam's other half, routing SDK logging, is off: it would take over this test process's root
  logger;
* the transport: name lookups of the cloud's fixed hosts answer with the emulators' loopback
  addresses (:func:`credprovider.runtime.loopback.install_resolve_map`, removed again afterwards), while the
  suite's connect guard keeps every connection on loopback;
* the clock, the deadline and the logger are the Context's own.

The provider is built by the plugin's own ``PluginSpec`` from its arguments, so what is tested is
what an exec would run, minus reading stdin and writing stdout.
"""

from __future__ import annotations

import importlib
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from credprovider.entry import PLUGIN_MODULES
from credprovider.runtime.deadline import Deadline
from credprovider.runtime.log import Logger
from credprovider.runtime.loopback import RESOLVE_ENV, install_resolve_map, parse_resolve_map
from credprovider.runtime.provider import Context, PluginSpec, Provider
from credprovider.runtime.serve import SdkSeam


@dataclass
class InProcess:
    provider: Provider
    ctx: Context
    log: io.StringIO  # everything the provider logged, at the verbosity asked for


def plugin_spec(plugin: str) -> PluginSpec:
    """The plugin's spec, found through the one table of clouds."""
    spec: PluginSpec = importlib.import_module(PLUGIN_MODULES[plugin]).SPEC
    return spec


@contextmanager
def in_process(
    plugin: str,
    env: dict[str, str],
    args: list[str],
    verbosity: int = 10,
    deadline: float = 30.0,
) -> Iterator[InProcess]:
    """``plugin``'s provider built from ``args``, its context seeing ``env``."""
    before = dict(os.environ)
    remove = install_resolve_map(parse_resolve_map(env.get(RESOLVE_ENV, "")))
    try:
        log = io.StringIO()
        ctx = Context(Deadline(deadline), Logger(plugin, verbosity, log), {**before, **env})
        provider = plugin_spec(plugin).build(args, ctx)
        yield InProcess(SdkSeam(provider, route_logs=False), ctx, log)
    finally:
        remove()
    after = dict(os.environ)
    names = (before.keys() | after.keys()) - {"PYTEST_CURRENT_TEST"}  # pytest's, per test phase
    changed = sorted(k for k in names if before.get(k) != after.get(k))
    assert not changed, f"the provider left the process environment changed: {changed}"

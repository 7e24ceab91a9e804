"""A plugin's provider in this test process: the seams a subprocess would get from its environment,
injected instead.

* the environment: the emulators' variables go into ``os.environ`` (the SDKs read it; pytest's
  ``monkeypatch`` restores it) and reach the provider as ``Context.environ``;
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

import pytest

from credprovider.entry import PLUGIN_MODULES
from credprovider.runtime.deadline import Deadline
from credprovider.runtime.log import Logger
from credprovider.runtime.loopback import RESOLVE_ENV, install_resolve_map, parse_resolve_map
from credprovider.runtime.provider import Context, PluginSpec, Provider


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
    monkeypatch: pytest.MonkeyPatch,
    verbosity: int = 10,
    deadline: float = 30.0,
) -> Iterator[InProcess]:
    """``plugin``'s provider built from ``args``, its context seeing ``env``."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    remove = install_resolve_map(parse_resolve_map(env.get(RESOLVE_ENV, "")))
    try:
        log = io.StringIO()
        ctx = Context(Deadline(deadline), Logger(plugin, verbosity, log), os.environ)
        yield InProcess(plugin_spec(plugin).build(args, ctx), ctx, log)
    finally:
        remove()

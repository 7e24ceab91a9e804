"""Run code right after a module's first import, without importing the module before something
wants it. Test mode patches ``socket`` this way and the runtime routes SDK ``logging`` this way: a
cache hit imports neither, and neither is ever usable unpatched. Stdlib only; no cloud."""

from __future__ import annotations

import sys

from credprovider.runtime._typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable


def when_imported(name: str, action: Callable[[], None]) -> None:
    """Run ``action`` now if module ``name`` is loaded, else as soon as its first import has run
    (before the importer gets the module). Actions for one pending module run in the order given."""
    if name in sys.modules:
        action()
        return
    for finder in sys.meta_path:
        if isinstance(finder, _AfterImport) and finder.name == name:
            finder.actions.append(action)
            return
    sys.meta_path.insert(0, _AfterImport(name, [action]))


class _AfterImport:
    """A meta path finder for one module: it steps out of the way, takes the spec the real finders
    give, and has the module's loader run the actions after the module's code."""

    def __init__(self, name: str, actions: list[Callable[[], None]]) -> None:
        self.name = name
        self.actions = actions

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # once: the real finders take it from here
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None and spec.loader is not None:
                spec.loader = _ThenAct(spec.loader, self.actions)
                return spec
        # Not found: the import fails as it would have; the actions wait for one that succeeds.
        sys.meta_path.insert(0, self)
        return None


class _ThenAct:
    """The real loader, then the actions; the module keeps the real loader as its own."""

    def __init__(self, loader: Any, actions: list[Callable[[], None]]) -> None:
        self._loader = loader
        self._actions = actions

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        for action in self._actions:
            action()

"""The names the exec path takes from ``typing``, without importing ``typing``.

Importing ``typing`` costs a plugin exec more than its whole cache-hit work: thousands of lines run at
import to build its special forms. Every module uses ``from __future__ import annotations``, so
annotations are never evaluated and names such as ``Final`` or ``Any`` are only ever read by mypy.
What runs is the class statement of a ``NamedTuple`` (here: ``collections.namedtuple`` behind the same
syntax), a ``Protocol`` base (here: ``object``; protocols are structural for mypy and never checked at
run time) and ``TypeVar`` (a name). Type checkers see ``typing``'s own definitions.

The tool's modules (``cli``, ``config``, ...) import ``typing`` as usual: they are not on the exec path.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO as IO
    from typing import Any as Any
    from typing import Final as Final
    from typing import NamedTuple as NamedTuple
    from typing import NoReturn as NoReturn
    from typing import Protocol as Protocol
    from typing import TypeVar as TypeVar
else:
    import collections

    # Only read by mypy (annotations are strings at run time); importable so modules read alike.
    IO = Any = Final = NoReturn = None
    Protocol = object

    def TypeVar(name: str, *constraints: object, **options: object) -> str:
        return name

    class _NamedTupleType(type):
        """``class Point(NamedTuple): x: int; y: int = 0`` -> ``collections.namedtuple`` with the
        annotated fields (in order, with their defaults) and the body's methods and docstring."""

        def __new__(mcs, name, bases, namespace):
            if not bases:
                return super().__new__(mcs, name, bases, namespace)
            fields = tuple(namespace.get("__annotations__", {}))
            defaults = [namespace[field] for field in fields if field in namespace]
            made = collections.namedtuple(
                name, fields, defaults=defaults or None, module=namespace.get("__module__")
            )
            for key, value in namespace.items():
                if key not in fields and key not in _NOT_COPIED:
                    setattr(made, key, value)
            return made

    _NOT_COPIED = frozenset({"__module__", "__annotations__", "__dict__"})

    class NamedTuple(metaclass=_NamedTupleType):
        pass

"""The names the exec path takes from ``typing``, without importing ``typing``.

Importing ``typing`` costs a plugin exec more than its whole cache-hit work: thousands of lines run at
import to build its special forms. Every module uses ``from __future__ import annotations``, so
annotations are never evaluated and names such as ``Final`` or ``Any`` are only ever read by mypy.
What runs is the class statement of a ``NamedTuple`` (here: a tuple subclass built the way
``collections.namedtuple`` builds one, without importing ``collections``), a ``Protocol`` base
(here: ``object``; protocols are structural for mypy and never checked at run time) and ``TypeVar``
(a name). Type checkers see ``typing``'s own definitions.

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
    from _collections import _tuplegetter  # C field accessor, what collections.namedtuple uses

    # Only read by mypy (annotations are strings at run time); importable so modules read alike.
    IO = Any = Final = NoReturn = None
    Protocol = object

    def TypeVar(name: str, *constraints: object, **options: object) -> str:
        return name

    class _NamedTupleType(type):
        """``class Point(NamedTuple): x: int; y: int = 0`` -> a tuple subclass with the annotated
        fields (in order, with their defaults) and the body's methods and docstring, as
        ``typing.NamedTuple`` makes, without ``collections`` (which alone costs a cache hit about
        a millisecond: it imports operator, reprlib, keyword and heapq, and namedtuple evals)."""

        def __new__(mcs, name, bases, namespace):
            if not bases:
                return super().__new__(mcs, name, bases, namespace)
            fields = tuple(namespace.get("__annotations__", {}))
            defaults = {field: namespace[field] for field in fields if field in namespace}
            body = {key: value for key, value in namespace.items() if key not in defaults}
            body.update(_TUPLE_METHODS)
            body.update(
                __slots__=(), _fields=fields, _field_defaults=defaults, __match_args__=fields
            )
            for index, field in enumerate(fields):
                body[field] = _tuplegetter(index, f"Alias for field number {index}")
            return type.__new__(type, name, (tuple,), body)

    def _new(cls, *args, **kwargs):
        fields, defaults = cls._fields, cls._field_defaults
        if len(args) > len(fields):
            raise TypeError(
                f"{cls.__name__}() takes {len(fields)} positional arguments "
                f"but {len(args)} were given"
            )
        values = list(args)
        for field in fields[: len(args)]:
            if field in kwargs:
                raise TypeError(f"{cls.__name__}() got multiple values for argument {field!r}")
        for field in fields[len(args) :]:
            if field in kwargs:
                values.append(kwargs.pop(field))
            elif field in defaults:
                values.append(defaults[field])
            else:
                raise TypeError(f"{cls.__name__}() missing required argument: {field!r}")
        if kwargs:
            raise TypeError(
                f"{cls.__name__}() got an unexpected keyword argument {next(iter(kwargs))!r}"
            )
        return tuple.__new__(cls, values)

    def _replace(self, **changes):
        values = [
            changes.pop(field, value) for field, value in zip(self._fields, self, strict=True)
        ]
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return tuple.__new__(type(self), values)

    def _asdict(self):
        return dict(zip(self._fields, self, strict=True))

    def _repr(self):
        shown = ", ".join(
            f"{field}={value!r}" for field, value in zip(self._fields, self, strict=True)
        )
        return f"{type(self).__name__}({shown})"

    def _getnewargs(self):
        return tuple(self)

    @classmethod
    def _make(cls, iterable):
        made = tuple.__new__(cls, iterable)
        if len(made) != len(cls._fields):
            raise TypeError(f"Expected {len(cls._fields)} arguments, got {len(made)}")
        return made

    _TUPLE_METHODS = {
        "__new__": _new,
        "_replace": _replace,
        "_asdict": _asdict,
        "__repr__": _repr,
        "__getnewargs__": _getnewargs,
        "_make": _make,
    }

    class NamedTuple(metaclass=_NamedTupleType):
        pass

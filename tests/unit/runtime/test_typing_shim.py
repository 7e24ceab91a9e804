"""credprovider/runtime/_typing.py: its run-time NamedTuple behaves as typing.NamedTuple does for every use
the exec path makes of it (fields, defaults, methods, properties, _replace, equality, pickling-free
tuple behaviour), and typing itself is not imported by it."""

from __future__ import annotations

import subprocess
import sys
import typing

import pytest

from release.bundle import REPO

_SHIM = """
import sys
sys.path.insert(0, sys.argv[1])
from credprovider.runtime import _typing
assert "typing" not in sys.modules, "the shim imported typing"
assert "collections" not in sys.modules, "the shim imported collections"
print(_typing.NamedTuple.__module__, _typing.Protocol is object, _typing.TypeVar("T"))
"""


def test_the_shim_does_not_import_typing() -> None:
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _SHIM, str(REPO)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["credprovider.runtime._typing", "True", "T"]


def _define(base: type) -> type:
    class Scope(base):  # type: ignore[misc,valid-type]
        """A scope."""

        registry: str
        keys: tuple[str, ...] = ()
        port: int = 443

        @property
        def host(self) -> str:
            return f"{self.registry}:{self.port}"

        def with_port(self, port: int) -> Scope:
            return self._replace(port=port)  # type: ignore[no-any-return]

        @classmethod
        def parse(cls, text: str) -> Scope:
            return cls(text)

    return Scope


def _runtime_named_tuple() -> type:
    """The shim's run-time class (not what mypy sees): import it with TYPE_CHECKING false."""
    namespace: dict[str, object] = {}
    source = (REPO / "credprovider" / "runtime" / "_typing.py").read_text()
    exec(compile(source, "_typing.py", "exec"), namespace)
    return namespace["NamedTuple"]  # type: ignore[return-value]


@pytest.mark.parametrize(
    "base", [typing.NamedTuple, _runtime_named_tuple()], ids=["typing", "shim"]
)
def test_named_tuple_behaviour(base: type) -> None:
    scope_type = _define(base)
    scope = scope_type("r.example", ("a",))
    assert isinstance(scope, tuple)
    assert scope_type._fields == ("registry", "keys", "port")
    assert scope_type._field_defaults == {"keys": (), "port": 443}
    assert scope == ("r.example", ("a",), 443)
    assert scope.host == "r.example:443"
    assert scope.with_port(5000) == scope_type("r.example", ("a",), 5000)
    assert scope_type.parse("x").registry == "x"
    assert repr(scope) == "Scope(registry='r.example', keys=('a',), port=443)"
    assert scope.__doc__ in ("A scope.", None)  # None when docstrings are stripped (-OO)
    with pytest.raises(TypeError):
        scope_type()  # the field without a default is required
    with pytest.raises(AttributeError):
        scope.registry = "other"  # type: ignore[misc]
    assert hash(scope) == hash(("r.example", ("a",), 443))
    assert scope_type("r", port=1, keys=("k",)) == ("r", ("k",), 1)
    assert scope_type(registry="r") == ("r", (), 443)
    assert scope._asdict() == {"registry": "r.example", "keys": ("a",), "port": 443}
    assert type(scope.with_port(1)) is scope_type
    for bad_call in (
        lambda: scope_type("r", registry="s"),  # given twice
        lambda: scope_type("r", (), 1, 2),  # too many
        lambda: scope_type("r", colour="red"),  # unknown keyword
        lambda: scope_type(keys=()),  # the required field missing
    ):
        with pytest.raises(TypeError):
            bad_call()
    with pytest.raises(ValueError):
        scope._replace(colour="red")


# What a NamedTuple class offers beyond tuple's, by typing's own account: every name mypy accepts on
# one (typing's stub gives these), so the shim cannot lack one that type-checks.
def _named_tuple_surface(scope_type: type) -> set[str]:
    # __orig_bases__: typing's record of the generic bases, which nothing reads at run time
    ignored = {"__module__", "__doc__", "__orig_bases__"}
    return {name for name in dir(scope_type) if name not in dir(tuple)} - ignored


def test_the_shim_offers_every_member_typing_does() -> None:
    typed, shimmed = _define(typing.NamedTuple), _define(_runtime_named_tuple())
    assert _named_tuple_surface(typed) == _named_tuple_surface(shimmed)
    for scope_type in (typed, shimmed):
        made = scope_type._make(["r", ("k",), 1])
        assert type(made) is scope_type and made == ("r", ("k",), 1)
        with pytest.raises(TypeError):
            scope_type._make(["r"])
        assert scope_type.__match_args__ == ("registry", "keys", "port")
        assert made.__getnewargs__() == ("r", ("k",), 1)
        match made:
            case scope_type(registry, keys, port):  # type: ignore[misc]
                assert (registry, keys, port) == ("r", ("k",), 1)

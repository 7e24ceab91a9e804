"""Every exception class credprovider defines has one root, credprovider.errors.CredproviderError,
and the parsers' errors stay the ValueError (or OSError) their callers catch."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import credprovider
from credprovider.errors import CredproviderError


def _exception_classes() -> list[type[BaseException]]:
    found = []
    for info in pkgutil.walk_packages(credprovider.__path__, "credprovider."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == info.name:
                found.append(value)
    return found


# Not errors but interrupts, as KeyboardInterrupt is: a BaseException no error handler takes.
INTERRUPTS = {"credprovider.runtime.serve._Late"}  # the deadline's alarm (runtime/serve.py)


def test_every_error_has_the_one_root() -> None:
    classes = _exception_classes()
    assert len(classes) >= 20  # the walk found them
    errors = [cls for cls in classes if f"{cls.__module__}.{cls.__qualname__}" not in INTERRUPTS]
    assert [cls.__qualname__ for cls in errors if not issubclass(cls, CredproviderError)] == []
    interrupts = [cls for cls in classes if cls not in errors]
    assert len(interrupts) == len(INTERRUPTS)
    assert not any(issubclass(cls, Exception) for cls in interrupts)


def test_parser_errors_keep_their_builtin_base() -> None:
    from credprovider.runtime.api import RequestError
    from credprovider.runtime.http import HttpError
    from credprovider.runtime.imageref import ImageError
    from credprovider.tool.kubeconfig.model import ConfigError

    assert issubclass(RequestError, ValueError)
    assert issubclass(ImageError, ValueError)
    assert issubclass(ConfigError, ValueError)
    assert issubclass(HttpError, OSError)

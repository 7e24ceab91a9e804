"""A config file's text decoded as the kubelet's codec decodes it, before its fields are read
(:mod:`credprovider.tool.kubeconfig.model`): JSON, whose duplicate keys the kubelet refuses, or
YAML (``node.yamldoc``); and :class:`ConfigError`, the kubelet's refusal of a config."""

from __future__ import annotations

import json
from typing import Any, Final

from credprovider.errors import CredproviderError
from credprovider.runtime.goformat import go_quote
from credprovider.tool.node.yamldoc import MAX_NESTING, YamlError, load_yaml


class ConfigError(CredproviderError, ValueError):
    """The kubelet would refuse the config: ``str()`` is its message, word for word; ``hint`` is
    what credprovider adds after it (which files, what to change), shown by :meth:`describe`."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def describe(self) -> str:
        return f"{self} ({self.hint})" if self.hint else str(self)


class _JSONObject(dict[str, Any]):
    """A decoded JSON object that remembers keys it saw twice."""

    duplicates: list[str]


def _json_object(pairs: list[tuple[str, Any]]) -> _JSONObject:
    obj = _JSONObject()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def paths_in_document_order(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every (path, node) of a decoded document, in document order, kubelet-style paths."""
    found: list[tuple[str, Any]] = [(path, value)]
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(paths_in_document_order(child, f"{path}.{key}" if path else key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(paths_in_document_order(child, f"{path}[{index}]"))
    return found


def parse_document(text: str) -> Any:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            document = json.loads(text, object_pairs_hook=_json_object)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
        except RecursionError:
            raise ConfigError(f"exceeded max depth of {MAX_NESTING}") from None
        except ValueError as exc:  # an integer of more than 4300 digits
            raise ConfigError(str(exc).split(";")[0]) from None
        for path, node in paths_in_document_order(document):
            if isinstance(node, _JSONObject) and node.duplicates:
                key = node.duplicates[0]
                raise ConfigError(
                    f"strict decoding error: duplicate field {go_quote(f'{path}.{key}' if path else key)}"
                )
        return document
    try:
        return load_yaml(text)
    except YamlError as exc:
        raise ConfigError(str(exc)) from None


QUOTED_CHARS: Final = 64


def quoted_start(text: str) -> str:
    """The kubelet quotes the whole file here; a path given by mistake (a key, /etc/shadow) would
    be printed whole, so only its start is (the kubelet's text up to that point is unchanged)."""
    if len(text) <= QUOTED_CHARS:
        return text
    return f"{text[:QUOTED_CHARS]}…({len(text) - QUOTED_CHARS} more characters)"

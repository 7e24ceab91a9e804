"""YAML documents as the kubelet's decoder takes them, and nothing a hostile file can abuse.

Duplicate keys are refused (the kubelet's strict decoding), and so are documents whose aliases
expand into more than :data:`MAX_YAML_NODES` nodes ("billion laughs") or that nest deeper than
:data:`MAX_NESTING`: go-yaml refuses both, and here nothing walks such a document afterwards. Used
for every YAML file the ``credprovider`` tool reads (configs, KubeletConfiguration). Not on the
plugins' exec path.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from credprovider.errors import CredproviderError
from credprovider.runtime.goformat import go_quote


class YamlError(CredproviderError, ValueError):
    """The text is not a YAML document the kubelet would decode; the message is go-yaml's."""


MAX_YAML_NODES: Final = 100_000
MAX_NESTING: Final = 1_000


class _DuplicateKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses duplicate keys, as the kubelet's strict decoder does, and
    documents whose aliases expand beyond :data:`MAX_YAML_NODES` nodes."""

    def compose_document(self) -> Any:
        node = super().compose_document()
        sizes: dict[int, int] = {}

        def expanded(item: Any, depth: int) -> int:
            known = sizes.get(id(item))
            if known is not None:
                return known
            if depth > MAX_NESTING:
                raise YamlError(f"yaml: exceeded max depth of {MAX_NESTING}")
            children: list[Any] = []
            if isinstance(item, yaml.SequenceNode):
                children = list(item.value)
            elif isinstance(item, yaml.MappingNode):
                children = [part for pair in item.value for part in pair]
            total = 1
            for child in children:
                total += expanded(child, depth + 1)
                if total > MAX_YAML_NODES:
                    raise YamlError("yaml: document contains excessive aliasing")
            sizes[id(item)] = total
            return total

        if node is not None:
            expanded(node, 0)
        return node


def _construct_mapping(
    loader: _DuplicateKeyLoader, node: yaml.MappingNode, deep: bool = False
) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise YamlError(
                "strict decoding error: yaml: unmarshal errors:\n"
                f"  line {key_node.start_mark.line + 1}: key {go_quote(str(key))} already set in map"
            )
        seen.add(key)
    return loader.construct_mapping(node, deep)


_DuplicateKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    """An integer, or, beyond what Python converts (4300 digits), its text: go-yaml cannot hold
    such a number either (not as int64, not as a finite float) and keeps the plain scalar as a
    string, which the kubelet's decoder then judges."""
    try:
        return loader.construct_yaml_int(node)
    except ValueError:
        return str(node.value)


_DuplicateKeyLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def load_yaml(text: str) -> Any:
    """One YAML document with duplicate keys, excessive aliasing and deep nesting refused
    (:class:`YamlError` with go-yaml's wording)."""
    try:
        return yaml.load(text, Loader=_DuplicateKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:
        raise YamlError(f"yaml: exceeded max depth of {MAX_NESTING}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise YamlError(f"yaml: {where}{getattr(exc, 'problem', None) or exc}") from None

"""YAML documents as the kubelet's decoder takes them, and nothing a hostile file can abuse.

Duplicate keys are refused (the kubelet's strict decoding), and so are documents whose aliases
expand as go-yaml refuses ("billion laughs": :func:`allowed_alias_ratio`) or that nest deeper than
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


MAX_NESTING: Final = 1_000
# go-yaml's alias guard (decode.go): once more than 100 of more than 1,000 decoded nodes came
# through aliases, their share may be at most 99% up to 400,000 decoded nodes, falling linearly to
# 10% at 4,000,000. A document without aliases is never refused, whatever its size.
ALIAS_MIN_COUNT: Final = 100
ALIAS_MIN_DECODED: Final = 1_000
ALIAS_RATIO_LOW: Final = 400_000
ALIAS_RATIO_HIGH: Final = 4_000_000


def allowed_alias_ratio(decoded: int) -> float:
    """The share of decoded nodes that may come from alias expansion (go-yaml's rule)."""
    if decoded <= ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - ALIAS_RATIO_LOW) / (ALIAS_RATIO_HIGH - ALIAS_RATIO_LOW)


class _DuplicateKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses duplicate keys, as the kubelet's strict decoder does, and
    documents whose aliases expand as go-yaml refuses (:func:`allowed_alias_ratio`)."""

    def compose_document(self) -> Any:
        node = super().compose_document()
        if node is not None:
            _check_aliasing(node)
        return node


def _check_aliasing(root: Any) -> None:
    """Walk ``root`` as go-yaml decodes it, each alias expanded where it stands, counting the
    nodes decoded and those reached through an alias (a node met again: PyYAML shares an
    anchored node between its anchor and its aliases); refuse as go-yaml does, as soon as the
    share is too high, so a "billion laughs" stops within a few thousand nodes."""
    seen: set[int] = set()
    decoded = aliased = 0

    def visit(item: Any, depth: int, through_alias: bool) -> None:
        nonlocal decoded, aliased
        if depth > MAX_NESTING:
            raise YamlError(f"yaml: exceeded max depth of {MAX_NESTING}")
        through_alias = through_alias or id(item) in seen
        seen.add(id(item))
        decoded += 1
        aliased += through_alias
        if (
            aliased > ALIAS_MIN_COUNT
            and decoded > ALIAS_MIN_DECODED
            and aliased / decoded > allowed_alias_ratio(decoded)
        ):
            raise YamlError("yaml: document contains excessive aliasing")
        if isinstance(item, yaml.SequenceNode):
            for child in item.value:
                visit(child, depth + 1, through_alias)
        elif isinstance(item, yaml.MappingNode):
            for key, value in item.value:
                visit(key, depth + 1, through_alias)
                visit(value, depth + 1, through_alias)

    visit(root, 0, False)


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

"""The alias guard counts aliases as go-yaml does (decode.go's allowedAliasRatio), never the size
of the document: a config of any size without aliases is read, a "billion laughs" is refused."""

from __future__ import annotations

import pytest

from credprovider.tool.node.yamldoc import YamlError, allowed_alias_ratio, load_yaml


@pytest.mark.parametrize(
    ("decoded", "ratio"),
    [(1, 0.99), (400_000, 0.99), (2_200_000, 0.545), (4_000_000, 0.10), (9_000_000, 0.10)],
)
def test_the_allowed_share_of_aliased_nodes_is_go_yamls(decoded: int, ratio: float) -> None:
    assert allowed_alias_ratio(decoded) == pytest.approx(ratio)


def _laughs(levels: int) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        previous, name = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\n"


def _anchor_used(size: int, uses: int, plain: int = 0) -> str:
    anchor = "base: &base [" + ", ".join(f"v{i}" for i in range(size)) + "]\n"
    others = "plain: [" + ", ".join(f"p{i}" for i in range(plain)) + "]\n"
    return anchor + others + "uses:\n" + "".join("  - *base\n" for _ in range(uses))


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("a billion laughs", _laughs(9)),
        ("a smaller bomb", _laughs(5)),  # 9**5 expanded nodes from a few dozen
        ("one anchor used past 99%", _anchor_used(1000, 200)),
    ],
)
def test_excessive_aliasing_is_refused_as_go_yaml_refuses_it(name: str, text: str) -> None:
    with pytest.raises(YamlError, match=r"^yaml: document contains excessive aliasing$"):
        load_yaml(text)


def _last_value_size(document: dict[str, list[object]]) -> int:
    return len(list(document.values())[-1])


@pytest.mark.parametrize(
    ("name", "text", "size"),
    [
        ("100,000 items, no alias", "items:\n" + "".join(f"  - r{i}.example\n" for i in range(100_000)), 100_000),
        ("an anchor among plain nodes", _anchor_used(5, 500, plain=2000), 500),
        ("under 1,000 nodes, all aliased", _anchor_used(9, 90), 90),
    ],
)  # fmt: skip
def test_documents_go_yaml_reads_are_read(name: str, text: str, size: int) -> None:
    assert _last_value_size(load_yaml(text)) == size


def test_aliases_of_scalars_under_the_share_are_read() -> None:
    document = load_yaml("x: &x v\n" + "".join(f"k{i}: *x\n" for i in range(2000)))
    assert len(document) == 2001 and document["k1999"] == "v"


def test_the_walk_stops_at_once_on_a_bomb() -> None:
    """Twelve levels would expand to 9**12 (282 billion) nodes: refused long before."""
    with pytest.raises(YamlError, match="excessive aliasing"):
        load_yaml(_laughs(12))

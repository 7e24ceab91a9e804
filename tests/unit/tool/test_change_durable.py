"""The node-change engine's durable primitives (change/durable.py) where the crash-point suites
cannot reach them: a tree replaced by a swap at one instant, and in two steps where the kernel or
the file system cannot swap."""

from __future__ import annotations

from pathlib import Path

import pytest

from credprovider.tool.change import durable


def _tree(top: Path) -> dict[str, str]:
    return {str(p.relative_to(top)): p.read_text() for p in sorted(top.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("swaps", [True, False], ids=["swapped", "in two steps"])
def test_a_tree_is_replaced_whole_and_nothing_is_left_aside(
    tmp_path: Path, swaps: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, target = tmp_path / "new", tmp_path / "bin" / ".credprovider"
    (source / "_internal").mkdir(parents=True)
    (source / "credprovider").write_text("new\n")
    (source / "_internal" / "lib").write_text("new lib\n")
    (target / "_internal").mkdir(parents=True)
    (target / "credprovider").write_text("old\n")
    (target / "_internal" / "gone").write_text("old only\n")
    swapped: list[bool] = []
    real = durable.exchange
    if not swaps:  # as on a file system that refuses RENAME_EXCHANGE, or no renameat2
        monkeypatch.setattr(durable, "_SYS_RENAMEAT2", {})

    def recording(first: Path, second: Path) -> bool:
        swapped.append(real(first, second))
        return swapped[-1]

    monkeypatch.setattr(durable, "exchange", recording)
    durable.place_tree(source, target)
    assert _tree(target) == _tree(source)
    assert sorted(p.name for p in target.parent.iterdir()) == [".credprovider"]
    assert swapped == [swaps]


def test_a_swap_of_two_directories_is_one_call(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    (first / "x").mkdir(parents=True)
    (second / "y").mkdir(parents=True)
    assert durable.exchange(first, second)
    assert [p.name for p in first.iterdir()] == ["y"] and [p.name for p in second.iterdir()] == [
        "x"
    ]
    with pytest.raises(FileNotFoundError):
        durable.exchange(tmp_path / "missing", first)

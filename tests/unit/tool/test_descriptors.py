"""Each cloud is described once, in its folder (credprovider/<cloud>/descriptor.py), and the shared
code knows clouds only through ``entry.PLUGIN_PACKAGES`` and those descriptors."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from credprovider.entry import PLUGIN_PACKAGES
from credprovider.runtime.imageref import parse_image
from credprovider.runtime.matching import urls_match
from credprovider.tool.catalog import PLUGINS
from release.bundle import REPO

SHARED = sorted(
    path
    for path in [
        *(REPO / "credprovider").glob("*.py"),
        *(REPO / "credprovider" / "runtime").glob("*.py"),
        *(REPO / "credprovider" / "tool").rglob("*.py"),
    ]
    if path.name != "entry.py"
)
CLOUD_PACKAGES = set(PLUGIN_PACKAGES.values())


@pytest.mark.parametrize("key", list(PLUGINS))
def test_a_descriptor_covers_its_own_samples_and_only_it_claims_them(key: str) -> None:
    plugin = PLUGINS[key]
    assert PLUGIN_PACKAGES[plugin.name].endswith(f".{key}")
    for form, image in plugin.sample_images.items():
        assert any(urls_match(pattern, image) for pattern in plugin.match_images), form
        ref = parse_image(image)
        assert plugin.explain(ref.host, ref.registry).recognized, form
        others = [
            k
            for k, other in PLUGINS.items()
            if k != key and other.explain(ref.host, ref.registry).recognized
        ]
        assert others == [], form


@pytest.mark.parametrize(("name", "package"), PLUGIN_PACKAGES.items())
def test_the_table_names_each_package_by_its_own_plugin_name(name: str, package: str) -> None:
    """entry.py's table (read before any package is imported) agrees with the one definition of
    the name in the package, which its main, provider and descriptor import."""
    assert name == importlib.import_module(package).PLUGIN_NAME
    assert importlib.import_module(f"{package}.main").SPEC.name == name
    assert importlib.import_module(f"{package}.descriptor").DESCRIPTOR.name == name


def test_the_node_file_a_plugin_takes_is_its_first_shipped_arg() -> None:
    for plugin in PLUGINS.values():
        if plugin.node_file_arg is not None:
            assert plugin.args[:1] == (plugin.node_file_arg,)


def _string_constants(tree: ast.AST) -> list[str]:
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.name)
def test_shared_code_names_no_cloud(path: Path) -> None:
    """No key, plugin name, in-tree cloud name or cloud package in code outside the cloud folders
    (entry.py holds the one table; docstrings and comments may give examples)."""
    tree = ast.parse(path.read_text())
    words = {
        name
        for plugin in PLUGINS.values()
        for name in (plugin.key, plugin.name, *plugin.in_tree_clouds)
    }
    named = [
        text
        for text in _string_constants(tree)
        if text in words or any(p.name in text for p in PLUGINS.values())
    ]
    assert named == []
    imported = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and any(node.module == pkg or node.module.startswith(f"{pkg}.") for pkg in CLOUD_PACKAGES)
    ]
    assert imported == []

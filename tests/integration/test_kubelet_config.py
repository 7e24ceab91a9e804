"""credprovider's config reading and validation agree with the real kubelet code, message for message.

Every case is decided twice: by the Go harness (``RegisterCredentialProviderPlugins`` in
k8s.io/kubernetes, the kubelet's start-up path) and by ``credprovider.tool.kubeconfig.validate.load_config``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from credprovider.tool.kubeconfig.model import ConfigError
from credprovider.tool.kubeconfig.validate import load_config
from tests.helpers import CONFIG_DIR, CONFIG_EXAMPLES
from tests.helpers_kubelet import validate_with_kubelet
from tests.integration.kubelet_config_cases import CASES, OK, P

EXAMPLES = CONFIG_EXAMPLES


def ours(path: Path) -> dict[str, object]:
    try:
        load_config(str(path))
    except ConfigError as exc:
        return {"valid": False, "error": str(exc)}
    return {"valid": True}


@pytest.mark.parametrize("name", sorted(CASES))
def test_validation_agrees_with_the_kubelet(
    kubelet_harness: Path, tmp_path: Path, name: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CASES[name])
    assert ours(path) == validate_with_kubelet(kubelet_harness, path)


DIRECTORY_CASES = {
    "merged in lexicographic order": {
        "20-b.yaml": P + "providers:\n" + OK.replace("name: a", "name: b"),
        "10-a.json.yml": P + "providers:\n" + OK,
        "notes.txt": "ignored",
    },
    "duplicate across files": {"a.yaml": P + "providers:\n" + OK, "b.yml": P + "providers:\n" + OK},
    "no config files": {"README.md": "nothing", "sub.yaml/": ""},
    "one bad file": {"a.yaml": P + "providers:\n" + OK, "b.json": '{"kind": 1}'},
}


@pytest.mark.parametrize("name", sorted(DIRECTORY_CASES))
def test_directory_configs_agree_with_the_kubelet(
    kubelet_harness: Path, tmp_path: Path, name: str
) -> None:
    for file_name, text in DIRECTORY_CASES[name].items():
        if file_name.endswith("/"):
            (tmp_path / file_name).mkdir()
        else:
            (tmp_path / file_name).write_text(text)
    assert ours(tmp_path) == validate_with_kubelet(kubelet_harness, tmp_path)


def test_merged_directory_keeps_file_order(tmp_path: Path) -> None:
    for file_name, text in DIRECTORY_CASES["merged in lexicographic order"].items():
        (tmp_path / file_name).write_text(text)
    assert [p.name for p in load_config(str(tmp_path)).providers] == ["a", "b"]


def test_missing_path_agrees_with_the_kubelet(kubelet_harness: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert ours(missing) == validate_with_kubelet(kubelet_harness, missing)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_config_examples_load_in_the_real_kubelet_code(
    kubelet_harness: Path, example: Path
) -> None:
    assert validate_with_kubelet(kubelet_harness, example) == {"valid": True}
    assert ours(example) == {"valid": True}


def test_the_config_directory_loads_in_the_real_kubelet_code(kubelet_harness: Path) -> None:
    assert validate_with_kubelet(kubelet_harness, CONFIG_DIR) == {"valid": True}
    assert ours(CONFIG_DIR) == {"valid": True}

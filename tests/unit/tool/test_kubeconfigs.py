"""$KUBECONFIG's list of files merged as client-go's loader merges them
(credprovider/tool/cluster/kubeconfigs.py); before, the list was read as one path that did not
exist."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from credprovider.tool.cluster.kubeconfigs import KubeconfigError, read_kubeconfigs


def write(path: Path, **document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "clusters": [], **document}))
    return path


def cluster(name: str, **body: str) -> dict[str, Any]:
    return {"name": name, "cluster": body}


def test_the_first_file_that_names_a_thing_wins(tmp_path: Path) -> None:
    (tmp_path / "a" / "ca.crt").parent.mkdir()
    (tmp_path / "a" / "ca.crt").write_text("x")
    (tmp_path / "b" / "bin").mkdir(parents=True)
    a = write(tmp_path / "a" / "config",
              clusters=[cluster("prod", server="https://a", **{"certificate-authority": "ca.crt"})],
              contexts=[{"name": "prod", "context": {"cluster": "prod", "user": "u"}}])  # fmt: skip
    b = write(tmp_path / "b" / "config",
              clusters=[cluster("prod", server="https://b"), cluster("dev", server="https://dev")],
              users=[{"name": "me", "user": {"exec": {"command": "bin/login"}}}],
              **{"current-context": "prod"})  # fmt: skip
    merged = read_kubeconfigs(f"{tmp_path / 'missing'}::{a}:{b}:{a}")
    assert merged["clusters"] == [
        cluster("prod", server="https://a", **{"certificate-authority": str(a.parent / "ca.crt")}),
        cluster("dev", server="https://dev"),
    ]  # fmt: skip
    assert merged["current-context"] == "prod"  # b's: a sets none
    assert merged["users"][0]["user"]["exec"]["command"] == str(tmp_path / "b" / "bin" / "login")


def test_a_list_of_missing_files_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match="none of the kubeconfigs KUBECONFIG lists exists"):
        read_kubeconfigs(f"{tmp_path / 'x'}:{tmp_path / 'y'}")
    bad = tmp_path / "bad"
    bad.write_text("clusters: [")
    with pytest.raises(KubeconfigError, match=f"the kubeconfig {bad} is not YAML"):
        read_kubeconfigs(f"{tmp_path / 'x'}:{bad}")

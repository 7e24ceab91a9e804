"""The flush protocol of a node change (``credprovider/tool/change/durable.py``), read from what
the kernel was asked: each run is traced (``strace -f -y``) and, for every rename into the node,
the renamed file's data was flushed (``fsync``) before the rename and its directory after it. A
power cut then leaves the old file or the new one under each name, never an empty one.

Covered: ``agent apply`` and ``agent uninstall`` on a kubeadm node, ``install`` and
``migrate --write``. A new writer that skips the protocol fails here without a new test."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from credprovider.tool.change.durable import TEMPORARY_SUFFIX
from release.bundle import REPO
from tests.helpers import private
from tests.integration.cli.conftest import fake_bundle
from tests.reliability.agentnode import agent_node

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")

_CALL = re.compile(r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\((.*)\)\s+=\s+(-?\d+)")
_PATH = re.compile(r'"((?:[^"\\]|\\.)*)"')
_FD_PATH = re.compile(r"^\d+<([^>]*)>")


def traced(tmp: Path, *args: str) -> list[tuple[str, list[str]]]:
    """``credprovider ARGS`` from source under strace: each successful rename and fsync, in order,
    with the paths they name."""
    log = tmp / "strace.log"
    done = subprocess.run(  # in namespaces of its own: its /run (the node's lock) too
        private(["strace", "-f", "-y", "-qq", "-s", "4096", "-o", str(log),
                 "-e", "trace=fsync,fdatasync,rename,renameat,renameat2",
                 sys.executable, "-m", "credprovider", "credprovider", *args]),
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    calls = []
    for line in log.read_text().splitlines():
        match = _CALL.match(line)
        if match is None or match.group(3).startswith("-"):
            continue
        name, arguments = match.group(1), match.group(2)
        if name in ("fsync", "fdatasync"):
            found = _FD_PATH.match(arguments)
            calls.append((name, [found.group(1)] if found else []))
        else:
            calls.append(("rename", _PATH.findall(arguments)))
    return calls


def violations(calls: list[tuple[str, list[str]]], under: Path) -> list[str]:
    """Every rename into ``under`` whose source was not flushed before it, or whose directory was
    not flushed after it."""
    found = []
    for index, (name, paths) in enumerate(calls):
        if name != "rename" or len(paths) < 2 or not paths[1].startswith(str(under)):
            continue
        source, target = paths[0], paths[1]
        before = {p[0] for n, p in calls[:index] if n != "rename" and p}
        after = {p[0] for n, p in calls[index + 1 :] if n != "rename" and p}
        removal = target.endswith(TEMPORARY_SUFFIX)  # a tree renamed aside to be removed
        moved = removal or os.path.isdir(target) or os.path.islink(target)  # no data of its own
        if not moved and source not in before:
            found.append(f"{target}: its data was not flushed before the rename")
        if os.path.dirname(target) not in after:
            found.append(f"{target}: its directory was not flushed after the rename")
    return found


def test_agent_apply_and_uninstall_flush_every_rename(tmp_path: Path) -> None:
    with agent_node(tmp_path) as (root, bundle, common):
        applied = traced(tmp_path, "agent", "apply", "--bundle", str(bundle), "--providers",
                         "aws", *common)  # fmt: skip
        renamed = [p[1] for n, p in applied if n == "rename" and len(p) > 1]
        assert any(p.endswith("/etc/default/kubelet") for p in renamed), renamed
        assert violations(applied, root) == []
        undone = traced(tmp_path, "agent", "uninstall", *common)
    assert any(n == "rename" for n, _ in undone)
    assert violations(undone, root) == []


def test_install_and_migrate_flush_every_rename(tmp_path: Path) -> None:
    node = tmp_path / "node"
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0")
    installed = traced(tmp_path, "install", "--bin-dir", str(node / "bin"), "--config-out",
                       str(node / "config.yaml"), "--providers", "aws", "--target", str(bundle))  # fmt: skip
    assert sum(n == "rename" for n, _ in installed) >= 2
    assert violations(installed, node) == []
    flags = node / "kubelet-flags.env"
    flags.write_text('KUBELET_KUBEADM_ARGS="--cloud-provider=aws --v=2"\n')
    migrated = traced(tmp_path, "migrate", "--kubelet-flags-file", str(flags), "--config-out",
                      str(node / "migrated.yaml"), "--bin-dir", str(node / "bin"), "--write")  # fmt: skip
    assert any(n == "rename" and p[1] == str(flags) for n, p in migrated if len(p) > 1), migrated
    assert violations(migrated, node) == []
    # the record of the last change (#63), and its undo: flushed the same way
    assert any(
        n == "rename" and p[1].endswith("credprovider-undo") for n, p in migrated if len(p) > 1
    )
    undone = traced(tmp_path, "undo", "--config", str(node / "migrated.yaml"), "--force")
    assert any(n == "rename" and p[1] == str(flags) for n, p in undone if len(p) > 1), undone
    assert violations(undone, node) == []

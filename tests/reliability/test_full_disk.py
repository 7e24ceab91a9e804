"""A node whose disk is full (issue #46): ``agent apply`` fails with one line, never a traceback,
and leaves a node the next run finishes once there is room; uninstall then restores it byte for
byte. The node is a small tmpfs of its own (a mount namespace of the test's),
filled to a few KiB."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from emulators.http import FakeResponse, serve
from tests.helpers import node_script
from tests.integration.cli.conftest import fake_bundle
from tests.unit.tool.test_agent_plan import KUBEADM_NODE

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a tmpfs of its own needs root")
TOOL = f"{shlex.quote(sys.executable)} -m credprovider credprovider"
SNAPSHOT = (
    "import json, os, sys\n"
    "root = sys.argv[1]\nfound = {}\n"
    "for d, dirs, files in os.walk(root):\n"
    "    dirs[:] = [x for x in dirs if not (d == root and x in ('run', 'filler'))]\n"
    "    for n in dirs + files:\n"
    "        p = os.path.join(d, n)\n"
    "        found[p[len(root):]] = os.readlink(p) if os.path.islink(p) else "
    "('dir' if os.path.isdir(p) else open(p, 'rb').read().decode('latin-1'))\n"
    "print(json.dumps(found))\n"
)


def in_its_own_tmpfs(script: str, out: Path) -> dict[str, str]:
    """``script`` run by sh in a mount namespace of the test's (its tmpfs gone with it), the
    tool from source: what it left in ``out``, by file name."""
    done = node_script(script, 300)
    assert done.returncode == 0, done.stderr
    return {p.name: p.read_text() for p in out.iterdir()}


def test_a_full_disk_fails_in_one_line_and_the_next_run_finishes(tmp_path: Path) -> None:
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "snapshot.py").write_text(SNAPSHOT)
    layout = {**KUBEADM_NODE, "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=--v=2\n"}
    with serve(lambda request: FakeResponse.text("ok")) as kubelet:
        node = tmp_path / "node"  # a tmpfs of its own, mounted in the namespace only
        node.mkdir()
        agent = (
            f"{TOOL} agent apply --root {node} --bundle {bundle} --providers aws "
            f"--restart-command 'true {{unit}}' --healthz {kubelet.url}/healthz "
            "--health-timeout 2"
        )
        files = "\n".join(
            f"mkdir -p {node}{os.path.dirname(p)} && printf %s {shlex.quote(t)} > {node}{p}"
            for p, t in layout.items()
        )
        script = f"""
mount -t tmpfs -o size=256k,mode=0755 tmpfs {node}
{files}
python3 {tmp_path}/snapshot.py {node} > {out}/before.json
# the disk full but for 8 KiB: the bundle's copy does not fit
dd if=/dev/zero of={node}/filler bs=4k count=1000 2>/dev/null || true
rm -f {node}/filler; avail=$(df -k --output=avail {node} | tail -1)
dd if=/dev/zero of={node}/filler bs=1k count=$((avail - 8)) 2>/dev/null
{agent} > {out}/full.out 2> {out}/full.err; echo $? > {out}/full.rc
rm {node}/filler
{agent} > {out}/again.out 2> {out}/again.err; echo $? > {out}/again.rc
{TOOL} agent uninstall --root {node} --restart-command 'true {{unit}}' \
  --healthz {kubelet.url}/healthz > {out}/undo.out 2> {out}/undo.err; echo $? > {out}/undo.rc
python3 {tmp_path}/snapshot.py {node} > {out}/after.json
"""
        said = in_its_own_tmpfs(script, out)
    assert said["full.rc"] == "1\n", said
    [line] = said["full.err"].splitlines()
    assert line.startswith("credprovider agent apply: ") and "No space left on device" in line
    assert "Traceback" not in said["full.err"] + said["again.err"] + said["undo.err"]
    assert said["again.rc"] == "0\n" and said["again.out"].startswith("installed"), said
    assert said["undo.rc"] == "0\n", said
    assert json.loads(said["after.json"]) == json.loads(said["before.json"])


def test_install_copy_on_a_full_disk_leaves_no_partial_copy(tmp_path: Path) -> None:
    """#62: ``credprovider install --copy`` on a full disk left its partial copy, and the disk
    full. It fails in one line naming the file it could not write (no longer shutil's reprs of
    every file after it, each failed in turn), and the node is as it was (change/abort.py): the
    copy, the directories it made and its journal gone, the space back."""
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    (bundle / "_internal" / "payload").write_bytes(os.urandom(96 * 1024))  # does not fit
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "snapshot.py").write_text(SNAPSHOT)
    node = tmp_path / "node"
    node.mkdir()
    install = (
        f"{TOOL} install --copy --target {bundle}/credprovider --providers aws "
        f"--bin-dir {node}/opt/credprovider/bin --config-out {node}/etc/credprovider.yaml"
    )
    script = f"""
mount -t tmpfs -o size=256k,mode=0755 tmpfs {node}
mkdir -p {node}/opt {node}/etc
python3 {tmp_path}/snapshot.py {node} > {out}/before.json
avail=$(df -k --output=avail {node} | tail -1)
dd if=/dev/zero of={node}/filler bs=1k count=$((avail - 32)) 2>/dev/null
df -k --output=avail {node} | tail -1 > {out}/avail.before
{install} > {out}/full.out 2> {out}/full.err; echo $? > {out}/full.rc
df -k --output=avail {node} | tail -1 > {out}/avail.after
python3 {tmp_path}/snapshot.py {node} > {out}/after.json
"""
    said = in_its_own_tmpfs(script, out)
    assert said["full.rc"] != "0\n", said
    assert "Traceback" not in said["full.err"], said["full.err"]
    [line] = said["full.err"].splitlines()
    assert f"cannot write {node}/opt/credprovider/" in line, line
    assert line.endswith(
        f": No space left on device (make room on its file system: df -h {node}/opt): nothing was "
        "changed (it had changed no path yet)"
    ), line
    assert "->" not in line and "Errno" not in line, line
    assert int(said["avail.after"]) >= int(said["avail.before"]), said
    left = set(json.loads(said["after.json"])) - set(json.loads(said["before.json"]))
    assert left == {"/filler"}, left

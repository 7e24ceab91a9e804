"""Red team, node trust (docs/security.md): root's tool, run with no paths, meets processes named
kubelet that are not the node's kubelet. Each is one row of a table: another user's (started
before or after the real one), a root kubelet in another mount namespace, one from a binary others
may write or another user owns. For each row and each command that finds the kubelet itself
(doctor, get, validate, install), the untrusted process's plugin is a canary: it must never run,
its paths must never be written, and the real kubelet must be the one chosen (or none, where
there is none). A kubelet whose environment holds the loader's and interpreters' variables
(LD_PRELOAD, PYTHONPATH, GCONV_PATH) hands its plugins its environment without them; a bin dir
any user can write to is reported and nothing in it is run.

Every node is a pid and mount namespace of the test's own (``trustnode``): no other run ever sees
these kubelets. Through the bundle when it is built (make test, CI), else from source."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from release.bundle import BUNDLE_DIR, REPO
from tests.helpers import bundle_required

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="pid namespaces and other users need root"
)

NOBODY = 65534
IMAGE = "registry.example.com/team/app"
RESPONSE = {
    "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
    "kind": "CredentialProviderResponse",
    "cacheKeyType": "Registry",
    "auth": {"registry.example.com": {"username": "u", "password": "p"}},
}
# What every kubelet here runs (it only sleeps): the system's python, which any user may execute.
SLEEPER = os.path.realpath(shutil.which("python3", path="/usr/bin:/bin") or sys.executable)
HOSTILE_ENV = {"LD_PRELOAD": "/nonexistent/evil.so", "PYTHONPATH": "/nonexistent/evil",
               "GCONV_PATH": "/nonexistent/gconv", "LD_LIBRARY_PATH": "/nonexistent/lib"}  # fmt: skip


def tool() -> list[str]:
    if (BUNDLE_DIR / "credprovider").exists():
        return [str(BUNDLE_DIR / "credprovider")]
    if bundle_required():
        pytest.fail(f"the bundle {BUNDLE_DIR} is not built: run make build")
    return [sys.executable, "-m", "credprovider", "credprovider"]


@dataclass
class Node:
    """A plugin set-up: its config and bin dir, whose plugin records each run beside itself."""

    home: Path

    @property
    def config(self) -> Path:
        return self.home / "providers.json"

    @property
    def bin_dir(self) -> Path:
        return self.home / "bin"

    @property
    def ran(self) -> Path:
        return self.bin_dir / "test-plugin.ran"

    def flags(self) -> list[str]:
        return [f"--image-credential-provider-config={self.config}",
                f"--image-credential-provider-bin-dir={self.bin_dir}"]  # fmt: skip

    def files(self) -> dict[str, bytes]:
        return {str(p): p.read_bytes() for p in sorted(self.home.rglob("*")) if p.is_file()}


def make_node(home: Path, owner: int = 0, bin_mode: int = 0o755) -> Node:
    node = Node(home)
    node.bin_dir.mkdir(parents=True)
    node.config.write_text(json.dumps({
        "apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig",
        "providers": [{"name": "test-plugin", "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
                       "defaultCacheDuration": "1h", "matchImages": ["registry.example.com"]}],
    }))  # fmt: skip
    plugin = node.bin_dir / "test-plugin"
    plugin.write_text(
        f"#!/bin/sh\nenv > \"$0.ran\"\ncat >/dev/null\necho '{json.dumps(RESPONSE)}'\n"
    )
    plugin.chmod(0o755)
    for path in (home, node.bin_dir, node.config, plugin):
        os.chown(path, owner, owner)
    node.bin_dir.chmod(bin_mode)
    home.chmod(0o755)
    return node


def run_node(tmp: Path, kubelets: list[dict[str, Any]], *args: str) -> dict[str, Any]:
    """``credprovider ARGS`` in a pid and mount namespace holding ``kubelets``, with a ``/run`` of
    its own (install's node lock never lands in the host's)."""
    spec = tmp / "spec.json"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp),
           "PYTHONPATH": str(REPO)}  # fmt: skip
    spec.write_text(json.dumps({"kubelets": kubelets, "command": [*tool(), *args], "env": env}))
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--propagation", "private",
         "--mount-proc", "sh", "-c", 'mount -t tmpfs -o mode=0755 credprovider-run /run && exec "$@"',
         "sh", sys.executable, "-m", "tests.reliability.redteam.trustnode", str(spec)],
        capture_output=True, text=True, timeout=200, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert "Traceback" not in result["stderr"], result["stderr"]
    return result


def kubelet(node: Node, binary: str = SLEEPER, **more: Any) -> dict[str, Any]:
    env = {"PATH": "/usr/bin:/bin", "NODE_SETTING": "kept", **more.pop("env", {})}
    return {"binary": binary, "flags": node.flags(), "env": env, **more}


def writable_binary(tmp: Path) -> str:
    copy = tmp / "wbin" / "kubelet-binary"
    copy.parent.mkdir()
    shutil.copy2(SLEEPER, copy)
    copy.chmod(0o757)  # root's, but any user may rewrite it
    return str(copy)


def others_binary(tmp: Path) -> str:
    copy = tmp / "obin" / "kubelet-binary"
    copy.parent.mkdir()
    shutil.copy2(SLEEPER, copy)
    os.chown(copy, NOBODY, NOBODY)
    return str(copy)


# Each row: the untrusted process, whether it is started before the real kubelet, and what
# discovery must say of it.
ROWS = {
    "another user's, lower pid": (lambda t, n: kubelet(n, uid=NOBODY), True, "not root"),
    "another user's, higher pid": (lambda t, n: kubelet(n, uid=NOBODY), False, "not root"),
    "another user's, with LD_PRELOAD": (
        lambda t, n: kubelet(n, uid=NOBODY, env=HOSTILE_ENV), True, "not root"),
    "root, another mount namespace": (
        lambda t, n: kubelet(n, other_mount_namespace=True), True, "another mount namespace"),
    "root, a binary others may write": (
        lambda t, n: kubelet(n, binary=writable_binary(t)), True, "writable by others"),
    "root, a binary another user owns": (
        lambda t, n: kubelet(n, binary=others_binary(t)), True, "owned by uid 65534"),
}  # fmt: skip
COMMANDS = {
    "doctor": ("doctor", "--json", "--image", IMAGE),
    "get": ("get", IMAGE, "--json"),
    "validate": ("validate", "--json"),
    "install": ("install", "--providers", "aws"),
}


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("row", ROWS)
def test_a_process_that_is_not_the_nodes_kubelet_is_never_acted_on(
    tmp_path: Path, row: str, command: str
) -> None:
    tmp_path.chmod(0o755)
    make, first, said = ROWS[row]
    decoy_owner = NOBODY if "another user" in row else 0
    decoy = make_node(tmp_path / "decoy", owner=decoy_owner)
    real = make_node(tmp_path / "real")
    before = decoy.files()
    untrusted = make(tmp_path, decoy)
    genuine = kubelet(real)
    order = [untrusted, genuine] if first else [genuine, untrusted]
    result = run_node(tmp_path, order, *COMMANDS[command])
    decoy_pid = result["pids"][order.index(untrusted)]
    real_pid = result["pids"][order.index(genuine)]
    assert not decoy.ran.exists(), f"the untrusted kubelet's plugin ran: {result['stderr']}"
    assert decoy.files() == before  # nothing of the untrusted one's paths was written
    assert str(decoy.config) not in result["stderr"] + result["stdout"].replace("\\/", "/")
    ignored = f"process {decoy_pid} is named kubelet but is not taken for this node's kubelet"
    if command == "doctor":
        report = json.loads(result["stdout"])
        assert report["kubeletPid"] == real_pid
        [line] = [c["message"] for c in report["checks"] if ignored in c["message"]]
        assert said in line
        assert real.ran.exists()  # the dry run ran the real kubelet's plugin
    else:
        assert ignored in result["stderr"] and said in result["stderr"], result["stderr"]
        assert f"{real.config} (running kubelet (pid {real_pid}))" in result["stderr"]
    if command == "get":
        assert real.ran.exists() and json.loads(result["stdout"])["providers"][0]["matched"]


def test_a_node_with_only_untrusted_kubelets_has_none(tmp_path: Path) -> None:
    """No trusted kubelet at all: none is taken (the files are read instead), and each process
    is reported."""
    tmp_path.chmod(0o755)
    decoy = make_node(tmp_path / "decoy", owner=NOBODY)
    result = run_node(tmp_path, [kubelet(decoy, uid=NOBODY)], "doctor", "--json", "--offline")
    report = json.loads(result["stdout"])
    assert report["kubeletPid"] is None
    assert any("not taken for this node's kubelet" in c["message"] for c in report["checks"])
    assert not decoy.ran.exists()


def test_plugins_get_the_kubelets_environment_without_the_loaders_or_interpreters(
    tmp_path: Path,
) -> None:
    tmp_path.chmod(0o755)
    real = make_node(tmp_path / "real")
    doctor = ("doctor", "--json", "--image", IMAGE)  # its dry run: in the kubelet's environment
    result = run_node(tmp_path, [kubelet(real, env=HOSTILE_ENV)], *doctor)
    assert json.loads(result["stdout"])["kubeletPid"] == result["pids"][0], result["stderr"]
    seen = dict(line.split("=", 1) for line in real.ran.read_text().splitlines() if "=" in line)
    assert seen.get("NODE_SETTING") == "kept"  # the kubelet's environment is inherited
    assert not set(HOSTILE_ENV) & set(seen), sorted(seen)


@pytest.mark.parametrize("command", ["get", "validate", "doctor"])
def test_a_bin_dir_any_user_may_write_is_reported_and_not_run(tmp_path: Path, command: str) -> None:
    tmp_path.chmod(0o755)
    real = make_node(tmp_path / "real", bin_mode=0o777)
    assert stat.S_IMODE(real.bin_dir.stat().st_mode) == 0o777
    args = {"get": ("get", IMAGE, "--json"), "validate": ("validate", "--json"),
            "doctor": ("doctor", "--json", "--image", IMAGE)}[command]  # fmt: skip
    result = run_node(tmp_path, [kubelet(real)], *args)
    assert not real.ran.exists()
    said = result["stdout"] + result["stderr"]
    assert f"{real.bin_dir}/test-plugin was not run: {real.bin_dir} is writable by others" in said


@pytest.mark.parametrize("command", ["get", "validate", "doctor"])
@pytest.mark.parametrize("how", ["writable by others", "another user's"])
def test_a_plugin_is_never_run_with_the_env_of_a_config_others_could_write(
    tmp_path: Path, command: str, how: str
) -> None:
    """The config names the plugin's env and args: from a file another user could write, an
    entry such as ``BASH_ENV`` or ``AWS_CONFIG_FILE`` (a ``credential_process``) runs their code
    in a trusted plugin, as root. Reported, and the plugin not run."""
    tmp_path.chmod(0o755)
    real = make_node(tmp_path / "real")
    if how == "writable by others":
        real.config.chmod(0o646)
    else:
        os.chown(real.config, NOBODY, NOBODY)
    args = {"get": ("get", IMAGE, "--json"), "validate": ("validate", "--json"),
            "doctor": ("doctor", "--json", "--image", IMAGE)}[command]  # fmt: skip
    result = run_node(tmp_path, [kubelet(real)], *args)
    assert not real.ran.exists()
    said = result["stdout"] + result["stderr"]
    problem = "is writable by others" if how == "writable by others" else "is owned by uid 65534"
    assert f"not run with the env and args of {real.config}: {real.config} {problem}" in said
    # made root's alone, the same config runs
    real.config.chmod(0o644)
    os.chown(real.config, 0, 0)
    run_node(tmp_path, [kubelet(real)], *args)
    assert real.ran.exists()


def test_a_command_line_past_1_mib_is_read_whole(tmp_path: Path) -> None:
    """Flags after more than a MiB of others (each argument at most 128 KiB, the kernel's cap)."""
    tmp_path.chmod(0o755)
    real = make_node(tmp_path / "real")
    filler = [f"--node-labels=x{index}=" + "y" * (120 << 10) for index in range(10)]
    genuine = kubelet(real)
    genuine["flags"] = [*filler, *genuine["flags"]]
    result = run_node(tmp_path, [genuine], "doctor", "--json", "--offline")
    report = json.loads(result["stdout"])
    assert (report["config"], report["binDir"]) == (str(real.config), str(real.bin_dir))


def test_a_path_that_is_not_utf8_names_its_file(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    home = Path(os.fsdecode(bytes(tmp_path) + b"/node-\xff"))
    real = make_node(home)
    result = run_node(tmp_path, [kubelet(real)], "doctor", "--json", "--offline")
    report = json.loads(result["stdout"])
    assert report["config"] == str(real.config)
    decoded = [c["message"] for c in report["checks"] if c["area"] == "config"]
    assert any("decodes as the kubelet decodes it: test-plugin" in m for m in decoded), decoded
    assert "\\xff" in result["stderr"] + "".join(decoded) or "\\udcff" in result["stdout"]

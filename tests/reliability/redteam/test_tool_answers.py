"""Red team, what the tool reads on a node (docs/security.md): the kubelet's read-only port, the
runtime's listing, the kubelet's log, the agent's state, settings and node files, and an install
target that is not a file. Each row is one hostile input; every run is under an address-space
limit (``prlimit --as``), must end within its documented time with exit 0, 1 or 2 and no
traceback, and must say what it could not use in a line.

Through the bundle when it is built (make test, CI), else from source."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from release.bundle import BUNDLE_DIR, REPO
from tests.helpers import config_file, fake_kubelet, private
from tests.integration.cli.conftest import fake_bundle
from tests.reliability.redteam.rawserver import Answer, drip, endless_continue, once, raw_server
from tests.unit.tool.test_agent_apply import kubeadm, tree

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and devices need root")

ADDRESS_SPACE = (
    1 << 30
)  # the tool (YAML, pydantic, lightkube) and room; an unbounded read passes it
NESTING = 100_000
DEEP_JSON = b'{"items":' + b"[" * NESTING + b"]" * NESTING + b"}"
# 15 MiB of one metric's label that never closes: a backtracking pattern takes minutes on it.
METRIC_BOMB = b"kubelet_credential_provider_config_info{" + b'hash="' * (15 << 20 // 6)


def tool() -> list[str]:
    if (BUNDLE_DIR / "credprovider").exists():
        return [str(BUNDLE_DIR / "credprovider")]
    return [sys.executable, "-m", "credprovider", "credprovider"]


def bounded(*args: str, within: float, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``credprovider ARGS`` under the address-space limit, in the namespaces of this test's fake
    kubelet (if any): it must end within ``within`` seconds, with no traceback."""
    started = time.monotonic()
    done = subprocess.run(
        private(["prlimit", f"--as={ADDRESS_SPACE}", "--", *tool(), *args]),
        capture_output=True, text=True, timeout=within + 60, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )  # fmt: skip
    took = time.monotonic() - started
    assert took < within, f"took {took:.1f}s: {done.stderr[-500:]}"
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr[-2000:]
    assert done.returncode in (0, 1, 2), (done.returncode, done.stderr[-500:])
    return done.returncode, done.stdout, done.stderr


# -- doctor: the kubelet's read-only port, crictl, the log ------------------------------------------
PORT_ANSWERS: dict[str, Answer] = {
    "a 15 MiB metric label that never closes": once("200 OK", METRIC_BOMB, "text/plain"),
    "a drip-fed answer": drip(b"x"),
    "100 Continue without end": endless_continue,
    "JSON nested 100,000 deep": once("200 OK", DEEP_JSON),
    "an answer cut short": lambda _, send: send(
        b'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{"items": ['
    ),
}


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Callable[..., object]]:
    """Start a fake kubelet whose read-only port is ``url`` (its config and bin dir ours)."""
    started = []

    def start(
        url: str = "http://127.0.0.1:9",
        stderr: Path | None = None,
        env: dict[str, str] | None = None,
        provider: dict[str, object] | None = None,
    ) -> object:
        port = url.rsplit(":", 1)[1]
        kubelet_config = tmp_path / "kubelet.yaml"
        kubelet_config.write_text(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            f"readOnlyPort: {port}\naddress: 127.0.0.1\n"
        )
        (tmp_path / "bin").mkdir(exist_ok=True)
        entry = provider or {"name": "foreign-plugin", "matchImages": ["x.example"]}
        config = config_file(tmp_path, {**entry, "defaultCacheDuration": "1h",
                                        "apiVersion": "credentialprovider.kubelet.k8s.io/v1"})  # fmt: skip
        kubelet = fake_kubelet(
            [f"--config={kubelet_config}", f"--image-credential-provider-config={config}",
             f"--image-credential-provider-bin-dir={tmp_path / 'bin'}"],
            {"PATH": "/usr/bin:/bin", **(env or {})}, stderr=stderr,
        )  # fmt: skip
        started.append(kubelet)
        return kubelet

    yield start
    for kubelet in started:
        kubelet.kill()  # type: ignore[attr-defined]
        kubelet.wait()  # type: ignore[attr-defined]


@pytest.mark.parametrize("row", PORT_ANSWERS)
def test_doctor_ends_on_a_hostile_read_only_port(node: Callable[..., object], row: str) -> None:
    with raw_server(PORT_ANSWERS[row]) as url:
        node(url)
        # the read-only port is asked twice (/metrics, /pods), each bounded by 3s as a whole
        _code, out, _err = bounded("doctor", "--json", within=25)
    report = json.loads(out)
    said = [c["message"] for c in report["checks"] if c["area"] == "config"]
    assert any("the config the kubelet loaded is not known" in m or "no " in m for m in said) or (
        row == "JSON nested 100,000 deep"
    ), said


@pytest.mark.parametrize("row", ["a drip-fed answer", "100 Continue without end"])
def test_doctor_ends_on_a_hostile_identity_endpoint(
    node: Callable[..., object], tmp_path: Path, row: str
) -> None:
    """The Google plugin's identity (the metadata server the kubelet's environment names) probed
    within its 2s, as a whole exchange."""
    with raw_server(PORT_ANSWERS[row]) as url:
        node(env={"GCE_METADATA_HOST": url.removeprefix("http://")},
             provider={"name": "auth-provider-gcp", "matchImages": ["gcr.io"],
                       "args": ["get-credentials"]})  # fmt: skip
        _, out, _ = bounded("doctor", "--json", within=25)
    said = [c for c in json.loads(out)["checks"] if c["area"] == "identity"]
    assert said and all(c["status"] == "fail" for c in said), said


def test_doctor_ends_on_a_crictl_listing_nested_100000_deep(
    node: Callable[..., object], tmp_path: Path
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "deep.json").write_bytes(DEEP_JSON.replace(b'"items"', b'"images"'))
    crictl = tools / "crictl"
    crictl.write_text(f"#!/bin/sh\ncat {tools / 'deep.json'}\n")
    crictl.chmod(0o755)
    node()
    _code, out, _ = bounded(
        "doctor", "--json", within=25, env={"PATH": f"{tools}:{os.environ['PATH']}"}
    )
    said = [c["message"] for c in json.loads(out)["checks"] if c["area"] == "image"]
    assert any("0 image(s) from crictl images" in m for m in said), said


def test_doctor_reads_only_the_tail_of_a_3_gib_sparse_log(
    node: Callable[..., object], tmp_path: Path
) -> None:
    log = tmp_path / "kubelet.log"
    with log.open("wb") as handle:
        handle.truncate(3 << 30)
    node(stderr=log)
    with log.open("ab") as handle:
        handle.write(
            b'E1126 10:00:00.000000 1 plugin.go:1] "Failed to provide credentials for image" '
            b'provider="foreign-plugin" err="no identity"\n'
        )
    _, out, _ = bounded("doctor", "--json", "--offline", within=25)
    said = [c["message"] for c in json.loads(out)["checks"] if c["area"] == "kubelet"]
    assert any("1 failed credential lookup(s)" in m and "no identity" in m for m in said), said


# -- the agent: its state, settings, node files, the kubelet's health -------------------------------
def test_a_state_nested_100000_deep_is_one_line(tmp_path: Path) -> None:
    root = Path(kubeadm(tmp_path / "node"))
    state = root / "var/lib/credprovider/agent/state.json"
    state.parent.mkdir(parents=True)
    state.write_bytes(b'{"originals":' + b"[" * NESTING + b"]" * NESTING + b"}")
    code, out, err = bounded("agent", "uninstall", "--root", str(root), "--restart-command",
                             "true {unit}", within=20)  # fmt: skip
    assert (code, out, len(err.splitlines())) == (1, "", 1), err
    assert "is not the agent's state" in err


def test_provider_settings_nested_30000_deep_is_one_line(tmp_path: Path) -> None:
    root = kubeadm(tmp_path / "node")
    deep = '{"aws": ' + "[" * 30_000 + "]" * 30_000 + "}"
    code, out, err = bounded("agent", "plan", "--root", root, "--providers", "aws",
                             "--provider-settings", deep, within=20)  # fmt: skip
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert "nested more than 32 levels" in err


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _zero_device(path: Path) -> None:
    os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 5))


def _sparse(path: Path) -> None:
    with path.open("wb") as handle:
        handle.truncate(1 << 30)


@pytest.mark.parametrize("make", [_fifo, _zero_device, _sparse], ids=["FIFO", "/dev/zero", "1 GiB"])
@pytest.mark.parametrize("command", ["plan", "apply"])
def test_os_release_that_is_not_a_small_file(
    tmp_path: Path, make: Callable[[Path], None], command: str
) -> None:
    root = Path(kubeadm(tmp_path / "node"))
    (root / "etc").mkdir(exist_ok=True)
    make(root / "etc/os-release")
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    extra = ["--bundle", str(bundle), "--restart-command", "true {unit}", "--health-timeout",
             "1"] if command == "apply" else []  # fmt: skip
    _code, out, err = bounded("agent", command, "--root", str(root), "--providers", "aws", *extra,
                             within=30)  # fmt: skip
    # recognized by its files (os-release skipped, not read): the kubeadm flags file is planned
    assert "/etc/default/kubelet" in out, out + err


def test_a_drip_fed_healthz_ends_within_the_health_timeout(tmp_path: Path) -> None:
    root = Path(kubeadm(tmp_path / "node"))
    before = tree(str(root))
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0").parent
    with raw_server(drip(b"o")) as url:
        code, out, err = bounded(
            "agent", "apply", "--root", str(root), "--bundle", str(bundle), "--providers", "aws",
            "--restart-command", "true {unit}", "--healthz", f"{url}/healthz",
            "--health-timeout", "3", within=20,
        )  # fmt: skip
    assert code == 1 and out.startswith("rolled back: the kubelet was not healthy"), out + err
    undone, _, err = bounded("agent", "uninstall", "--root", str(root), "--restart-command",
                             "true {unit}", within=20)  # fmt: skip
    assert undone == 0, err
    assert tree(str(root)) == before


# -- install: --force never replaces a device, FIFO, socket or directory ----------------------------
@pytest.mark.parametrize("kind", ["character device", "FIFO", "directory"])
def test_install_force_never_replaces_what_is_not_a_file(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "etc" / "config"
    target.parent.mkdir()
    if kind == "character device":
        os.mknod(target, 0o666 | stat.S_IFCHR, os.makedev(1, 7))  # a /dev/full of our own
    elif kind == "FIFO":
        os.mkfifo(target)
    else:
        target.mkdir()
    mode = target.lstat().st_mode
    bundle = fake_bundle(tmp_path / "bundle", "0.1.0")
    code, out, err = bounded("install", "--bin-dir", str(tmp_path / "bin"), "--config-out",
                             str(target), "--providers", "aws", "--force", "--target", str(bundle),
                             within=60)  # fmt: skip
    assert code != 0, out + err
    assert f"it is a {kind}: nothing replaces that, not even --force" in out + err
    assert target.lstat().st_mode == mode
    assert not list(tmp_path.glob("etc/config.credprovider-backup-*"))

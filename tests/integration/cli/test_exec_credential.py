"""A kubeconfig whose user runs an exec credential plugin (client.authentication.k8s.io), as every
managed cluster's kubeconfig does (``aws eks get-token``, ``gke-gcloud-auth-plugin``,
``kubelogin``) and the kubelet's own on an EKS node: ``credprovider fleet status`` through the
real client library and the bundle, against a stand-in API server that takes only the token the
plugin issued. Each plugin here is a script of the test's, named by an absolute path: no real
login program is ever run. The decisions are credprovider/tool/cluster/execcred.py.

Before: lightkube ran the plugin itself, with no time limit (a plugin waiting on a login held
``fleet status`` until the API call's bound, 35 s, blamed "the API server answers too slowly", and
was left running), read its output whole, took no ``client.authentication.k8s.io/v1``, and said
"the API server's answer is not one the client can use" of a plugin that wrote no JSON.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from credprovider.tool.cluster import execcred
from credprovider.tool.cluster.execcred import ExecCredentialError, ExecPlugin, fetch
from emulators.http import FakeRequest, FakeResponse, serve
from emulators.tls import CertAuthority
from tests.helpers import run_cli, tool_command

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
TOKEN = "exec-issued-token-0123456789abcdef"


@dataclass
class FakeApi:
    """``GET /api/v1/nodes``, for a request bearing one of ``tokens`` (401 otherwise)."""

    tokens: set[str] = field(default_factory=lambda: {TOKEN})
    asked: list[str] = field(default_factory=list)  # the Authorization of each request

    def __call__(self, request: FakeRequest) -> FakeResponse:
        self.asked.append(request.header("authorization"))
        if request.header("authorization").removeprefix("Bearer ") not in self.tokens:
            return FakeResponse.json(
                {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 401,
                 "reason": "Unauthorized", "message": "Unauthorized"}, status=401,
            )  # fmt: skip
        return FakeResponse.json({"kind": "NodeList", "apiVersion": "v1", "metadata": {},
                                  "items": [{"metadata": {"name": "node-a"}}]})  # fmt: skip


def plugin_script(directory: Path, name: str, body: str) -> Path:
    """An executable shell script; it appends its argv and KUBERNETES_EXEC_INFO to ``runs``."""
    script = directory / name
    runs = directory / f"{name}.runs"
    script.write_text(
        f'#!/bin/sh\nprintf "%s|%s\\n" "$*" "$KUBERNETES_EXEC_INFO" >> {runs}\n{body}\n'
    )
    script.chmod(0o755)
    return script


def answer(api_version: str, token: str, extra: str = "") -> str:
    status = f'"token":"{token}"{extra}'
    return (
        f'echo \'{{"apiVersion":"{api_version}","kind":"ExecCredential","status":{{{status}}}}}\''
    )


def kubeconfig_with(directory: Path, server: str, exec_section: dict[str, object]) -> Path:
    path = directory / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "me", "user": {"exec": exec_section}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "me"}}],
        "current-context": "c",
    }))  # fmt: skip
    path.chmod(0o600)
    return path


@pytest.fixture
def api() -> Iterator[tuple[FakeApi, str]]:
    fake = FakeApi()
    with serve(fake) as server:
        yield fake, server.url


def assert_ends(pid: int, seconds: float = 5.0) -> None:
    """The process ``pid`` is gone within ``seconds`` (killed here, and the test failed, if not)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    pytest.fail(f"process {pid}, the plugin's child, was left running")


def runs_of(script: Path) -> list[tuple[str, dict[str, object]]]:
    runs = Path(f"{script}.runs")
    if not runs.exists():
        return []
    lines = runs.read_text().splitlines()
    return [(argv, json.loads(info)) for argv, _, info in (line.partition("|") for line in lines)]


@pytest.mark.parametrize("use_bundle", [False, True], ids=["source", "bundle"])
@pytest.mark.parametrize("api_version", [V1BETA1, V1])
def test_fleet_status_sends_the_token_the_plugin_issued(
    tmp_path: Path, api: tuple[FakeApi, str], api_version: str, use_bundle: bool
) -> None:
    """Both API versions client-go takes (lightkube refused v1); the plugin's args, its env and
    the ExecCredential request as client-go gives them; its stderr shown to the person."""
    fake, url = api
    script = plugin_script(
        tmp_path, "get-token", f"echo 'open https://login.example/device, code ABC-123' >&2\n"
        f'[ "$CLUSTER" = prod ] || exit 3\n{answer(api_version, TOKEN)}',
    )  # fmt: skip
    kubeconfig = kubeconfig_with(tmp_path, url, {
        "apiVersion": api_version, "command": str(script), "args": ["token", "--cluster", "prod"],
        "env": [{"name": "CLUSTER", "value": "prod"}], "interactiveMode": "Never",
    })  # fmt: skip
    done = run_cli("fleet", "status", f"--kubeconfig={kubeconfig}", use_bundle=use_bundle)
    assert "credprovider fleet status:" not in done.stderr, done.stderr
    assert "node-a" in done.stdout and TOKEN not in done.stdout + done.stderr
    assert "open https://login.example/device, code ABC-123" in done.stderr
    assert fake.asked == [f"Bearer {TOKEN}"]
    [(argv, info)] = runs_of(script)
    assert argv == "token --cluster prod"
    assert info == {"kind": "ExecCredential", "apiVersion": api_version,
                    "spec": {"interactive": False}}  # fmt: skip


def test_cluster_info_is_given_as_client_go_gives_it(
    tmp_path: Path, api: tuple[FakeApi, str], test_ca: CertAuthority
) -> None:
    """provideClusterInfo: the request's spec.cluster as client-go's rest.ConfigToExecCluster
    makes it: the server, its CA file's bytes as certificate-authority-data (it carried only
    an inline CA), disable-compression, and the cluster's exec extension as config."""
    fake, url = api
    script = plugin_script(tmp_path, "get-token", answer(V1, TOKEN))
    ca = tmp_path / "ca.crt"
    ca.write_bytes(test_ca.bundle.read_bytes())
    extension = {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "a1"}}
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {
            "server": url, "certificate-authority": "ca.crt", "disable-compression": True,
            "extensions": [extension]}}],
        "users": [{"name": "me", "user": {"exec": {
            "apiVersion": V1, "command": str(script), "interactiveMode": "Never",
            "provideClusterInfo": True}}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "me"}}],
        "current-context": "c",
    }))  # fmt: skip
    path.chmod(0o600)
    done = run_cli("fleet", "status", f"--kubeconfig={path}")
    assert "node-a" in done.stdout, done.stderr
    [(_, info)] = runs_of(script)
    assert info["spec"] == {"interactive": False, "cluster": {
        "server": url, "disable-compression": True, "config": {"audience": "a1"},
        "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()}}  # fmt: skip
    assert fake.asked == [f"Bearer {TOKEN}"]
    ca.unlink()  # one line naming it, before the plugin runs
    gone = run_cli("fleet", "status", f"--kubeconfig={path}")
    assert gone.returncode == 1 and len(gone.stderr.splitlines()) == 1, gone.stderr
    assert f"{ca}: no such file or directory" in gone.stderr
    assert len(runs_of(script)) == 1


def test_a_refused_token_is_fetched_again_once(tmp_path: Path, api: tuple[FakeApi, str]) -> None:
    """The API server's 401: the plugin runs again (its token may have been revoked early), as
    client-go does; refused again, the line is the API server's."""
    fake, url = api
    counter = tmp_path / "count"
    credential = json.dumps({"apiVersion": V1BETA1, "kind": "ExecCredential",
                             "status": {"token": "stale-N"}})  # fmt: skip
    script = plugin_script(
        tmp_path,
        "rotating",
        f'n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}\n'
        f"echo '{credential}' | sed \"s/stale-N/stale-$n/\"",
    )  # fmt: skip
    fake.tokens = {"stale-1"}
    kubeconfig = kubeconfig_with(tmp_path, url, {"apiVersion": V1BETA1, "command": str(script)})
    done = run_cli("fleet", "status", f"--kubeconfig={kubeconfig}")
    assert "node-a" in done.stdout, (done.stderr, fake.asked)
    assert fake.asked == ["Bearer stale-0", "Bearer stale-1"] and len(runs_of(script)) == 2
    fake.tokens = set()
    fake.asked.clear()
    refused = run_cli("fleet", "status", f"--kubeconfig={kubeconfig}")
    assert refused.returncode == 1 and "the API server answered 401" in refused.stderr
    assert len(fake.asked) == 2


@pytest.mark.parametrize(
    ("section", "body", "said"),
    [
        ({"apiVersion": "client.authentication.k8s.io/v1alpha1"}, answer(V1BETA1, TOKEN),
         "exec plugin: invalid apiVersion 'client.authentication.k8s.io/v1alpha1'"),
        ({"interactiveMode": "Always"}, answer(V1BETA1, TOKEN),
         "asks for a terminal (interactiveMode Always), which credprovider never gives it"),
        ({}, 'echo "error: SSO session expired: run aws sso login" >&2; exit 255',
         "failed with exit code 255: error: SSO session expired: run aws sso login"),
        ({}, "echo 'not json'", "wrote no ExecCredential (JSON) on stdout"),
        ({}, answer(V1, TOKEN),
         "exec plugin is configured to use API version client.authentication.k8s.io/v1beta1, "
         "plugin returned version 'client.authentication.k8s.io/v1'"),
        ({}, "exec cat /dev/zero", "wrote more than 1 MiB on stdout: stopped"),
        ({}, "exec cat /dev/zero >&2", "wrote more than 1 MiB on stderr: stopped"),
        ({}, answer(V1BETA1, TOKEN, ',"expirationTimestamp":"tomorrow"'),
         "its expirationTimestamp 'tomorrow' is not an RFC 3339 time"),
        ({}, answer(V1BETA1, "", ',"clientCertificateData":"C"'),
         "exec plugin returned only certificate or key, not both"),
        ({}, answer(V1BETA1, "", ',"clientCertificateData":"C","clientKeyData":"K"'),
         "the client certificate and key the exec plugin issued do not load"),
    ],
    ids=["v1alpha1", "always-interactive", "fails", "no-json", "other-version", "flood",
         "stderr-flood", "bad-expiry", "half-a-pair", "a-pair-that-does-not-load"],
)  # fmt: skip
def test_a_plugin_that_gives_no_token_is_one_line_naming_it(
    tmp_path: Path, api: tuple[FakeApi, str], section: dict[str, str], body: str, said: str
) -> None:
    fake, url = api
    script = plugin_script(tmp_path, "plugin", body)
    kubeconfig = kubeconfig_with(
        tmp_path, url, {"apiVersion": V1BETA1, "command": str(script), **section}
    )
    done = run_cli("fleet", "status", f"--kubeconfig={kubeconfig}")
    assert done.returncode == 1 and fake.asked == []
    assert len(done.stderr) < 24 * 1024  # what is shown of a plugin's stderr is cut
    [line] = [line for line in done.stderr.splitlines() if line.startswith("credprovider fleet")]
    assert f"the kubeconfig {kubeconfig} (user 'me')" in line and said in line, line
    assert "Traceback" not in done.stderr


def test_a_missing_plugin_is_said_with_its_install_hint(
    tmp_path: Path, api: tuple[FakeApi, str]
) -> None:
    """A bare name is looked up on PATH, a relative path from the kubeconfig's directory (as
    client-go's loader resolves it); a missing one is named with the kubeconfig's installHint."""
    _, url = api
    kubeconfig = kubeconfig_with(tmp_path, url, {
        "apiVersion": V1BETA1, "command": "credprovider-test-no-such-login",
        "installHint": "install it from https://example.test/login\nand log in",
    })  # fmt: skip
    done = run_cli("fleet", "status", f"--kubeconfig={kubeconfig}")
    assert (
        "exec: executable credprovider-test-no-such-login not found (install it from "
        in done.stderr
    )
    fake, _ = api
    (tmp_path / "bin").mkdir()
    plugin_script(tmp_path / "bin", "login", answer(V1BETA1, TOKEN))
    kubeconfig_with(tmp_path, url, {"apiVersion": V1BETA1, "command": "bin/login"})
    found = run_cli("fleet", "status", f"--kubeconfig={kubeconfig}", cwd=Path("/"))
    assert "node-a" in found.stdout and fake.asked == [f"Bearer {TOKEN}"], found.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="root's refusal of a program others could change")
def test_root_runs_no_plugin_a_kubeconfig_others_may_write_names(
    tmp_path: Path, api: tuple[FakeApi, str]
) -> None:
    """Root (doctor on a node reads the kubelet's kubeconfig) runs a plugin only if nobody else
    could have named it or replaced it."""
    fake, url = api
    script = plugin_script(tmp_path, "plugin", answer(V1BETA1, TOKEN))
    kubeconfig = kubeconfig_with(tmp_path, url, {"apiVersion": V1BETA1, "command": str(script)})
    kubeconfig.chmod(0o666)
    done = run_cli("fleet", "status", f"--kubeconfig={kubeconfig}")
    assert done.returncode == 1 and runs_of(script) == [] and fake.asked == []
    assert f"was not run as root: {kubeconfig} is writable by others" in done.stderr
    kubeconfig.chmod(0o600)
    script.chmod(0o777)
    done = run_cli("fleet", "status", f"--kubeconfig={kubeconfig}")
    assert f"was not run as root: {script} is writable by others" in done.stderr
    assert runs_of(script) == []
    # $KUBECONFIG's list: a file others may write, merged in, may name the user's plugin too
    script.chmod(0o755)
    context = tmp_path / "context"
    context.write_text(json.dumps({"clusters": [], "current-context": "c"}))
    context.chmod(0o666)
    done = run_cli("fleet", "status", env={"KUBECONFIG": f"{context}:{kubeconfig}"})
    assert f"was not run as root: {context} is writable by others" in done.stderr
    assert runs_of(script) == []


def test_a_plugin_that_never_answers_is_stopped_with_its_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A login that never ends: stopped at the bound, and its process group with it (lightkube
    left it running after the tool exited)."""
    pids = tmp_path / "pids"
    script = plugin_script(tmp_path, "hangs", f"sleep 300 & echo $! > {pids}; wait")
    plugin = ExecPlugin(str(tmp_path / "kubeconfig"), "me", V1BETA1, str(script))
    (tmp_path / "kubeconfig").write_text("{}")
    started = time.monotonic()
    with pytest.raises(ExecCredentialError, match=r"gave no credential within 1s: stopped"):
        fetch(plugin, seconds=1.0, relay=lambda chunk: None)
    assert time.monotonic() - started < 10
    assert_ends(int(pids.read_text()))
    assert execcred.RENEWAL_SECONDS < 35  # a renewal ends within the API call's own bound


@pytest.mark.parametrize("ending", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=["ctrl-c", "sigterm", "sighup"])  # fmt: skip
@pytest.mark.parametrize("use_bundle", [False, True], ids=["source", "bundle"])
def test_ending_the_tool_stops_the_plugin(
    tmp_path: Path, api: tuple[FakeApi, str], use_bundle: bool, ending: signal.Signals
) -> None:
    """An operator's Ctrl-C while a login waits: "credprovider: interrupted", status 130;
    ``timeout`` or a closed session (SIGTERM, SIGHUP): the tool ends by that signal. Either way
    the plugin is stopped with it (it runs in a session of its own, which the terminal's signal
    never reaches: it was left running; and Ctrl-C printed a KeyboardInterrupt traceback)."""
    import subprocess

    _, url = api
    pids = tmp_path / "pids"
    script = plugin_script(tmp_path, "waits", f"sleep 300 & echo $! > {pids}; wait")
    kubeconfig = kubeconfig_with(tmp_path, url, {"apiVersion": V1BETA1, "command": str(script)})
    env = {k: v for k, v in os.environ.items() if k != "CREDPROVIDER_TRACEBACK"}
    tool = subprocess.Popen(
        [*tool_command(use_bundle), "fleet", "status", f"--kubeconfig={kubeconfig}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not pids.exists() or not pids.read_text().strip():
        assert time.monotonic() < deadline and tool.poll() is None, "the plugin never started"
        time.sleep(0.05)
    sleeper = int(pids.read_text())
    tool.send_signal(ending)
    out, err = tool.communicate(timeout=30)
    assert b"Traceback" not in err and out == b"", err
    if ending == signal.SIGINT:
        assert tool.returncode == 130, err
        assert err.decode().strip().splitlines()[-1] == "credprovider: interrupted", err
    else:
        assert tool.returncode == -ending, err
    assert_ends(sleeper)

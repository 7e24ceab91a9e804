"""A kubeconfig user's exec credential plugin (``users[].user.exec``), run as client-go runs it,
within bounds.

The kubelet of every EKS node authenticates this way (nodeadm writes ``/var/lib/kubelet/kubeconfig``
from its ``internal/kubelet/kubeconfig.template.yaml``: ``exec: {apiVersion:
client.authentication.k8s.io/v1beta1, command: aws, args: [eks, get-token, ...]}``), and doctor
reads the Node with the kubelet's kubeconfig; so do operators' kubeconfigs of managed clusters
(``aws eks update-kubeconfig``, ``gke-gcloud-auth-plugin``, ``kubelogin``), which ``fleet`` reads.
client-go's account (``plugin/pkg/client/auth/exec/exec.go``, ``tools/clientcmd/loader.go``):
apiVersion ``client.authentication.k8s.io/v1beta1`` or ``/v1`` (v1alpha1 is refused); the
ExecCredential request in ``KUBERNETES_EXEC_INFO`` (with ``provideClusterInfo``, the cluster as
``rest.ConfigToExecCluster`` gives it, its CA file read into ``certificate-authority-data``); the
kubeconfig's ``env`` added to the caller's (the client's: doctor gives the kubelet's); a command
with a ``/`` in it found from the kubeconfig's directory, any other on ``PATH``; the plugin's
stderr shown to the person as it comes (a device-code prompt); its answer's ``status.token``, until
``status.expirationTimestamp`` or the API server's 401.

Unlike the client library the tool is built on (lightkube, which runs it with no time limit, reads
its output whole, blames the API server for what it writes and takes only v1beta1): the plugin
runs within :data:`EXEC_SECONDS` and its process group is killed then, its stdout is read to
:data:`MAX_OUTPUT_BYTES` (``runtime.child``, the one runner of programs credprovider does not
control), and every failure is one line naming the kubeconfig, its user and the command. As root
(doctor on a node) the program is run only if nobody but root could have put it there or named it
(the kubeconfig's own owner and mode, ``node.trust``), with the loader's variables dropped. The
token is never printed. Not on the plugins' exec path.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from credprovider.errors import CredproviderError
from credprovider.runtime.child import run_bounded
from credprovider.runtime.excerpt import byte_size, quoted
from credprovider.runtime.nodefile import reason
from credprovider.runtime.redact import register_secret
from credprovider.tool.cluster.kubeconfigs import KUBECONFIG_FILE_CAP, named
from credprovider.tool.node.access import FileProblem, read_bytes
from credprovider.tool.node.structured import JsonTooDeep, bounded_json
from credprovider.tool.node.trust import owner_problem, safe_environment, untrusted

API_VERSIONS: Final = ("client.authentication.k8s.io/v1beta1", "client.authentication.k8s.io/v1")
EXEC_INFO_ENV: Final = "KUBERNETES_EXEC_INFO"
# A token is fetched in a second or two; a device-code login waits for a person. That first fetch
# is made as the client is made; one again later (the token's end, a 401) runs inside an API call,
# whose own bound (``bounds.CALL_SECONDS``) it must end within: :data:`RENEWAL_SECONDS`.
EXEC_SECONDS: Final = 120.0
RENEWAL_SECONDS: Final = 20.0
# An ExecCredential is a few KiB (a token, or a certificate and its key).
MAX_OUTPUT_BYTES: Final = 1 << 20
# What of its stderr is shown as it comes (a device-code prompt is a few lines).
SHOWN_BYTES: Final = 16 * 1024
# A token this close to its expirationTimestamp is fetched again before it is sent.
RENEW_SECONDS: Final = 10.0
_MODES: Final = ("Never", "IfAvailable", "Always")


class ExecCredentialError(CredproviderError):
    """The kubeconfig's exec credential plugin gave no token; one line naming it and why."""


@dataclass(frozen=True)
class ExecPlugin:
    """A kubeconfig user's ``exec`` section, as client-go reads it."""

    kubeconfig: str
    user: str
    api_version: str
    command: str  # as the kubeconfig names it (the plugin's argv[0])
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    install_hint: str = ""
    cluster: Mapping[str, Any] | None = None  # provideClusterInfo: what the request carries
    sources: tuple[str, ...] = ()  # the files it was read from ($KUBECONFIG's list, merged)
    # the environment it starts from (its client's; None: this process's), its env over it
    environ: Mapping[str, str] | None = None

    @property
    def who(self) -> str:
        return f"the kubeconfig {self.kubeconfig} (user {quoted(self.user)})"

    @property
    def said(self) -> str:
        """The start of a line about what it did."""
        return f"{self.who}: exec: executable {self.command}"


def exec_plugin(
    kubeconfig: Mapping[str, Any],
    user: str,
    cluster: str,
    path: str,
    sources: tuple[str, ...] | None = None,
) -> ExecPlugin | None:
    """The ``exec`` section of ``user`` in ``kubeconfig`` (read from ``path``, its relative
    command already resolved there: ``kubeconfigs``; the context's ``cluster``; ``sources``: the
    files merged into it, default ``path``), or ``None`` when it has none;
    :class:`ExecCredentialError` for one client-go would refuse."""
    body = named(kubeconfig, "users", "user", user)
    section = body.get("exec") if body else None
    if section is None:
        return None
    who = f"the kubeconfig {path} (user {quoted(user)})"
    if not isinstance(section, dict):
        raise ExecCredentialError(f"{who}: exec is not a mapping")
    version = section.get("apiVersion")
    if version not in API_VERSIONS:
        raise ExecCredentialError(
            f"{who}: exec plugin: invalid apiVersion {quoted(version)} (client-go and the kubelet "
            f"take {' or '.join(API_VERSIONS)})"
        )
    command, args = section.get("command"), section.get("args") or []
    if not isinstance(command, str) or not command:
        raise ExecCredentialError(f"{who}: exec has no command")
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise ExecCredentialError(f"{who}: exec's args are not a list of strings")
    env = []
    for item in section.get("env") or []:
        name = item.get("name") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(item, dict) else None
        if not isinstance(name, str) or not isinstance(value, str):
            raise ExecCredentialError(f"{who}: exec's env is not a list of names and values")
        env.append((name, value))
    mode = section.get("interactiveMode") or ("" if version.endswith("/v1") else "IfAvailable")
    if mode not in _MODES:
        raise ExecCredentialError(f"{who}: exec plugin: invalid interactiveMode {quoted(mode)}")
    if mode == "Always":
        raise ExecCredentialError(
            f"{who}: the exec plugin {command} asks for a terminal (interactiveMode Always), which "
            "credprovider never gives it: log in first, or use a kubeconfig whose plugin runs "
            "without one"
        )
    hint = section.get("installHint")
    info = _cluster_info(kubeconfig, cluster, who) if section.get("provideClusterInfo") else None
    return ExecPlugin(
        kubeconfig=path, user=user, api_version=version, command=command, args=tuple(args),
        env=tuple(env), install_hint=hint if isinstance(hint, str) else "",
        sources=sources or (path,),
        cluster=info,
    )  # fmt: skip


def _cluster_info(kubeconfig: Mapping[str, Any], name: str, who: str) -> dict[str, Any]:
    """ExecCredential's ``spec.cluster`` for ``provideClusterInfo``, as client-go's
    ``rest.ConfigToExecCluster`` makes it: the cluster's fields, its CA file's bytes as
    ``certificate-authority-data``, its extension ``client.authentication.k8s.io/exec`` as
    ``config``."""
    cluster = named(kubeconfig, "clusters", "cluster", name)
    fields = ("server", "tls-server-name", "insecure-skip-tls-verify",
              "certificate-authority-data", "proxy-url", "disable-compression")  # fmt: skip
    info = {key: cluster[key] for key in fields if key in cluster}
    authority = cluster.get("certificate-authority")
    if not info.get("certificate-authority-data") and isinstance(authority, str) and authority:
        try:  # its path already the kubeconfig's (kubeconfigs: relative ones resolved there)
            data = read_bytes(authority, KUBECONFIG_FILE_CAP)
        except FileProblem as exc:
            raise ExecCredentialError(
                f"{who}: failed to load CA bundle for execProvider: {exc}"
            ) from None
        info["certificate-authority-data"] = base64.b64encode(data).decode()
    for extension in cluster.get("extensions") or []:
        if (
            isinstance(extension, dict)
            and extension.get("name") == "client.authentication.k8s.io/exec"
        ):
            info["config"] = extension.get("extension")
    return info


@dataclass(frozen=True)
class Issued:
    """What the plugin issued: a bearer token, or a client certificate and its key (PEM; GKE's
    ``gke-exec-auth-plugin`` for the kubelet), and when it ends."""

    token: str
    expires: float | None  # Unix seconds
    certificate: str = ""
    key: str = ""


def resolved(plugin: ExecPlugin, env: Mapping[str, str]) -> str:
    """The file the plugin's command names (``PATH`` searched for a bare name), checked as root
    checks every program it runs; :class:`ExecCredentialError` if there is none or it is not to
    be run."""
    found = (
        plugin.command
        if "/" in plugin.command
        else shutil.which(plugin.command, path=env.get("PATH", os.defpath))
    )
    if not found or not os.path.isfile(found):
        hint = (
            f" ({plugin.install_hint.strip().splitlines()[0]})"
            if plugin.install_hint.strip()
            else ""
        )
        raise ExecCredentialError(
            f"{plugin.who}: exec: executable {plugin.command} not found{hint}"
        )
    if os.geteuid() == 0:  # root trusts no program another user could have placed or named
        problem = next(filter(None, map(_owner_problem, plugin.sources)), "")
        problem = problem or untrusted(found, 0)
        if problem:
            raise ExecCredentialError(
                f"{plugin.who}: the exec plugin {found} was not run as root: {problem}, so "
                "someone other than root could have chosen what runs: make both root's, "
                "writable only by root"
            )
    return found


def _owner_problem(path: str) -> str:
    try:
        return owner_problem(path, os.stat(path), 0)
    except OSError:
        return ""


def fetch(plugin: ExecPlugin, seconds: float = EXEC_SECONDS, relay: Any = None) -> Issued:
    """Run the plugin once, for at most ``seconds``, and read its ExecCredential; ``relay`` is
    given its stderr as it comes (default: this process's stderr)."""
    base = os.environ if plugin.environ is None else plugin.environ
    env = safe_environment(base) if os.geteuid() == 0 else dict(base)
    env.update(plugin.env)
    spec: dict[str, Any] = {"interactive": False}
    if plugin.cluster is not None:
        spec["cluster"] = plugin.cluster
    request = {"kind": "ExecCredential", "apiVersion": plugin.api_version, "spec": spec}
    env[EXEC_INFO_ENV] = json.dumps(request, separators=(",", ":"))
    program = resolved(plugin, env)
    try:
        done = run_bounded([plugin.command, *plugin.args], env, b"", seconds,
                           MAX_OUTPUT_BYTES, executable=program, stop_at_cap=True,
                           relay=relay or _Shown())  # fmt: skip
    except (OSError, ValueError) as exc:
        raise ExecCredentialError(
            f"{plugin.who}: exec: {program} cannot be run: {reason(exc)}"
        ) from None
    said = plugin.said
    for stream, cut in (("stdout", done.stdout_cut), ("stderr", done.stderr_cut)):
        if cut:
            raise ExecCredentialError(
                f"{said} wrote more than {byte_size(MAX_OUTPUT_BYTES)} on {stream}: stopped"
            )
    if done.timed_out:
        raise ExecCredentialError(f"{said} gave no credential within {seconds:g}s: stopped")
    if done.code != 0:
        why = done.complaint()
        raise ExecCredentialError(
            f"{said} failed with exit code {done.code}{f': {why}' if why else ''}"
        )
    try:
        answer = bounded_json(done.stdout, MAX_OUTPUT_BYTES)
    except (ValueError, JsonTooDeep):
        answer = None
    issued = read_answer(answer, plugin.api_version, said)
    for secret in (issued.token, issued.key):  # scrubbed from any line that might quote them
        register_secret(secret)
    return issued


def read_answer(answer: Any, api_version: str, said: str) -> Issued:
    """The token (and its end) in a plugin's decoded ExecCredential, with client-go's checks."""
    if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
        raise ExecCredentialError(f"{said} wrote no ExecCredential (JSON) on stdout")
    if answer.get("apiVersion") != api_version:
        raise ExecCredentialError(
            f"{said}: exec plugin is configured to use API version {api_version}, plugin returned "
            f"version {quoted(answer.get('apiVersion'))}"
        )
    status = answer.get("status")
    if not isinstance(status, dict):
        raise ExecCredentialError(f"{said}: exec plugin didn't return a status field")
    token, certificate, key = (
        status.get(name) or "" for name in ("token", "clientCertificateData", "clientKeyData")
    )
    if not all(isinstance(value, str) for value in (token, certificate, key)):
        raise ExecCredentialError(f"{said}: exec plugin's status holds a field that is no string")
    if not token and not certificate and not key:
        raise ExecCredentialError(f"{said}: exec plugin didn't return a token or cert/key pair")
    if bool(certificate) != bool(key):
        raise ExecCredentialError(f"{said}: exec plugin returned only certificate or key, not both")
    return Issued(token, _time(status.get("expirationTimestamp"), said), certificate, key)


def _time(value: Any, said: str) -> float | None:
    if value is None:
        return None
    try:
        if not isinstance(value, str) or len(value) > 64:
            raise ValueError(value)
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise ExecCredentialError(
            f"{said}: its expirationTimestamp {quoted(value)} is not an RFC 3339 time"
        ) from None


class _Shown:
    """The plugin's stderr on this process's (escaped there, ``tool.terminal``), the first
    :data:`SHOWN_BYTES` of it: a prompt is a few lines; a flood is cut, and said to be."""

    def __init__(self) -> None:
        self.shown = 0

    def __call__(self, chunk: bytes) -> None:
        room = SHOWN_BYTES - self.shown
        if room <= 0:
            return
        self.shown += len(chunk)
        text = chunk[:room].decode("utf-8", "replace")
        cut = "\n(the plugin's stderr is cut here)\n" if len(chunk) > room else ""
        sys.stderr.write(text + cut)
        sys.stderr.flush()


class ExecToken:
    """The bearer token a request carries: fetched as the client is made (:meth:`first`), again
    when it is about to end and when the API server refused it (401). A client certificate the
    plugin issued instead is the TLS context's (:meth:`client_pair`), made again for one it issues
    afresh (``bounds.bounded_transport``)."""

    def __init__(self, plugin: ExecPlugin) -> None:
        self.plugin = plugin
        self._issued: Issued | None = None
        self._lock = threading.Lock()

    def first(self) -> None:
        """Fetch the token now, with the whole of :data:`EXEC_SECONDS` (outside any API call)."""
        with self._lock:
            self._issued = fetch(self.plugin)

    def client_pair(self) -> tuple[str, str] | None:
        """The client certificate and key (PEM) the last fetch issued, if it issued them."""
        issued = self._issued
        return (issued.certificate, issued.key) if issued and issued.certificate else None

    def header(self, renew: bool = False) -> str:
        with self._lock:
            issued = self._issued
            ending = (
                issued is not None
                and issued.expires is not None
                and (issued.expires - RENEW_SECONDS <= time.time())
            )
            if issued is None or renew or ending:
                issued = self._issued = fetch(self.plugin, RENEWAL_SECONDS)
        return f"Bearer {issued.token}" if issued.token else ""

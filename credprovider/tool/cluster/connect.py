"""The API server, for what the tool asks of it (the agent's own Node and Leases, fleet's list of
nodes, doctor's reading of the Node it runs on): a lightkube client made from a kubeconfig read as a
node file is (``tool.node.access``), or from the pod's service account, with every answer bounded
(:mod:`~credprovider.tool.cluster.bounds`); and :func:`api_call`, which makes whatever the API
server or the library says of a call one :class:`ClusterError` line. lightkube and httpx are
imported here and in ``bounds`` only, lazily: never on a plugin's exec path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from credprovider.errors import CredproviderError
from credprovider.runtime.excerpt import clip, quoted
from credprovider.runtime.redact import without_userinfo
from credprovider.tool.cluster.clienttls import client_tls, without_tls
from credprovider.tool.cluster.execcred import ExecCredentialError, ExecToken, exec_plugin
from credprovider.tool.cluster.kubeconfigs import (
    KUBECONFIG_FILE_CAP,
    KubeconfigError,
    named,
    read_kubeconfig,
    read_kubeconfigs,
)
from credprovider.tool.cluster.route import RouteError, route
from credprovider.tool.node.access import FileProblem, UnreadableError, read_bytes

if TYPE_CHECKING:
    from lightkube import Client

# Who the tool's writes are by (lightkube's field manager) and who its Events are from.
COMPONENT: Final = "credprovider-agent"


class ClusterError(CredproviderError):
    """The API server could not be reached, or refused what the agent asked of it."""


def connect(
    kubeconfig: str | None,
    in_cluster: bool = True,
    context: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Client:
    """A client from ``kubeconfig``; else the pod's service account (``in_cluster``), or else
    ``$KUBECONFIG`` or ``~/.kube/config`` as kubectl finds them; ``context``: the kubeconfig's
    context to use (default: its current-context). ``environ``: the environment of the client
    whose kubeconfig it is (its proxy, what its exec plugin runs in; default: this process's):
    doctor reads the Node as the kubelet would, with the kubelet's."""
    import os

    import httpx2
    from lightkube import Client, ConfigError
    from lightkube.config.kubeconfig import KubeConfig

    from credprovider.tool.cluster.bounds import bounded_transport

    environ = os.environ if environ is None else environ
    listed = "" if kubeconfig or in_cluster else environ.get("KUBECONFIG", "")
    path = kubeconfig or listed
    if not path and not in_cluster:
        path = os.path.expanduser("~/.kube/config")
    try:
        # $KUBECONFIG: kubectl's list of files, merged
        raw = read_kubeconfigs(listed) if listed else (read_kubeconfig(path) if path else {})
        if path:
            config = KubeConfig.from_dict(raw, fname=path)
        else:
            _check_service_account(SERVICE_ACCOUNT_DIR)
            config = KubeConfig.from_service_account(SERVICE_ACCOUNT_DIR)
        if path:
            _check_context(raw, path, context)
        chosen = config.get(context)
        if chosen is None:  # get() raises instead, with no default given
            raise ConfigError("no current context")
        way = route(chosen.cluster.server, named(raw, "clusters", "cluster",
                                                  chosen.context.cluster), environ)  # fmt: skip
        # a login may wait for a person: after the route is known to be usable
        sources = tuple(p for p in listed.split(os.pathsep) if p) if listed else (path,)
        chosen, token = _exec_credential(chosen, raw, path, sources, environ)
        # the TLS the client would make for itself (its CA, the user's client certificate or the
        # one the exec plugin issued; no key written to a file: clienttls): a transport of ours
        # is given it, since httpx makes none beside a transport it is given
        pair = token.client_pair() if token is not None else None
        try:
            verify = client_tls(chosen.cluster, chosen.user, chosen.abs_file, pair)
        except ValueError as exc:
            if token is None or pair is None:
                raise
            raise ExecCredentialError(f"{token.plugin.said}: {exc}") from None
        cluster, user, where = chosen.cluster, chosen.user, chosen.abs_file
        return Client(
            config=without_tls(chosen),
            field_manager=COMPONENT,
            trust_env=False,
            transport=bounded_transport(
                verify,
                token,
                way,
                (lambda issued: client_tls(cluster, user, where, issued)) if pair else None,
            ),
        )
    except (ExecCredentialError, RouteError, KubeconfigError) as exc:
        raise ClusterError(str(exc)) from None
    except (
        ConfigError, OSError, KeyError, ValueError, TypeError, AttributeError, httpx2.InvalidURL
    ) as exc:  # InvalidURL: a server with a control byte or a space  # fmt: skip
        where = path or "the pod's service account"
        raise ClusterError(
            f"no API server configuration from {where}: {clip(str(exc), 400)}"
        ) from exc


def _exec_credential(
    chosen: Any,
    raw: dict[str, Any],
    path: str,
    sources: tuple[str, ...],
    environ: Mapping[str, str],
) -> tuple[Any, Any]:
    """The context ``chosen`` without its user's exec plugin, and the plugin's token for our
    transport to send (``cluster.execcred``: bounded, where lightkube would run it itself without
    a time limit); ``chosen`` as it is, and ``None``, for a user without one."""
    import msgspec

    user = chosen.user
    if user is None or user.exec is None:
        return chosen, None
    plugin = exec_plugin(raw, chosen.context.user or "", chosen.context.cluster, path, sources)
    if plugin is None:  # lightkube found one where our reading did not: never run unbounded
        raise ValueError("the user's exec section could not be read")
    token = ExecToken(replace(plugin, environ=environ))
    token.first()  # here, not inside an API call's time bound: a login may wait for a person
    return chosen._replace(user=msgspec.structs.replace(user, exec=None)), token


# The pod's service account, as the kubelet mounts it.
SERVICE_ACCOUNT_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"


def _check_service_account(directory: str) -> None:
    """The pod's token, namespace and CA bundle, each a regular file of at most a MiB, read as a
    node file is before the client reads them whole (a FIFO would block it, ``/dev/zero`` fill
    its memory): one line naming the file that is not."""
    for name in ("token", "namespace", "ca.crt"):
        try:
            read_bytes(f"{directory}/{name}", KUBECONFIG_FILE_CAP)
        except (FileProblem, UnreadableError) as exc:
            raise ClusterError(f"the pod's service account cannot be used: {exc}") from None


# What lightkube raises, beyond its own errors, on an answer of the wrong shape: a body that is not
# JSON, a field of the wrong type, a time that is not one, a document too deep for its decoder.
LIBRARY_FAULTS: Final = (
    ValueError,
    TypeError,
    KeyError,
    AttributeError,
    IndexError,
    RecursionError,
    OverflowError,
)


def _server_of(exc: Exception) -> str:
    """`` (the API server at URL)`` for a transport error that carries its request, else ""."""
    try:
        url = exc.request.url  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # httpx raises RuntimeError for a request not set
        return ""
    return f" (the API server at {without_userinfo(f'{url.scheme}://{url.netloc.decode()}')})"


def _check_context(raw: Mapping[str, Any], path: str, context: str | None) -> None:
    """The context asked for (else the current-context) is one the kubeconfig has: else one line
    naming those it has and ``--context``, as kubectl's ``config get-contexts`` lists them."""
    names = [str(entry.get("name")) for entry in raw.get("contexts") or []
             if isinstance(entry, Mapping)]  # fmt: skip
    wanted = context or raw.get("current-context")
    if wanted and wanted in names:
        return
    has = (
        f"its contexts: {', '.join(quoted(name) for name in names[:10])}"
        if names
        else ("it has no contexts")
    )
    problem = f"has no context {quoted(wanted)}" if wanted else "sets no current-context"
    raise KubeconfigError(f"the kubeconfig {path} {problem} ({has}): give one with --context")


def api_call(what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    """``call(*args, **kwargs)``; the API server's refusal or an unreachable one as one
    :class:`ClusterError` saying ``what`` failed."""
    import httpx2
    from lightkube import ApiError
    from lightkube.core.exceptions import ConfigError

    from credprovider.tool.cluster.bounds import CALL_SECONDS, AnswerRefused, within

    try:
        return within(CALL_SECONDS, call, *args, **kwargs)
    except (ClusterError, AnswerRefused, ExecCredentialError) as exc:
        raise ClusterError(f"{what}: {exc}") from None
    except ApiError as exc:
        code = getattr(exc.status, "code", None)
        message = clip(str(getattr(exc.status, "message", "") or ""), 400)
        raise ClusterError(f"{what}: the API server answered {code}: {message}") from None
    except (httpx2.HTTPError, httpx2.InvalidURL, ConfigError, OSError) as exc:
        # InvalidURL: a name with a control byte or a space (a --hostname-override, a Node)
        raise ClusterError(f"{what}: {clip(str(exc), 400)}{_server_of(exc)}") from None
    except LIBRARY_FAULTS as exc:  # an answer the client library could not use
        raise ClusterError(
            f"{what}: the API server's answer is not one the client can use "
            f"({type(exc).__name__}: {clip(str(exc), 200)})"
        ) from None

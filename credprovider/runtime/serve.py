"""One exec: read the request, ask the provider (through the cache), write exactly one response on
stdout and exit 0, or nothing on stdout, one line on stderr and exit 1, before the deadline."""

from __future__ import annotations

import _thread
import time

from credprovider.entry import START_CHECK_ENV
from credprovider.errors import ProviderError, UsageError
from credprovider.runtime import _os, loopback
from credprovider.runtime._typing import IO, TYPE_CHECKING, Final, NoReturn
from credprovider.runtime.api import (
    CredentialProviderResponse,
    RequestError,
    encode_response,
    parse_request,
)
from credprovider.runtime.args import CommonOptions, help_text, split_common_args
from credprovider.runtime.caching import with_cache
from credprovider.runtime.deadline import (
    DEADLINE_ENV,
    DEFAULT_DEADLINE_SECONDS,
    KUBELET_TIMEOUT_SECONDS,
    Deadline,
    configured_deadline,
    seconds_since_exec,
)
from credprovider.runtime.excerpt import byte_size, clip, quoted
from credprovider.runtime.goformat import SECOND, format_go_duration, go_quote
from credprovider.runtime.imageref import ImageError, bare_host_hint, parse_image
from credprovider.runtime.log import (
    ANSWER_KIND,
    REQUEST_KIND,
    TRACEBACK_VERBOSITY,
    Logger,
    route_sdk_logging,
)
from credprovider.runtime.provider import Context, cache_duration_for, environment_restorer
from credprovider.runtime.redact import register_secret

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from credprovider.runtime.api import CredentialProviderRequest
    from credprovider.runtime.imageref import ImageRef
    from credprovider.runtime.provider import Credentials, Plan, PluginSpec, Provider

MAX_REQUEST_BYTES: Final = 1 << 20
# Where Python's ssl and urllib3 would write TLS keys (never, here: see without_key_log).
KEY_LOG_ENV: Final = "SSLKEYLOGFILE"


CACHE_DIR_ENV: Final = "CREDPROVIDER_CACHE_DIR"
# Set to 1 by ``credprovider get``: the cache is read, never created, locked or written.
CACHE_READ_ONLY_ENV: Final = "CREDPROVIDER_CACHE_READ_ONLY"
STDIN_PHASE: Final = "reading the request from stdin"


def read_request(stdin: IO[bytes]) -> bytes:
    """Read the whole request, refusing more than :data:`MAX_REQUEST_BYTES`."""
    if stdin.isatty():
        raise RequestError(
            "stdin is a terminal: pipe a CredentialProviderRequest JSON into this plugin "
            "(see --help for an example)"
        )
    data = stdin.read(MAX_REQUEST_BYTES + 1)
    if len(data) > MAX_REQUEST_BYTES:
        raise RequestError(f"request on stdin is larger than {byte_size(MAX_REQUEST_BYTES)}")
    return data


def build_response(
    request: CredentialProviderRequest, creds: Credentials, now: float
) -> CredentialProviderResponse:
    """Answer ``request`` with ``creds`` in the request's apiVersion, applying the cache policy."""
    duration = creds.cache_duration
    if duration is None and creds.expires_at is not None:
        duration = cache_duration_for(creds.expires_at, now)
    return CredentialProviderResponse(
        api_version=request.api_version,
        cache_key_type=creds.cache_key_type,
        cache_duration=duration,
        auth=creds.auth,
    )


def cache_duration_account(
    creds: Credentials, response: CredentialProviderResponse, now: float
) -> str:
    """``cacheDuration`` as the response gives it, and why it is that (for the -v=1 log)."""
    if response.cache_duration is None:
        return "unset (the config's defaultCacheDuration: the provider knows no expiry)"
    shown = format_go_duration(response.cache_duration)
    if creds.cache_duration is not None or creds.expires_at is None:
        return f"{shown} (set by the provider)"
    remaining = creds.expires_at - now
    if response.cache_duration == 0:
        return f"{shown} (the credential's expiry is too close or unusable: do not cache)"
    return (
        f"{shown} (half the credential's remaining {format_go_duration(int(remaining) * SECOND)})"
    )


def _deadline_message(seconds: float, phase: str) -> str:
    """What a missed deadline means, and what to check: stdin left open is the caller's doing."""
    if phase == STDIN_PHASE:
        return (
            f"no answer within the {seconds:g}s deadline: stdin was never closed, so the request "
            "never ended: send one CredentialProviderRequest and close stdin (echo '{...}' | "
            "PLUGIN), as the kubelet does"
        )
    return (
        f"no answer within the {seconds:g}s deadline while {phase}: check that the endpoint is "
        "reachable from this node (proxy, firewall, metadata service), or raise "
        f"--deadline/{DEADLINE_ENV} (below 60s)"
    )


def _image_in(args: list[str]) -> str:
    """An argument that names an image (its first part a registry host: a dot in it), which no
    plugin takes: the kubelet gives the image in the request ("": none)."""
    for arg in args:
        host, slash, _ = arg.partition("/")
        if slash and "." in host and not arg.startswith(("/", ".", "-")):
            return arg
    return ""


# What a plugin says when memory ran out (its own limit or the node's), with what to look at.
OUT_OF_MEMORY: Final = (
    "out of memory: the plugin could not get the memory it needs (a limit on it: ulimit -v, the "
    "kubelet's cgroup memory.max, or the node's memory); raise the limit, or free memory"
)


# ... and when a thread an SDK starts could not be had.
NO_THREAD: Final = (
    "could not start a thread: a limit on the processes of the kubelet's user or cgroup (ulimit "
    "-u, TasksMax, pids.max) or on its memory is reached; raise it"
)


def _describe_failure(exc: BaseException, log: Logger) -> str:
    if isinstance(exc, RequestError):
        return f"invalid request: {exc}"
    if isinstance(exc, ProviderError):
        return str(exc)
    if isinstance(exc, MemoryError):  # nothing more is asked of memory to say it
        return OUT_OF_MEMORY
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):  # an SDK's own
        return NO_THREAD
    if log.verbosity >= TRACEBACK_VERBOSITY:
        import traceback

        for line in traceback.format_exception(exc):
            for part in line.rstrip("\n").split("\n"):
                log.v(TRACEBACK_VERBOSITY, part)
    from credprovider.runtime.bundlecheck import damage_line

    if damaged := damage_line():  # a module or data file missing from the bundle
        return damaged
    detail = str(exc) or "no detail"
    return (
        f"internal error: {type(exc).__name__}: {detail} "
        f"(rerun with -v={TRACEBACK_VERBOSITY} for a traceback and report it)"
    )


def _deadline_seconds(opts: CommonOptions, environ: Mapping[str, str], log: Logger) -> float:
    """--deadline, else CREDPROVIDER_DEADLINE, else the default; warned about when not under 60 s."""
    seconds = configured_deadline(opts.deadline, environ)
    if seconds is None:
        seconds = DEFAULT_DEADLINE_SECONDS
    if seconds >= KUBELET_TIMEOUT_SECONDS:
        log.warning(
            f"the deadline {seconds:g}s is not shorter than the kubelet's "
            f"{KUBELET_TIMEOUT_SECONDS:.0f}s kill: the kubelet may kill this plugin first"
        )
    return seconds


def respond(
    spec: PluginSpec,
    args: list[str],
    stdin: IO[bytes],
    ctx: Context,
    cache_dir: str | None,
) -> bytes:
    """The whole work of one exec, deadline aside: build the provider, read and check the request,
    get credentials (through the cache), and encode the response. Raises on any failure."""
    deadline, log = ctx.deadline, ctx.log
    deadline.phase = "reading the plugin arguments"
    provider = spec.build(args, ctx)
    deadline.phase = STDIN_PHASE
    data = read_request(stdin)
    if not data.strip() and (given := _image_in(args)):  # an operator's try, by hand
        raise RequestError(
            f"stdin was empty, and the image {quoted(given)} given as an argument is not read: "
            f"pipe a CredentialProviderRequest naming it (see --help), or run credprovider get "
            f"{quoted(given)}"
        )
    request = parse_request(data)
    register_secret(request.service_account_token)
    log.v(
        1,
        f"{REQUEST_KIND}apiVersion={request.api_version} image={go_quote(clip(request.image))}"
        f"{' with a service account token' if request.service_account_token else ''}",
    )
    bare_host = bare_host_hint(clip(request.image))
    if bare_host is not None:  # never from the kubelet (it normalizes), but from an operator
        raise ProviderError(f"{bare_host} (fix the pod's image)")
    deadline.phase = "getting credentials"
    read_only = ctx.environ.get(CACHE_READ_ONLY_ENV) == "1"
    try:
        image = parse_image(request.image)  # once: the plan and the cache both take this
    except ImageError as exc:
        raise ProviderError(f"cannot get credentials: {exc}") from None
    cached = with_cache(SdkSeam(provider), spec.name, cache_dir, read_only)
    creds = cached.fulfil(cached.plan(image, request, ctx), request, ctx)
    answered_at = ctx.now()
    response = build_response(request, creds, answered_at)
    log.v(
        1,
        f"{ANSWER_KIND}cacheKeyType={response.cache_key_type} "
        f"cacheDuration={cache_duration_account(creds, response, answered_at)} "
        f"keys={sorted(response.auth)}",
    )
    return encode_response(response)


class SdkSeam:
    """``provider``, with what the SDKs see set just before it fetches: their logging routed into
    the plugin's log (so that every record is scrubbed) and the context's environment as the
    process's (:meth:`Context.sdk_environment`). A cache hit never fetches, so never pays for it.

    ``route_logs=False`` leaves logging alone: for a provider run inside another program (the
    in-process tests), whose root logger is its own."""

    def __init__(self, provider: Provider, route_logs: bool = True) -> None:
        self._provider = provider
        self._route_logs = route_logs

    def plan(self, image: ImageRef, request: CredentialProviderRequest, ctx: Context) -> Plan:
        return self._provider.plan(image, request, ctx)

    def fulfil(self, plan: Plan, request: CredentialProviderRequest, ctx: Context) -> Credentials:
        if self._route_logs:
            route_sdk_logging(ctx.log)
        with ctx.sdk_environment():
            without_key_log()
            return self._provider.fulfil(plan, request, ctx)


def without_key_log() -> None:
    """SSLKEYLOGFILE out of ``os.environ`` before any TLS context is made: Python's ssl and
    urllib3 write every TLS session's keys to the file it names (a capture of a token exchange
    could then be read) and wait on a FIFO there. The Go plugins write none; neither do the
    plugins here, nor the tool (its API server token, the kubelet's metrics token)."""
    import os

    os.environ.pop(KEY_LOG_ENV, None)


def within(deadline: Deadline, work: Callable[[], bytes]) -> bytes | BaseException | None:
    """``work()`` on a worker thread: its result, what it raised, or ``None`` when the deadline
    passed first (the worker is then left behind: the process exits with _exit)."""
    outcome: list[bytes | BaseException] = []
    # A bare thread and a lock, not the threading module (its import is paid by every cache hit).
    done = _thread.allocate_lock()
    done.acquire()

    def work_then_release() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # noqa: BLE001 - reported as one line by the caller
            outcome.append(exc)
        finally:
            done.release()

    try:
        _thread.start_new_thread(work_then_release, ())
    except RuntimeError:  # no thread to be had: a limit on the kubelet's processes or memory
        return _here(deadline, work)
    done.acquire(timeout=max(0.0, deadline.remaining()))
    return outcome[0] if outcome else None


class _Late(BaseException):
    """The deadline's alarm, raised into work run on this thread: no error (as KeyboardInterrupt
    is none), so that no handler of an error takes it (the routes turn a CredproviderError into
    their one line); raised again every :data:`_LATE_AGAIN` seconds until the work ends, should
    a bare ``except BaseException`` on the way take it once."""


_LATE_AGAIN: Final = 0.2


def _here(deadline: Deadline, work: Callable[[], bytes]) -> bytes | BaseException | None:
    """:func:`within` on this thread, where no other can be started (RLIMIT_NPROC, a cgroup's
    pids.max reached under the kubelet, a memory limit too tight for a thread's stack): an alarm
    at the deadline interrupts the work, as the worker would have been left behind."""
    import signal

    def late(_signum: int, _frame: object) -> None:
        raise _Late

    previous = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, max(0.001, deadline.remaining()), _LATE_AGAIN)
    try:
        return work()
    except _Late:
        return None
    except BaseException as exc:  # noqa: BLE001 - reported as one line by the caller
        return exc
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run(
    spec: PluginSpec,
    argv: list[str],
    *,
    stdin: IO[bytes],
    stdout: IO[bytes],
    stderr: IO[str],
    environ: Mapping[str, str],
    now: Callable[[], float] = time.time,
    spent_before_run: float = 0.0,
) -> int:
    """Serve one request and return the exit status. Never raises.

    ``spent_before_run`` is the time the process already used (start-up): the deadline counts from exec.
    """
    log = Logger(spec.name, 0, stderr)
    try:
        opts, rest = split_common_args(argv)
        log.verbosity = opts.verbosity
        if opts.show_version and (rest or environ.get(START_CHECK_ENV)) and not opts.show_help:
            # As the upstream Go plugins do (their flags are parsed before --version acts), a
            # plugin refuses arguments it cannot run with even then: `credprovider validate` runs
            # each provider's args with --version appended, and a provider that fails every pull
            # must not read as working; the tool's start check reads the settings a pull reads.
            checking = Context(deadline=Deadline(5.0), log=log, environ=environ, now=now)
            checked = spec.check if spec.check and environ.get(START_CHECK_ENV) else spec.build
            checked(rest, checking)
        if opts.show_help or opts.show_version:
            return _show_help_or_version(spec, opts.show_help, stdout, stderr)
        cache_dir = opts.cache_dir or environ.get(CACHE_DIR_ENV) or None
        deadline_seconds = _deadline_seconds(opts, environ, log)
        _enter_test_mode(environ, log)
        for ignored in opts.ignored:
            log.v(2, f"ignoring klog flag {ignored}")
    except ProviderError as exc:
        log.error(str(exc))
        return 1
    except Exception as exc:  # noqa: BLE001 - never a traceback: one line, as for a fetch's
        log.error(_describe_failure(exc, log))
        return 1

    deadline = Deadline(deadline_seconds, already_spent=spent_before_run)
    ctx = Context(deadline=deadline, log=log, environ=environ, now=now)
    restore_environment = environment_restorer(environ)
    result = within(deadline, lambda: respond(spec, rest, stdin, ctx, cache_dir))
    restore_environment()  # in process, a fetch abandoned at the deadline leaves its environment
    if result is None:
        log.error(_deadline_message(deadline_seconds, deadline.phase))
        return 1
    if isinstance(result, BaseException):
        log.error(_describe_failure(result, log))
        return 1
    try:
        stdout.write(result)
        stdout.flush()
    except OSError as exc:
        log.error(f"could not write the response to stdout: {exc}")
        return 1
    return 0


def _show_help_or_version(
    spec: PluginSpec, show_help: bool, stdout: IO[bytes], stderr: IO[str]
) -> int:
    """``--help`` (on stderr, as klog-style tools do) or ``--version`` (on stdout): no request read."""
    if show_help:
        stderr.write(help_text(spec))
        return 0
    from credprovider.version import version_text

    stdout.write(version_text(spec.name).encode())
    stdout.flush()
    return 0


def _enter_test_mode(environ: Mapping[str, str], log: Logger) -> None:
    """Loopback-only test mode, when the environment asks for it (announced on stderr)."""
    try:
        notice = loopback.activate_from_env(environ)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if notice:
        log.warning(notice)


def main(spec: PluginSpec, argv: list[str]) -> NoReturn:
    """Process entry point: run and exit without waiting for a stuck worker thread. A standard
    stream closed at exec is handled (``runtime.stdio``), never a traceback."""
    from credprovider.runtime.stdio import flush_quietly, standard_streams

    stdin, stdout, stderr = standard_streams()
    code = run(
        spec,
        argv,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        environ=_os.process_environ(),
        spent_before_run=seconds_since_exec(),
    )
    flush_quietly()
    _os._exit(code)

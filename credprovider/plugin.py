"""The exec runtime shared by every plugin: stdin → provider → stdout, written once for all clouds.

A provider implements :class:`Provider` (``get_credentials(request, ctx) -> Credentials``) and never
touches stdin, stdout or the process exit code. The runtime:

* reads stdin (at most :data:`MAX_REQUEST_BYTES`), validates the request, calls the provider and writes
  exactly one response on stdout, exit 0;
* on any failure writes nothing to stdout, prints one line on stderr and exits 1;
* answers before its own deadline (default :data:`DEFAULT_DEADLINE_SECONDS`, ``--deadline`` or
  ``CREDPROVIDER_DEADLINE``), which is shorter than the kubelet's fixed 60 s kill;
* turns the credential's expiry into ``cacheDuration`` with one policy (:func:`cache_duration_for`);
* logs only to stderr, quiet by default, every line scrubbed of secrets (:mod:`credprovider.redact`).

Stdlib only: nothing here may import an SDK, pydantic or YAML.
"""

from __future__ import annotations

import _thread
import os
import sys
import time

from credprovider import loopback
from credprovider._typing import IO, TYPE_CHECKING, Final, NamedTuple, NoReturn, Protocol
from credprovider.api import (
    CACHE_KEY_REGISTRY,
    SECOND,
    AuthConfig,
    CredentialProviderRequest,
    CredentialProviderResponse,
    DurationError,
    RequestError,
    encode_response,
    format_go_duration,
    go_quote,
    parse_go_duration,
    parse_request,
)
from credprovider.errors import ProviderError, UsageError
from credprovider.matching import bare_registry_host
from credprovider.redact import clip, register_secret, safe_line, scrub

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from importlib.machinery import ModuleSpec
    from types import ModuleType

    from credprovider.cache import CacheDir, CacheScope

MAX_REQUEST_BYTES: Final = 1 << 20
DEFAULT_DEADLINE_SECONDS: Final = 50.0
DEADLINE_ENV: Final = "CREDPROVIDER_DEADLINE"
CACHE_DIR_ENV: Final = "CREDPROVIDER_CACHE_DIR"
KUBELET_TIMEOUT_SECONDS: Final = 60.0
# No registry credential lives this long; an expiry further away is not believed (see below).
MAX_VALIDITY_SECONDS: Final = 366 * 24 * 3600.0
# A longer --deadline is refused: it could only be a typo (and would overflow the thread join).
MAX_DEADLINE_SECONDS: Final = 3600.0
TRACEBACK_VERBOSITY: Final = 4
# The one account of the levels: --help prints it and the README quotes it (a test checks both).
VERBOSITY_SCHEME: Final = (
    "0 quiet, 1 decisions (credential source, route, cacheDuration), 2 retries and SDK warnings, "
    "4 HTTP requests and tracebacks, 6 SDK debug"
)
SDK_WARNING_VERBOSITY: Final = 2
SDK_DEBUG_VERBOSITY: Final = 6

# klog flags the upstream Go plugins accept; we accept them too so existing configs keep working.
_KLOG_BOOL_FLAGS: Final = frozenset(
    {
        "logtostderr",
        "alsologtostderr",
        "skip_headers",
        "skip_log_headers",
        "one_output",
        "add_dir_header",
        "log-json-split-stream",
    }
)
_KLOG_VALUE_FLAGS: Final = frozenset(
    {
        "stderrthreshold",
        "vmodule",
        "log-flush-frequency",
        "log_dir",
        "log_file",
        "log_file_max_size",
        "log_backtrace_at",
        "logging-format",
        "log-json-info-buffer-size",
    }
)


DETAIL_LIMIT: Final = 300


def one_line(detail: object) -> str:
    """An SDK's error text as one line of at most :data:`DETAIL_LIMIT` characters: scrubbed first,
    then cut (a secret cut in half would no longer be recognised)."""
    return clip(" ".join(scrub(str(detail)).split()), DETAIL_LIMIT)


class Credentials(NamedTuple):
    """What a provider returns.

    ``expires_at`` (Unix seconds) of the shortest-lived credential drives ``cacheDuration`` through
    :func:`cache_duration_for`; an explicit ``cache_duration`` (nanoseconds) wins over it. With
    neither, ``cacheDuration`` is omitted and the kubelet applies the config's ``defaultCacheDuration``.
    """

    auth: Mapping[str, AuthConfig]
    cache_key_type: str = CACHE_KEY_REGISTRY
    expires_at: float | None = None
    cache_duration: int | None = None


def cache_duration_for(expires_at: float, now: float) -> int:
    """The one cache policy: half the remaining validity, in whole seconds (as nanoseconds).

    Half, because the kubelet keeps using a cached credential for the whole duration and the runtime
    may still be pulling with it afterwards; the margin also absorbs clock skew. A credential with
    less than 2 s left yields ``0`` ("do not cache") rather than an omitted duration, which would let
    the config default cache an expired token for hours. So does an expiry that is no time at all
    (NaN, infinite, or more than :data:`MAX_VALIDITY_SECONDS` away): whatever a server or a cache
    file claims, the answer is well-formed and never cached on a made-up lifetime.
    """
    remaining = expires_at - now
    if not 0 <= remaining <= MAX_VALIDITY_SECONDS:  # also false for NaN
        return 0
    return int(remaining // 2) * SECOND


def seconds_since_exec() -> float:
    """How long this process has run (interpreter start-up included); 0 where it cannot be read.

    The kubelet's 60 s start at exec, so the plugin's deadline does too.
    """
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as handle:
            uptime = float(handle.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, in clock ticks
        return max(0.0, min(uptime - started, 5.0))
    except (OSError, ValueError, IndexError):
        return 0.0


class Deadline:
    """The time the plugin has left; providers size their timeouts and retries with it."""

    def __init__(
        self,
        seconds: float,
        clock: Callable[[], float] = time.monotonic,
        already_spent: float = 0.0,
    ) -> None:
        self.seconds = seconds
        self._clock = clock
        self._end = clock() + seconds - already_spent
        self.phase = "starting"

    def remaining(self) -> float:
        return max(0.0, self._end - self._clock())

    def timeout(self, cap: float, floor: float = 0.05) -> float:
        """A per-call timeout: at most ``cap`` and never past the deadline."""
        return max(floor, min(cap, self.remaining()))


class Logger:
    """klog-style verbosity on stderr; every line passes through :func:`scrub`."""

    def __init__(self, name: str, verbosity: int, stream: IO[str]) -> None:
        self.name = name
        self.verbosity = verbosity
        self._stream = stream
        self._lock = _thread.allocate_lock()

    def _emit(self, prefix: str, message: str) -> None:
        line = safe_line(message)
        with self._lock:
            try:
                self._stream.write(f"{self.name}: {prefix}{line}\n")
                self._stream.flush()
            except (OSError, ValueError):
                pass  # stderr closed: nothing useful left to do

    def v(self, level: int, message: str) -> None:
        """Log ``message`` when running with ``-v=level`` or higher."""
        if self.verbosity >= level:
            self._emit("", message)

    def warning(self, message: str) -> None:
        self._emit("warning: ", message)

    def error(self, message: str) -> None:
        self._emit("error: ", message)


def route_sdk_logging(log: Logger) -> None:
    """Capture all ``logging`` output: SDK warnings at -v=2, SDK debug at -v=6, always scrubbed.

    Called just before a provider fetches. ``logging`` (with traceback, string, weakref and
    threading) is a sizeable share of a cache miss, and the stdlib paths (ECR, GCE metadata, Azure
    IMDS and exchange) never log through it; so unless something has loaded it already, the routing
    is applied by an import hook at the moment an SDK first imports ``logging``. Either way no
    record can reach Python's last-resort handler, which would print it unscrubbed.
    """
    if "logging" in sys.modules:
        _route(log)
    elif not any(isinstance(finder, _RouteLoggingOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RouteLoggingOnImport(log))


def _route(log: Logger) -> None:
    import logging

    class SdkLogHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a broken log call must not fail the request
                message = str(record.msg)
            level = (
                SDK_WARNING_VERBOSITY if record.levelno >= logging.WARNING else SDK_DEBUG_VERBOSITY
            )
            log.v(level, f"[{record.name}] {message}")

    root = logging.getLogger()
    root.handlers[:] = [SdkLogHandler()]
    root.setLevel(logging.DEBUG if log.verbosity >= SDK_DEBUG_VERBOSITY else logging.WARNING)


class _RouteLoggingOnImport:
    """A meta path finder for ``logging`` alone: it imports the real module (having stepped out of
    the way), routes it, and hands the import system that same module object."""

    def __init__(self, log: Logger) -> None:
        self._log = log

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if name != "logging":
            return None
        sys.meta_path[:] = [finder for finder in sys.meta_path if finder is not self]
        import logging

        _route(self._log)
        # The import system would take an entry already in sys.modules as a reason to load the
        # module again, from its own spec: it gets the loaded module back from ours instead.
        del sys.modules["logging"]
        spec: ModuleSpec = type(sys.__spec__)("logging", _LoadedModule(logging))  # type: ignore[arg-type]
        return spec


class _LoadedModule:
    """The loader of a module that is already loaded: the import system gets it unchanged."""

    def __init__(self, module: ModuleType) -> None:
        self._module = module
        self._spec = module.__spec__

    def create_module(self, spec: object) -> ModuleType:
        return self._module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # the import system set ours; keep the real one
        if self._spec is not None:
            module.__loader__ = self._spec.loader


class Context:
    """What a provider gets besides the request: deadline, logger, environment, clock."""

    def __init__(
        self,
        deadline: Deadline,
        log: Logger,
        environ: Mapping[str, str],
        now: Callable[[], float] = time.time,
    ) -> None:
        self.deadline = deadline
        self.log = log
        self.environ = environ
        self.now = now


class Provider(Protocol):
    """The seam each cloud implements. Optionally it also has ``cache_scope(request, ctx)`` returning
    a :class:`credprovider.cache.CacheScope` (or ``None``): which registry and identity (no secrets)
    an answer is for. It must not import an SDK or fetch anything, so a cache hit stays light."""

    def get_credentials(self, request: CredentialProviderRequest, ctx: Context) -> Credentials: ...


class PluginSpec(NamedTuple):
    """One plugin name: how to build its provider from its own arguments."""

    name: str
    summary: str
    build: Callable[[list[str], Context], Provider]
    arguments_help: str = ""


def parse_arguments(
    args: list[str], options: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """Parse a plugin's own arguments: ``options`` maps each spelling (``--authFlow``, ``-a``) to a
    destination; every option takes a value (``--flag value`` or ``--flag=value``).

    Returns (values, positionals). Unknown flags raise :class:`UsageError`. Small on purpose:
    argparse would cost every exec a few milliseconds of imports.
    """
    values: dict[str, str] = {}
    positionals: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("-") or arg == "-":
            positionals.append(arg)
            continue
        name, has_value, value = arg.partition("=")
        destination = options.get(name)
        if destination is None:
            # Flags are case-sensitive (upstream's are Go flags): say so for a case slip.
            same = [known for known in options if known.lower() == name.lower()]
            hint = f"; did you mean {same[0]}?" if same else ""
            raise UsageError(f"unrecognized arguments: {arg}{hint} (see --help)")
        if not has_value:
            if i >= len(args):
                raise UsageError(f"argument {name}: expected one argument (see --help)")
            value = args[i]
            i += 1
        values[destination] = value
    return values, positionals


class CommonOptions:
    """The runtime's own flags (see :func:`split_common_args`)."""

    def __init__(self) -> None:
        self.verbosity = 0
        self.deadline: float | None = None
        self.cache_dir: str | None = None
        self.show_version = False
        self.show_help = False
        self.ignored: list[str] = []


def _flag_name(arg: str) -> tuple[str, str | None]:
    name, sep, value = arg.lstrip("-").partition("=")
    return name, (value if sep else None)


def split_common_args(argv: list[str]) -> tuple[CommonOptions, list[str]]:
    """Take the runtime's own flags out of ``argv``; return them and the provider's arguments.

    Understood: ``-v N``/``-v=N``/``--v=N`` (klog verbosity), bare ``-v``/``--version`` (as the
    upstream ECR plugin), ``-h``/``--help``, ``--deadline D``, and klog's logging flags (ignored).
    """
    opts = CommonOptions()
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            rest.extend(argv[i - 1 :])
            break
        if not arg.startswith("-") or arg == "-":
            rest.append(arg)
            continue
        name, value = _flag_name(arg)
        if name == "v":
            if value is None and i < len(argv) and argv[i].lstrip("-").isdigit():
                value = argv[i]
                i += 1
            if value is None:
                opts.show_version = True
                continue
            if not value.isdigit():
                raise UsageError(f"invalid verbosity {value!r} for -v: expected a number like -v=4")
            opts.verbosity = int(value)
        elif name == "version":
            opts.show_version = True
        elif name in ("h", "help"):
            opts.show_help = True
        elif name in ("deadline", "cache-dir"):
            if value is None:
                if i >= len(argv):
                    example = "a value such as 30s" if name == "deadline" else "a directory"
                    raise UsageError(f"--{name} needs {example}")
                value = argv[i]
                i += 1
            if name == "deadline":
                opts.deadline = parse_deadline(value, "--deadline")
            else:
                opts.cache_dir = value
        elif name in _KLOG_BOOL_FLAGS:
            opts.ignored.append(arg)
        elif name in _KLOG_VALUE_FLAGS:
            if value is None and i < len(argv):
                i += 1
            opts.ignored.append(arg)
        else:
            rest.append(arg)
    return opts, rest


def parse_deadline(value: str, source: str) -> float:
    """A deadline as a Go duration (``30s``) or plain seconds (``30``); must be positive."""
    try:
        seconds = (
            float(value)
            if value.replace(".", "", 1).isdigit()
            else (parse_go_duration(value) / SECOND)
        )
    except DurationError:
        raise UsageError(f"{source}: {value!r} is not a duration like 30s") from None
    if not 0 < seconds <= MAX_DEADLINE_SECONDS:
        raise UsageError(
            f"{source}: the deadline must be more than 0 and at most "
            f"{MAX_DEADLINE_SECONDS:.0f}s (the kubelet kills a plugin after "
            f"{KUBELET_TIMEOUT_SECONDS:.0f}s), got {clip(value, 40)!r}"
        )
    return seconds


def _help_text(spec: PluginSpec) -> str:
    return f"""usage: {spec.name} [flags]{" " + spec.arguments_help.splitlines()[0] if spec.arguments_help else ""}

{spec.summary}

The kubelet runs this plugin for image pulls that match the provider's matchImages: it writes one
CredentialProviderRequest (JSON) on stdin and reads one CredentialProviderResponse from stdout.
To try it by hand:

  echo '{{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":"IMAGE"}}' | {spec.name} [args] -v=4

{spec.arguments_help}
Common flags:
  -v=N, --v=N        log verbosity on stderr, default 0: {VERBOSITY_SCHEME}. Secrets are always
                     redacted
  --deadline=D       answer (or fail) within D, default {DEFAULT_DEADLINE_SECONDS:.0f}s; env {DEADLINE_ENV}.
                     Keep it under the kubelet's fixed 60s.
  --cache-dir=DIR    keep credentials across execs in DIR (0700, files 0600), shared by concurrent
                     execs; env CREDPROVIDER_CACHE_DIR
  --version, -v      print the version and exit
  -h, --help         this help
  klog flags (--logtostderr, --vmodule, ...) are accepted and ignored.

Exit status: 0 with one JSON response on stdout; 1 with one error line on stderr and nothing on stdout.
"""


def read_request(stdin: IO[bytes]) -> bytes:
    """Read the whole request, refusing more than :data:`MAX_REQUEST_BYTES`."""
    if stdin.isatty():
        raise RequestError(
            "stdin is a terminal: pipe a CredentialProviderRequest JSON into this plugin "
            "(see --help for an example)"
        )
    data = stdin.read(MAX_REQUEST_BYTES + 1)
    if len(data) > MAX_REQUEST_BYTES:
        raise RequestError(f"request on stdin is larger than {MAX_REQUEST_BYTES >> 20} MiB")
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


def get_with_cache(
    provider: Provider, request: CredentialProviderRequest, ctx: Context, cache_dir: str | None
) -> Credentials:
    """Answer from the persistent cache when enabled and fresh, else fetch (and store).

    Concurrent execs for the same registry and identity wait on one lock, so one cloud call serves
    them all. Cache problems never fail the request: the plugin then runs uncached.
    """

    def fetch() -> Credentials:
        route_sdk_logging(ctx.log)
        return provider.get_credentials(request, ctx)

    scope_of = getattr(provider, "cache_scope", None)
    if not cache_dir or scope_of is None:
        return fetch()
    if request.service_account_token:
        ctx.log.v(
            1, "cache: not used for service account token requests (the kubelet caches those)"
        )
        return fetch()
    from credprovider import cache

    try:
        directory = cache.open_cache(cache_dir)
    except cache.CacheUnavailable as exc:
        ctx.log.warning(f"{exc}: running uncached")
        return fetch()
    try:
        scope = scope_of(request, ctx)
        if scope is None:
            return fetch()
        return _through_cache(directory, scope, fetch, ctx)
    finally:
        directory.close()


def _through_cache(
    directory: CacheDir, scope: CacheScope, fetch: Callable[[], Credentials], ctx: Context
) -> Credentials:
    """Serve ``scope`` from ``directory``, or fetch and store it under its lock.

    A fresh entry is read without the lock (entries are renamed into place whole, so a reader sees
    an old one or a new one, never part of one): a cache hit takes no lock. Otherwise the lock is
    taken and the entry read again, since another exec may have stored it meanwhile.
    """
    from credprovider.cache import CacheEntry, KeyLock

    hit = CacheEntry(directory, scope).load(ctx.now())
    if hit is not None:
        ctx.log.v(1, f"cache: hit for {scope.registry} ({scope.key}.json)")
        return hit
    lock = KeyLock(directory, scope)
    try:
        entry = lock.acquire(ctx)
    except OSError as exc:
        lock.release()
        ctx.log.warning(f"cache: cannot lock in {directory.path}: {exc}: running uncached")
        return fetch()
    try:
        if entry is None:
            return fetch()
        hit = entry.load(ctx.now())
        if hit is not None:
            ctx.log.v(1, f"cache: hit for {scope.registry} ({entry.name})")
            return hit
        if entry.problem:
            ctx.log.v(1, f"cache: ignoring {entry.name}: {entry.problem}; fetching anew")
        ctx.deadline.phase = "getting credentials (cache miss)"
        creds = fetch()
        try:
            if entry.store(creds, ctx.now()):
                ctx.log.v(1, f"cache: stored {scope.registry} in {entry.name}")
        except OSError as exc:
            ctx.log.warning(f"cache: cannot write {entry.path}: {exc.strerror or exc}")
        return creds
    finally:
        lock.release()


def _describe_failure(exc: BaseException, log: Logger) -> str:
    if isinstance(exc, RequestError):
        return f"invalid request: {exc}"
    if isinstance(exc, ProviderError):
        return str(exc)
    if log.verbosity >= TRACEBACK_VERBOSITY:
        import traceback

        for line in traceback.format_exception(exc):
            for part in line.rstrip("\n").split("\n"):
                log.v(TRACEBACK_VERBOSITY, part)
    detail = str(exc) or "no detail"
    return (
        f"internal error: {type(exc).__name__}: {detail} "
        f"(rerun with -v={TRACEBACK_VERBOSITY} for a traceback and report it)"
    )


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
        if opts.show_help:
            stderr.write(_help_text(spec))
            return 0
        if opts.show_version:
            from credprovider.version import version_text

            stdout.write(version_text(spec.name).encode())
            stdout.flush()
            return 0
        cache_dir = opts.cache_dir or environ.get(CACHE_DIR_ENV) or None
        deadline_seconds = opts.deadline
        if deadline_seconds is None and environ.get(DEADLINE_ENV):
            deadline_seconds = parse_deadline(environ[DEADLINE_ENV], DEADLINE_ENV)
        if deadline_seconds is None:
            deadline_seconds = DEFAULT_DEADLINE_SECONDS
        if deadline_seconds >= KUBELET_TIMEOUT_SECONDS:
            log.warning(
                f"the deadline {deadline_seconds:g}s is not shorter than the kubelet's "
                f"{KUBELET_TIMEOUT_SECONDS:.0f}s kill: the kubelet may kill this plugin first"
            )
        try:
            notice = loopback.activate_from_env(environ)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if notice:
            log.warning(notice)
        for ignored in opts.ignored:
            log.v(2, f"ignoring klog flag {ignored}")
    except ProviderError as exc:
        log.error(str(exc))
        return 1

    deadline = Deadline(deadline_seconds, already_spent=spent_before_run)
    ctx = Context(deadline=deadline, log=log, environ=environ, now=now)
    outcome: list[bytes | BaseException] = []

    def serve() -> None:
        try:
            deadline.phase = "reading the plugin arguments"
            provider = spec.build(rest, ctx)
            deadline.phase = "reading the request from stdin"
            request = parse_request(read_request(stdin))
            register_secret(request.service_account_token)
            log.v(
                1,
                f"request: apiVersion={request.api_version} image={go_quote(clip(request.image))}"
                f"{' with a service account token' if request.service_account_token else ''}",
            )
            bare_host = bare_registry_host(request.image)
            if bare_host is not None:
                # The kubelet matched it by that host; as a reference it would be a Docker Hub name.
                raise ProviderError(
                    f"the image {go_quote(clip(request.image))} names only a registry host, no "
                    f"repository: did you mean {bare_host}/<repository>? (fix the pod's image)"
                )
            deadline.phase = "getting credentials"
            creds = get_with_cache(provider, request, ctx, cache_dir)
            answered_at = now()
            response = build_response(request, creds, answered_at)
            log.v(
                1,
                f"answering: cacheKeyType={response.cache_key_type} "
                f"cacheDuration={cache_duration_account(creds, response, answered_at)} "
                f"keys={sorted(response.auth)}",
            )
            outcome.append(encode_response(response))
        except BaseException as exc:  # noqa: BLE001 - reported as one line below
            outcome.append(exc)

    # A bare thread and a lock, not the threading module (its import is paid by every cache hit): the
    # lock is released when serve() ends, and the process exits with os._exit whether or not it did.
    done = _thread.allocate_lock()
    done.acquire()

    def serve_then_release() -> None:
        try:
            serve()
        finally:
            done.release()

    _thread.start_new_thread(serve_then_release, ())
    done.acquire(timeout=max(0.0, deadline.remaining()))
    if not outcome:
        log.error(
            f"no answer within the {deadline_seconds:g}s deadline while {deadline.phase}: "
            "check that the endpoint is reachable from this node (proxy, firewall, metadata "
            f"service), or raise --deadline/{DEADLINE_ENV} (below 60s)"
        )
        return 1
    result = outcome[0]
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


def main(spec: PluginSpec, argv: list[str]) -> NoReturn:
    """Process entry point: run and exit without waiting for a stuck worker thread."""
    code = run(
        spec,
        argv,
        stdin=sys.stdin.buffer,
        stdout=sys.stdout.buffer,
        stderr=sys.stderr,
        environ=os.environ,
        spent_before_run=seconds_since_exec(),
    )
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 - contextlib is not on the exec path
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)

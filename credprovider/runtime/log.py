"""klog-style logging on stderr (every line scrubbed of secrets), and the SDKs' ``logging`` routed
into it without importing ``logging`` unless an SDK does."""

from __future__ import annotations

import _thread
import sys

from credprovider._typing import IO, TYPE_CHECKING, Final
from credprovider.runtime.redact import safe_line

if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType

TRACEBACK_VERBOSITY: Final = 4


# The one account of the levels: --help prints it and the README quotes it (a test checks both).
VERBOSITY_SCHEME: Final = (
    "0 quiet, 1 decisions (credential source, route, cacheDuration), 2 retries and SDK warnings, "
    "4 HTTP requests and tracebacks, 6 SDK debug"
)


SDK_WARNING_VERBOSITY: Final = 2


SDK_DEBUG_VERBOSITY: Final = 6


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

"""klog-style logging on stderr (every line scrubbed of secrets), and the SDKs' ``logging`` routed
into it without importing ``logging`` unless an SDK does."""

from __future__ import annotations

import _thread

from credprovider.runtime._typing import IO, TYPE_CHECKING, Final
from credprovider.runtime.redact import safe_line

if TYPE_CHECKING:
    pass

TRACEBACK_VERBOSITY: Final = 4


# The one account of the levels: --help prints it and docs/clouds.md quotes it (a test checks both).
VERBOSITY_SCHEME: Final = (
    "0 quiet, 1 decisions (credential source, route, cacheDuration), 2 retries and SDK warnings, "
    "4 HTTP requests and tracebacks, 6 SDK debug"
)


SDK_WARNING_VERBOSITY: Final = 2


SDK_DEBUG_VERBOSITY: Final = 6

# Every stderr line is "<plugin name>: <kind><text>". The kinds: a warning, the failure line, the
# request and the answer serve logs at -v=1; any other line is a decision. The tool's get reads a
# plugin's stderr with decisions() below, so both sides share these words.
WARNING_KIND: Final = "warning: "
ERROR_KIND: Final = "error: "
REQUEST_KIND: Final = "request: "
ANSWER_KIND: Final = "answering: "


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
        self._emit(WARNING_KIND, message)

    def error(self, message: str) -> None:
        self._emit(ERROR_KIND, message)


def decisions(stderr: str, name: str) -> list[str]:
    """What a plugin's stderr says it decided (its -v=1 lines), less its warnings, its failure line
    and the request and answer it logs."""
    prefix = f"{name}: "
    said = []
    for line in stderr.splitlines():
        text = line.removeprefix(prefix)
        if text == line or text.startswith((WARNING_KIND, ERROR_KIND, REQUEST_KIND, ANSWER_KIND)):
            continue
        said.append(text)
    return said


def route_sdk_logging(log: Logger) -> None:
    """Capture all ``logging`` output: SDK warnings at -v=2, SDK debug at -v=6, always scrubbed.

    Called just before a provider fetches. ``logging`` (with traceback, string, weakref and
    threading) is a sizeable share of a cache miss, and the stdlib paths (ECR, GCE metadata, Azure
    IMDS and exchange) never log through it; so unless something has loaded it already, the routing
    is applied by an import hook at the moment an SDK first imports ``logging``. Either way no
    record can reach Python's last-resort handler, which would print it unscrubbed.
    """
    from credprovider.runtime.importhook import when_imported

    when_imported("logging", lambda: _route(log))


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

"""A profile's ``credential_process``, run for botocore under the plugin's deadline and caps.

botocore runs it with ``Popen(...).communicate()``: no time limit (a helper that hangs held the
plugin to its deadline, was then blamed on the network, and was left running after the plugin
exited: one more process on the node at each pull), its whole output read into memory, and every
fault of the helper said as the service's or an internal error (a helper that is not there, an
answer that is no JSON object, a failure's stderr that is not UTF-8). botocore's
``ProcessProvider`` takes the ``popen`` to use (its constructor's seam); :func:`bounded_popen` is
given to it (aws/botocore_api.read_for_it), so the helper runs in a session of its own, is stopped
with its whole process group before the deadline, its output capped, and what it answers is
checked before botocore reads it. Each fault is one line about the helper.
"""

from __future__ import annotations

import os
import subprocess
import time

from credprovider.errors import ProviderError
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

# An answer is a few hundred bytes of JSON; a failure's stderr a few lines.
MAX_ANSWER_BYTES: Final = 1 << 20
MAX_STDERR_BYTES: Final = 64 << 10
# Stopped this long before the deadline, so that its line, not the deadline's, is printed.
MARGIN_SECONDS: Final = 0.5
# The bound when no fetch's deadline is known (botocore asked outside one): below the kubelet's.
FALLBACK_SECONDS: Final = 45.0
FIX: Final = "fix the profile's credential_process (AWS_CONFIG_FILE, AWS_PROFILE)"


class ProcessFailed(ProviderError):
    """The credential_process could not give credentials: the node's helper to fix."""


def bounded_popen(remaining: Callable[[], float]) -> Callable[..., Run]:
    """``ProcessProvider``'s ``popen``: each call runs the helper as a :class:`Run`, bounded by
    ``remaining()`` (the fetch's time left, read when the helper starts)."""

    def popen(args: Sequence[str], **_: Any) -> Run:  # botocore passes stdout= and stderr= PIPE
        return Run(list(args), remaining())

    return popen


class Run:
    """What botocore uses of a ``Popen``: :meth:`communicate` and ``returncode``."""

    def __init__(self, argv: list[str], remaining: float) -> None:
        from credprovider.runtime.excerpt import clip
        from credprovider.runtime.redact import printable

        budget = FALLBACK_SECONDS if remaining == float("inf") else remaining - MARGIN_SECONDS
        self.until = time.monotonic() + max(0.0, budget)
        self.name = clip(printable(argv[0] if argv else ""), 128)
        self.returncode: int | None = None
        if not argv:
            raise ProcessFailed("the profile's credential_process is empty", FIX)
        try:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: stopped whole
            )
        except (OSError, ValueError) as exc:
            from credprovider.runtime.nodefile import reason

            raise ProcessFailed(f"{self._said()} cannot be run: {reason(exc)}", FIX) from None

    def _said(self) -> str:
        return f"the profile's credential_process {self.name}"

    def communicate(self) -> tuple[bytes, bytes]:
        """Its whole answer, checked: raises :class:`ProcessFailed` for any fault of the helper
        (too slow, too much output, a failure, an answer botocore could not use)."""
        finished = False
        try:
            out, err = self._collect()
            self.returncode = self.process.wait(timeout=max(0.0, self.until - time.monotonic()))
            finished = True
        except subprocess.TimeoutExpired:
            raise self._too_slow() from None
        finally:
            self._stop(whole_group=not finished)
        if self.returncode != 0:
            from credprovider.runtime.provider import one_line

            text = err.decode("utf-8", "replace")
            first = next((line for line in text.splitlines() if line.strip()), "")
            said = f": {one_line(first)}" if first else " (it wrote nothing on stderr)"
            raise ProcessFailed(
                f"{self._said()} failed with exit status {self.returncode}{said}", FIX
            )
        _check_answer(out, self._said())
        return out, b""

    def _collect(self) -> tuple[bytes, bytes]:
        """stdout and stderr until both close, within the bound and the caps."""
        import selectors

        assert self.process.stdout is not None and self.process.stderr is not None
        pipes = {self.process.stdout.fileno(): "stdout", self.process.stderr.fileno(): "stderr"}
        caps = {"stdout": MAX_ANSWER_BYTES, "stderr": MAX_STDERR_BYTES}
        read: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        sizes = dict.fromkeys(caps, 0)
        with selectors.DefaultSelector() as selector:
            for fd in pipes:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                left = self.until - time.monotonic()
                if left <= 0:
                    raise self._too_slow()
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        selector.unregister(key.fd)
                        continue
                    where = pipes[key.fd]
                    read[where].append(chunk)
                    sizes[where] += len(chunk)
                    if sizes[where] > caps[where]:
                        raise ProcessFailed(
                            f"{self._said()} wrote more than {caps[where] >> 10} KiB on {where}: "
                            "stopped",
                            FIX,
                        )
        return b"".join(read["stdout"]), b"".join(read["stderr"])

    def _too_slow(self) -> ProcessFailed:
        return ProcessFailed(
            f"{self._said()} did not answer before the deadline: stopped",
            "make it answer sooner, or raise --deadline/CREDPROVIDER_DEADLINE (below 60s)",
        )

    def _stop(self, whole_group: bool) -> None:
        """Its pipes closed; the helper stopped if it still runs, and after a fault every process
        of its group (a child it left holding the pipes), none of them left on the node."""
        import contextlib
        import signal

        if whole_group or self.process.poll() is None:
            with contextlib.suppress(OSError):  # the group may be gone already
                os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


def _check_answer(out: bytes, said: str) -> None:
    """The answer as botocore will read it (``json.loads``, ``Version`` 1, the two keys), checked
    with the plugins' JSON caps so that a wrong one is the helper's line, not botocore's
    exception read as the service's answer; its secrets are registered for redaction."""
    from credprovider.runtime.answer import BadAnswer, decode_json
    from credprovider.runtime.redact import register_secret

    try:
        answer = decode_json(out)
    except BadAnswer as exc:
        raise ProcessFailed(f"{said} answered JSON that {exc.predicate}", FIX) from None
    except ValueError:
        raise ProcessFailed(f"{said} answered no JSON on stdout", FIX) from None
    if not isinstance(answer, dict):
        raise ProcessFailed(f"{said} answered JSON that is not an object", FIX)
    for key in ("SecretAccessKey", "SessionToken"):
        if isinstance(answer.get(key), str) and answer[key]:
            register_secret(answer[key])
    expiration = answer.get("Expiration")
    if expiration is not None and not isinstance(expiration, str):
        raise ProcessFailed(f'{said} answered an "Expiration" that is not a time', FIX)
    if answer.get("Version") != 1:
        raise ProcessFailed(f'{said} answered no "Version": 1', FIX)
    missing = [
        key
        for key in ("AccessKeyId", "SecretAccessKey")
        if not isinstance(answer.get(key), str) or not answer[key]
    ]
    if missing:
        raise ProcessFailed(f"{said} answered no {' and no '.join(missing)}", FIX)

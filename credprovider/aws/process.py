"""A profile's ``credential_process``, run for botocore under the plugin's deadline and caps.

botocore runs it with ``Popen(...).communicate()`` (credprovider/runtime/child.py says what that
cost), and every fault of the helper was said as the service's or an internal error (a helper that
is not there, an answer that is no JSON object, a failure's stderr that is not UTF-8). botocore's
``ProcessProvider`` takes the ``popen`` to use (its constructor's seam): :func:`bounded_popen` is
given to it (aws/botocore_chain.read_for_it), so the helper runs through
:func:`~credprovider.runtime.child.run_bounded` and what it answers is checked before botocore
reads it. Each fault is one line about the helper.
"""

from __future__ import annotations

from credprovider.errors import ProviderError
from credprovider.runtime._typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

FIX: Final = "fix the profile's credential_process (AWS_CONFIG_FILE, AWS_PROFILE)"
SLOW_FIX: Final = "make it answer sooner, or raise --deadline/CREDPROVIDER_DEADLINE (below 60s)"


class ProcessFailed(ProviderError):
    """The credential_process could not give credentials: the node's helper to fix."""


def bounded_popen(remaining: Callable[[], float]) -> Callable[..., Run]:
    """``ProcessProvider``'s ``popen``: each call runs the helper as a :class:`Run`, bounded by
    ``remaining()`` (the fetch's time left, read when the helper starts)."""

    def popen(args: Sequence[str], **_: Any) -> Run:  # botocore passes stdout= and stderr= PIPE
        return Run(list(args), remaining())

    return popen


class Run:
    """What botocore uses of a ``Popen``: :meth:`communicate`, then ``returncode`` (always 0:
    a failure is raised, in the helper's words)."""

    def __init__(self, argv: list[str], remaining: float) -> None:
        from credprovider.runtime.excerpt import clip
        from credprovider.runtime.redact import printable

        self.argv, self.remaining = argv, remaining
        self.said = f"the profile's credential_process {clip(printable(argv[0] if argv else ''))}"
        self.returncode: int | None = None

    def communicate(self) -> tuple[bytes, bytes]:
        """Its whole answer, checked: :class:`ProcessFailed` for any fault of the helper."""
        from credprovider.runtime.child import ChildFailed, TooSlow, run_helper

        try:
            finished = run_helper(self.argv, self.remaining)
        except TooSlow:
            raise ProcessFailed(f"{self.said} did not answer before the deadline: stopped",
                                SLOW_FIX) from None  # fmt: skip
        except ChildFailed as exc:
            raise ProcessFailed(f"{self.said} {exc.said}", FIX) from None
        if finished.code != 0:
            complaint = finished.complaint()
            said = f": {complaint}" if complaint else " (it wrote nothing on stderr)"
            raise ProcessFailed(f"{self.said} failed with exit status {finished.code}{said}", FIX)
        _check_answer(finished.stdout, self.said)
        self.returncode = 0
        return finished.stdout, b""


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

"""What only the running kubelet can say, as doctor's checks: its version (read in
:mod:`credprovider.tool.node.kubelet_facts`), the config it loaded (``kubelet_credential_provider_config_info{hash}`` on its
unauthenticated read-only port, against the files on disk), the pods it runs (``/pods`` there),
and its recent credential-provider errors (the tail of its log file, or its journal).

Every read is bounded in time and size; what cannot be read is said, never an error.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from credprovider.runtime.child import run_bounded
from credprovider.runtime.redact import printable, scrub
from credprovider.tool.doctor.model import FAIL, INFO, PASS, WARN, Diagnosis
from credprovider.tool.node.discovery import NodeView
from credprovider.tool.node.kubelet_facts import (
    CONFIG_DIRECTORY_SINCE,
    CONFIG_INFO_METRIC,
    SYSTEM_ENV,
    config_hash,
    installed_kubelet,
    kubelet_version,
    reported_config_hashes,
    stamped,
)
from credprovider.tool.node.kubelet_http import KubeletUnanswered, kubelet_get
from credprovider.tool.node.kubelet_proc import KubeletProcess
from credprovider.tool.node.structured import bounded_json

API_TIMEOUT_SECONDS: Final = 3.0
API_BODY_CAP: Final = 16 << 20
LOG_TAIL_BYTES: Final = 2 << 20
JOURNAL_LINES: Final = "20000"
# pkg/credentialprovider/plugin/plugin.go: every failed lookup is logged with this message
# (klog.ErrorS), with the provider's name and the error as key/value pairs.
LOOKUP_FAILED: Final = "Failed to provide credentials for image"
CRICTL_DIRS: Final = "/usr/local/bin:/usr/bin:/opt/bin:/home/kubernetes/bin"
_KLOG_VALUE = r'="((?:[^"\\]|\\.)*)"'


def _unquote(value: str) -> str:
    try:
        decoded: str = json.loads(f'"{value}"')
    except ValueError:
        return value
    return decoded


@dataclass(frozen=True)
class LookupFailure:
    provider: str
    error: str
    when: str


def lookup_failures(lines: Iterable[str]) -> list[LookupFailure]:
    """The kubelet's failed credential lookups in its log lines (klog text or JSON format)."""
    found = []
    for line in lines:
        if LOOKUP_FAILED not in line:
            continue
        if line.lstrip().startswith("{"):
            try:  # a log line is anyone's text: nesting past the bound is no record
                record = bounded_json(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("msg") == LOOKUP_FAILED:
                found.append(
                    LookupFailure(
                        str(record.get("provider", "")),
                        str(record.get("err", "")),
                        str(record.get("ts", "")),
                    )
                )
            continue
        provider = re.search(r"\bprovider" + _KLOG_VALUE, line)
        error = re.search(r"\berr" + _KLOG_VALUE, line)
        when = re.match(r"\s*[EWI](\d{4} \d\d:\d\d:\d\d)", line)
        found.append(
            LookupFailure(
                _unquote(provider.group(1)) if provider else "",
                _unquote(error.group(1)) if error else "",
                when.group(1) if when else "",
            )
        )
    return found


def _log_tail(kubelet: KubeletProcess) -> tuple[str, list[str]] | str:
    """The kubelet's recent log: (where, lines), or why it cannot be read."""
    stream = f"/proc/{kubelet.pid}/fd/2"
    try:
        target = os.readlink(stream)
    except OSError as exc:
        return f"its log ({stream}) cannot be read as uid {os.geteuid()}: {exc.strerror}"
    if target.startswith("/"):  # a file (opened through /proc: even one deleted since)
        try:
            descriptor = os.open(stream, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            return f"its log ({target}) cannot be read as uid {os.geteuid()}: {exc.strerror}"
        try:
            info = os.fstat(descriptor)
            if stat.S_ISREG(info.st_mode):
                start = max(0, info.st_size - LOG_TAIL_BYTES)
                os.lseek(descriptor, start, os.SEEK_SET)
                data = os.read(descriptor, LOG_TAIL_BYTES)
                # a log truncated under its writer (logrotate's copytruncate) leaves a run of NULs
                # before what was written since: the line after them is whole
                trimmed = data.lstrip(b"\0")
                cut = bool(start) and len(trimmed) == len(data)
                lines = trimmed.decode("utf-8", "replace").splitlines()
                return target, lines[1:] if cut else lines  # a cut first line is dropped
        finally:
            os.close(descriptor)
    if not target.startswith("socket:"):
        return f"its log goes to {target}, which is not a file or the journal"
    command = ["journalctl", f"_PID={kubelet.pid}", "-o", "cat", "--no-pager", "-n", JOURNAL_LINES]
    try:
        done = run_bounded(command, SYSTEM_ENV, b"", 10.0, cap=LOG_TAIL_BYTES)
    except OSError as exc:
        return f"its log goes to a socket (the journal?) and journalctl cannot run: {exc.strerror}"
    if done.code != 0:
        return f"journalctl {command[1]} failed: {printable(done.stderr.decode('utf-8', 'replace')[:200])}"
    return f"the journal ({command[1]})", done.stdout.decode("utf-8", "replace").splitlines()


_AUDIENCE_REFUSED = re.compile(
    r'audience \\?"([^"\\]+)\\?" not found in pod spec volume, \S+ is not authorized to request '
    r"tokens for this audience"
)


def lookup_advice(error: str) -> str:
    """What to do about one failed lookup: replaying it, unless the kubelet could not get the
    service account token (the API server refused the node that audience: an RBAC grant)."""
    refused = _AUDIENCE_REFUSED.search(error)
    if refused:
        from credprovider.tool.doctor.chain import AUDIENCE_GRANT

        audience = refused.group(1)
        return (
            f"let the nodes request tokens for the audience {audience}: "
            + AUDIENCE_GRANT.format(audience=audience)
        )
    return "credprovider get IMAGE replays the lookup and says why"


def check_log(kubelet: KubeletProcess, diagnosis: Diagnosis) -> None:
    tail = _log_tail(kubelet)
    if isinstance(tail, str):
        diagnosis.add("kubelet", INFO, f"recent errors not read: {tail}")
        return
    where, lines = tail
    failures = lookup_failures(lines)
    if not failures:
        diagnosis.add(
            "kubelet", PASS, f"no failed credential lookup in the kubelet's log ({where})"
        )
        return
    by_provider: dict[str, list[LookupFailure]] = {}
    for failure in failures:
        by_provider.setdefault(failure.provider, []).append(failure)
    for provider, seen in by_provider.items():
        last = seen[-1]
        error = printable(scrub(last.error))
        diagnosis.add(
            "kubelet",
            WARN,
            f"{len(seen)} failed credential lookup(s) in the kubelet's log ({where}); the last"
            + (f" at {last.when}" if last.when else "")
            + f": {error[:400]}",
            lookup_advice(last.error),
            provider,
        )


def _api(view: NodeView, path: str) -> bytes | str:
    """``path`` from the kubelet's read-only port: the body, or why there is none."""
    settings = view.settings
    if settings.read_only_port <= 0:
        return "its read-only port is off (readOnlyPort 0)"
    host = settings.address if settings.address not in ("0.0.0.0", "::", "") else "127.0.0.1"
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{settings.read_only_port}{path}"
    try:
        status, body = kubelet_get(url, API_TIMEOUT_SECONDS, API_BODY_CAP)
    except KubeletUnanswered as exc:
        return str(exc)
    if status != 200:
        return f"{url} answered HTTP {status}"
    return body


def check_loaded_config(view: NodeView, contents: Sequence[bytes], diagnosis: Diagnosis) -> None:
    """The hash of the config the kubelet loaded against the files on disk now (``contents``:
    each file's bytes, as doctor read and decoded them)."""
    body = _api(view, "/metrics")
    if isinstance(body, str):
        diagnosis.add("config", INFO, f"the config the kubelet loaded is not known: {body}")
        return
    hashes = reported_config_hashes(body.decode("utf-8", "replace"))
    if not hashes:
        diagnosis.add(
            "config", INFO, f"the kubelet exports no {CONFIG_INFO_METRIC} (it is v1.34 or later)"
        )
        return
    on_disk = config_hash(contents)
    if hashes[0] == on_disk:
        diagnosis.add("config", PASS, "the kubelet runs the config that is on disk (same hash)")
        return
    diagnosis.add(
        "config",
        FAIL,
        f"the kubelet runs another config than the one on disk ({CONFIG_INFO_METRIC} "
        f"{printable(hashes[0][:19])}…, disk {on_disk[:19]}…)",
        "restart the kubelet to load it (after credprovider validate passes)",
    )


def running_pod_images(view: NodeView) -> list[str]:
    """The images of the pods the kubelet runs, from its read-only port's ``/pods``."""
    from credprovider.tool.doctor.images import images_of

    body = _api(view, "/pods")
    if isinstance(body, str):
        return []
    try:
        pods = bounded_json(body)
    except ValueError:
        return []
    items = pods.get("items") if isinstance(pods, dict) else None
    return [image for pod in items or [] for image in images_of(pod)]


def images_from_crictl(output: bytes) -> list[str]:
    """The image references in ``crictl images -o json`` (tags, else repo@digest)."""
    try:
        listing = bounded_json(output)
    except ValueError:
        return []
    images = listing.get("images") if isinstance(listing, dict) else None
    found: list[str] = []
    for image in images if isinstance(images, list) else []:
        if not isinstance(image, dict):
            continue
        tags = [t for t in image.get("repoTags") or [] if isinstance(t, str) and "<none>" not in t]
        digests = [d for d in image.get("repoDigests") or [] if isinstance(d, str)]
        found += tags or digests[:1]
    return found


def runtime_images(view: NodeView) -> tuple[list[str], str]:
    """The images the container runtime holds (``crictl images``, on the kubelet's CRI endpoint),
    and a sentence saying where they came from or why there are none."""
    import shutil

    crictl = shutil.which("crictl", path=f"{os.environ.get('PATH', '')}:{CRICTL_DIRS}")
    if crictl is None:
        return [], "crictl is not installed: the runtime's images are not listed"
    settings = view.settings
    command = [crictl]
    if settings.runtime_endpoint:
        command += ["--runtime-endpoint", settings.runtime_endpoint]
    if settings.image_endpoint:
        command += ["--image-endpoint", settings.image_endpoint]
    command += ["--timeout", "5s", "images", "-o", "json"]
    try:
        done = run_bounded(command, SYSTEM_ENV, b"", 15.0, cap=API_BODY_CAP)
    except OSError as exc:
        return [], f"{crictl} cannot run: {exc.strerror}"
    if done.code != 0:
        said = printable(done.stderr.decode("utf-8", "replace").strip()[:200])
        return [], f"crictl images failed: {said or 'timed out'}"
    found = images_from_crictl(done.stdout)
    return (
        found,
        f"{len(found)} image(s) from crictl images ({settings.image_endpoint or 'its default endpoint'})",
    )


def installed_version(diagnosis: Diagnosis) -> tuple[int, int] | None:
    """With no kubelet running (stopped, or crash-looping between restarts): the version of the
    kubelet binary the node's unit runs (``layouts.KUBELET_BINARIES``), said; ``None`` when none is
    there, trusted and answering."""
    found = installed_kubelet()
    return _said(found[1], f"installed at {found[0]}, not running", diagnosis) if found else None


def _said(
    found: tuple[str, tuple[int, int]], where: str, diagnosis: Diagnosis
) -> tuple[int, int] | None:
    version, release = found
    if stamped(found) is None:
        diagnosis.add("kubelet", INFO, f"the kubelet ({where}) has no version stamp: {version}")
        return None
    diagnosis.facts["kubeletVersion"] = version
    diagnosis.add("kubelet", INFO, f"kubelet {version} ({where})")
    return release


def check_version(
    view: NodeView, kubelet: KubeletProcess, config_is_dir: bool, diagnosis: Diagnosis
) -> tuple[int, int] | None:
    """The kubelet's (major, minor), said; ``None`` when it is not known."""
    found = kubelet_version(kubelet)
    if found is None:
        diagnosis.add("kubelet", INFO, f"the kubelet's version is not known ({kubelet.exe})")
        return None
    release = _said(found, f"pid {kubelet.pid}, {kubelet.exe}", diagnosis)
    if release is None:
        return None
    version = found[0]
    if config_is_dir and release < CONFIG_DIRECTORY_SINCE:
        diagnosis.add(
            "config",
            FAIL,
            f"the config is a directory, which kubelet {version} does not read (v1.34 and later do)",
            "give the kubelet one file (merge the directory's files) or upgrade it",
        )
    return release

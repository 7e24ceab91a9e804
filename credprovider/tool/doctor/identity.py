"""Is the endpoint each plugin's identity comes from reachable from this node, and does this node's
clock agree with it? One short request per endpoint, built by the cloud's descriptor
(``CloudPlugin.identity``) from the environment the plugin inherits; never retried, never shown
a secret (only an answer a descriptor marks as a plain fact is printed)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from credprovider.cloud import IdentityProbe
from credprovider.runtime import loopback
from credprovider.runtime.answer import BadAnswer
from credprovider.runtime.http import HttpError, request, split_authority, split_http_url
from credprovider.runtime.redact import printable
from credprovider.runtime.tls import CaBundleError, verified_context
from credprovider.tool.catalog import plugin_for_name
from credprovider.tool.doctor.model import FAIL, INFO, PASS, WARN, Diagnosis, Status
from credprovider.tool.images.startcheck import kubelet_environment

PROBE_TIMEOUT_SECONDS: Final = 2.0
PROBE_BODY_CAP: Final = 4096
# Signed AWS requests are refused beyond 5 minutes of skew (RequestTimeTooSkewed / "Signature
# expired"), and Entra ID and Google tokens carry 5 minutes of leeway: over it, pulls fail.
SKEW_FAIL_SECONDS: Final = 300
SKEW_WARN_SECONDS: Final = 30


def _refused_by_test_mode(url: str, environ: Mapping[str, str]) -> str | None:
    """In the plugins' loopback-only test mode (either environment asks for it), a non-loopback
    endpoint is not contacted: why, or ``None`` to go ahead."""
    if not (loopback.requested(environ) or loopback.requested(os.environ)):
        return None
    try:
        scheme, authority, _ = split_http_url(url, allow_https=True)
        host, _ = split_authority(authority, scheme)
    except HttpError as exc:
        return str(exc)
    if loopback.is_loopback_address(host):
        return None
    return f"{host} is not a loopback address and the environment is in loopback-only test mode"


def clock_skew(date_header: str, now: float) -> float | None:
    """The endpoint's clock minus ours, in seconds, from its ``Date`` header (``None``: no date)."""
    from email.utils import parsedate_to_datetime

    try:
        return parsedate_to_datetime(date_header).timestamp() - now
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def probe(found: IdentityProbe, environ: Mapping[str, str]) -> list[tuple[Status, str, str]]:
    """``found`` sent once: ``(status, message, fix)`` for reachability, then for the clock."""
    refused = _refused_by_test_mode(found.url, environ)
    if refused is not None:
        return [(INFO, f"{found.what}: not probed: {refused}", "")]
    try:
        tls = (
            verified_context(found.ca_file, found.ca_setting)
            if found.url.startswith("https://")
            else None
        )
    except CaBundleError as exc:
        return [(FAIL, f"{found.what}: {exc}", "")]
    try:
        answer = request(
            found.method,
            found.url,
            headers=found.headers,
            timeout=PROBE_TIMEOUT_SECONDS,
            max_body=PROBE_BODY_CAP,
            within=PROBE_TIMEOUT_SECONDS,
            tls=tls,
        )
    except HttpError as exc:
        return [(FAIL, f"{found.what} is unreachable: {exc}", found.silence)]
    except BadAnswer as exc:
        return [(FAIL, f"{found.what}: {exc.detail}", found.silence)]
    now = time.time()
    if answer.status != found.expect_status:
        return [
            (
                FAIL,
                f"{found.what} answered HTTP {answer.status} (a working one answers "
                f"{found.expect_status})",
                found.silence,
            )
        ]
    if found.expect_header is not None:
        name, value = found.expect_header
        got = answer.header(name)
        if not (
            got.lower().startswith(value.lower()) if found.expect_header_start else got == value
        ):
            shown = f"{value}..." if found.expect_header_start else value
            return [
                (
                    FAIL,
                    f"{found.what} answered without '{name}: {shown}': something else (a proxy, "
                    "another server) answers at that address",
                    found.silence,
                )
            ]
    shown = f": {printable(answer.text()[:200].strip())}" if found.show_body else ""
    onward = f" → {found.then}" if found.then else ""
    results = [(PASS, f"{found.what} answers{shown}{onward}", "")]
    skew = clock_skew(answer.header("date"), now)
    if skew is not None and abs(skew) > SKEW_WARN_SECONDS:
        side = "behind" if skew > 0 else "ahead of"
        results.append(
            (
                FAIL if abs(skew) > SKEW_FAIL_SECONDS else WARN,
                f"this node's clock is {abs(skew):.0f}s {side} {found.what}'s (by its Date "
                f"header): beyond {SKEW_FAIL_SECONDS}s, signed requests and tokens are refused",
                "synchronize the clock (chrony or systemd-timesyncd) against the cloud's time source",
            )
        )
    return results


def check_identities(
    loaded: Any,
    environment: Mapping[str, str] | None,
    read: Callable[[str], str | None],
    exists: Callable[[str], bool],
    diagnosis: Diagnosis,
) -> None:
    """Each provider's identity, in the environment the kubelet gives its plugin; an endpoint two
    providers share is probed once."""
    answers: dict[tuple[str, str], list[tuple[Status, str, str]]] = {}
    for provider in loaded.providers:
        name = provider.name or ""
        plugin = plugin_for_name(name)
        if plugin is None or plugin.identity is None:
            continue
        env = kubelet_environment(provider.env_pairs(), environment)
        found = plugin.identity(env, list(provider.args or []), read, exists)
        if isinstance(found, str):
            diagnosis.add("identity", INFO, found, "", name)
            continue
        key = (found.method, found.url)
        if key not in answers:
            answers[key] = probe(found, env)
        for status, message, fix in answers[key]:
            diagnosis.add("identity", status, message, fix, name)

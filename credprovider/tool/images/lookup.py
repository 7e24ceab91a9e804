"""What the kubelet does for one image, step by step, with a report of every step.

Used by ``credprovider get``: select providers by ``matchImages`` in config order, decide whether
service-account mode lets a provider run, exec it with its args and env (the environment inherited),
decode its answer strictly, apply the echo guard, and match the returned keys against the image with
the kubelet's keyring rules.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from credprovider.runtime.api import (
    CACHE_KEY_GLOBAL,
    CACHE_KEY_IMAGE,
    AuthConfig,
    CredentialProviderResponse,
    ResponseError,
    encode_request,
    parse_response,
)
from credprovider.runtime.child import run_bounded
from credprovider.runtime.excerpt import byte_size
from credprovider.runtime.goformat import SECOND, parse_go_duration
from credprovider.runtime.imageref import registry_of
from credprovider.runtime.log import decisions
from credprovider.runtime.matching import keyring_lookup
from credprovider.runtime.redact import register_secret, scrub
from credprovider.runtime.serve import CACHE_READ_ONLY_ENV
from credprovider.tool.catalog import plugin_for_name
from credprovider.tool.images.misses import explain_key_mismatch
from credprovider.tool.kubeconfig.model import CredentialProvider, LoadedConfig
from credprovider.tool.node.trust import UntrustedProgram, check_program, config_problem

KUBELET_EXEC_TIMEOUT_SECONDS: Final = 60.0
# What is kept of a plugin's stdout and of its stderr (the rest is read and dropped).
RESPONSE_CAP_BYTES: Final = 4 * 1024 * 1024
GLOBAL_CACHE_KEY: Final = "<global>"


@dataclass
class ProviderReport:
    name: str
    matched: bool
    skipped: str | None = None  # why the kubelet would not run it although it matched
    ran: bool = False
    exit_code: int | None = None
    stderr: str = ""
    error: str | None = None  # the kubelet's reason for using nothing from this provider
    response: CredentialProviderResponse | None = None
    applied_keys: list[str] = field(default_factory=list)
    ignored_keys: dict[str, str] = field(default_factory=dict)
    cache_key: str | None = None
    cache_seconds: float | None = None
    seconds: float = 0.0
    # our plugins, run at -v=1: what they said they decided (credential source, role, route)
    decisions: list[str] = field(default_factory=list)
    # not matched: the nearest matchImages patterns and why each misses (pattern, reason)
    misses: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class LookupReport:
    image: str
    providers: list[ProviderReport]

    @property
    def credentials(self) -> list[tuple[str, str, AuthConfig]]:
        """(provider, key, credential) the kubelet would hand to the runtime, in order."""
        found = []
        for report in self.providers:
            if report.response is not None and report.error is None:
                for key in report.applied_keys:
                    found.append((report.name, key, report.response.auth[key]))
        return found


def _service_account_inputs(
    provider: CredentialProvider, token: str, annotations: Mapping[str, str]
) -> tuple[str | None, str, dict[str, str]]:
    """(skip reason, token, annotations) as the kubelet's service-account mode decides them."""
    attributes = provider.tokenAttributes
    if attributes is None:
        return None, "", {}
    if not token:
        if attributes.requireServiceAccount:
            return (
                (
                    "tokenAttributes.requireServiceAccount is true and no service account token was "
                    "given (--sa-token-file): the kubelet does not run the plugin"
                ),
                "",
                {},
            )
        return None, "", {}
    required = attributes.requiredServiceAccountAnnotationKeys or []
    optional = attributes.optionalServiceAccountAnnotationKeys or []
    for key in required:
        if key not in annotations:
            return (
                (
                    f"the service account lacks the required annotation {key}: the kubelet does "
                    "not run the plugin"
                ),
                "",
                {},
            )
    passed = {key: annotations[key] for key in [*required, *optional] if key in annotations}
    return None, token, passed


def run_provider(
    provider: CredentialProvider,
    bin_dir: str,
    image: str,
    token: str,
    annotations: Mapping[str, str],
    timeout: float = KUBELET_EXEC_TIMEOUT_SECONDS,
    environment: Mapping[str, str] | None = None,
    launcher: Sequence[str] = (),
) -> ProviderReport:
    """Run one matched provider the way the kubelet does and report the outcome (``launcher``:
    what the plugin's command runs under, e.g. nsenter into the node's mount namespace)."""
    name = provider.name or ""
    report = ProviderReport(name=name, matched=True)
    skip, sa_token, sa_annotations = _service_account_inputs(provider, token, annotations)
    if skip is not None:
        report.skipped = skip
        return report
    register_secret(sa_token)  # the plugin may echo it on stderr, which the report shows
    api_version = provider.apiVersion or ""
    stdout = _exec(
        provider,
        bin_dir,
        image,
        encode_request(image, api_version, sa_token, sa_annotations),
        report,
        timeout,
        environment,
        launcher,
    )
    if stdout is None:
        return report
    try:
        response = parse_response(stdout, api_version)
    except ResponseError as exc:
        report.error = str(exc)
        return report
    if (
        sa_token
        and provider.tokenAttributes is not None
        and provider.tokenAttributes.cacheType != "Token"
        and any(entry.password == sa_token for entry in response.auth.values())
    ):
        report.error = (
            f"Credential provider plugin returned the service account token as the "
            f"password for image {image!r}, which is not allowed when service account "
            "cache type is not set to 'Token'"
        )
        return report
    _apply(report, response, provider, image)
    if report.seconds > KUBELET_EXEC_TIMEOUT_SECONDS:  # only with a --timeout past the kubelet's
        report.error = (
            f"it answered after {report.seconds:.0f} s, and the kubelet kills a plugin at "
            f"{KUBELET_EXEC_TIMEOUT_SECONDS:.0f} s (context deadline exceeded): under the kubelet "
            "this pull gets nothing from it"
        )
    return report


def _exec(
    provider: CredentialProvider,
    bin_dir: str,
    image: str,
    request: bytes,
    report: ProviderReport,
    timeout: float,
    environment: Mapping[str, str] | None,
    launcher: Sequence[str] = (),
) -> bytes | None:
    """Exec the plugin as the kubelet does (its args and env over ``environment``; our plugins
    with their cache read-only); its stdout, or ``None`` with ``report.error`` saying what the
    kubelet would."""
    from credprovider.tool.images.startcheck import kubelet_environment

    name = provider.name or ""
    env = kubelet_environment(provider.env_pairs(), environment)
    args = list(provider.args or [])
    ours = plugin_for_name(name) is not None
    if ours:  # a diagnosis changes nothing: a cache the config names is read, never written
        env[CACHE_READ_ONLY_ENV] = "1"
    if ours and not any(arg.lstrip("-").startswith("v=") or arg in ("-v", "--v") for arg in args):
        args.append("-v=1")  # our plugins then say where the credentials came from
    failed = f"error execing credential provider plugin {name} for image {image}"
    try:
        check_program(str(Path(bin_dir) / name))
    except UntrustedProgram as exc:
        report.error = str(exc)
        return None
    start = time.monotonic()
    report.ran = True
    try:
        proc = run_bounded(  # in /, as the kubelet's plugins run (startcheck._run says why)
            [*launcher, str(Path(bin_dir).absolute() / name), *args],
            env,
            request,
            timeout,
            cap=RESPONSE_CAP_BYTES,
            cwd="/",
        )
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name or an argument
        report.error = f"{failed}: {exc}"
        return None
    finally:
        report.seconds = time.monotonic() - start
    if proc.timed_out:
        report.error = f"{failed}: context deadline exceeded"
        return None
    report.exit_code = proc.code
    report.stderr = scrub(proc.stderr.decode("utf-8", "replace"))
    if ours:
        report.decisions = decisions(report.stderr, name)
    if proc.code != 0:
        report.error = f"{failed}: exit status {proc.code}: {report.stderr.strip()}"
        return None
    if proc.stdout_cut:
        report.error = (
            f"{failed}: its response is larger than {byte_size(RESPONSE_CAP_BYTES)}; "
            "the rest was not read (a plugin's answer is a few hundred bytes)"
        )
        return None
    return proc.stdout


def _apply(
    report: ProviderReport,
    response: CredentialProviderResponse,
    provider: CredentialProvider,
    image: str,
) -> None:
    """What the kubelet does with an accepted response: which keys apply to the image, and how
    long it caches the answer under which key."""
    report.response = response
    report.applied_keys = keyring_lookup(list(response.auth), image)
    for key in response.auth:
        if key not in report.applied_keys:
            report.ignored_keys[key] = explain_key_mismatch(key, image) or "another key matched"
    report.cache_key = {CACHE_KEY_IMAGE: image, CACHE_KEY_GLOBAL: GLOBAL_CACHE_KEY}.get(
        response.cache_key_type, registry_of(image)
    )
    duration = response.cache_duration
    if duration is None and provider.defaultCacheDuration is not None:
        duration = parse_go_duration(provider.defaultCacheDuration)
    report.cache_seconds = max(0.0, (duration or 0) / SECOND)


def kubelet_lookup(
    loaded: LoadedConfig,
    bin_dir: str,
    image: str,
    token: str = "",
    annotations: Mapping[str, str] | None = None,
    timeout: float = KUBELET_EXEC_TIMEOUT_SECONDS,
    environment: Mapping[str, str] | None = None,
) -> LookupReport:
    """Every provider in config order: matched or not, and what running it gave. The plugins
    inherit ``environment`` (the kubelet's; default: this process's)."""
    from credprovider.tool.images.selection import select_providers

    selections = select_providers(
        image, [(p.name or "", p.matchImages or []) for p in loaded.providers]
    )
    reports = []
    pairs = zip(loaded.providers, loaded.provider_sources, selections, strict=True)
    for provider, source, selection in pairs:
        if not selection.matched:
            reports.append(
                ProviderReport(selection.name, matched=False, misses=list(selection.misses))
            )
            continue
        refused = config_problem(str(source))
        if refused:
            reports.append(ProviderReport(selection.name, matched=True, error=refused))
            continue
        reports.append(
            run_provider(provider, bin_dir, image, token, annotations or {}, timeout, environment)
        )
    return LookupReport(image, reports)

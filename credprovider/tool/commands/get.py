"""``credprovider get``: credentials for an image the way the kubelet would get them, and why."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from credprovider.paths import NODE_BIN_DIR, NODE_CONFIG
from credprovider.runtime.goformat import SECOND, DurationError, format_go_duration, parse_seconds
from credprovider.runtime.imageref import ImageError, kubelet_image, registry_of
from credprovider.runtime.redact import printable, safe_line
from credprovider.tool.commands.common import (
    EXAMPLE_IMAGE,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Subcommands,
    cannot_check,
    mask,
    node_default,
    node_paths,
    print_json,
)
from credprovider.tool.kubeconfig.model import ConfigError
from credprovider.tool.node.access import FileProblem, UnreadableError, read_text

if TYPE_CHECKING:
    from collections.abc import Mapping

    from credprovider.tool.images.lookup import LookupReport, ProviderReport
    from credprovider.tool.node.discovery import NodeView


def _read_annotations(values: list[str]) -> dict[str, str]:
    annotations = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise SystemExit(f"credprovider get: --sa-annotation {value!r} is not key=value")
        annotations[key] = val
    return annotations


def _provider_json(report: ProviderReport, show: bool) -> dict[str, Any]:
    response = report.response
    return {
        "name": report.name,
        "matched": report.matched,
        "skipped": report.skipped,
        "ran": report.ran,
        "exitCode": report.exit_code,
        "stderr": report.stderr,
        "error": report.error,
        "seconds": round(report.seconds, 3),
        "response": None
        if response is None
        else {
            "apiVersion": response.api_version,
            "cacheKeyType": response.cache_key_type,
            "cacheDuration": response.cache_duration,
            "auth": {
                key: {"username": entry.username, "password": mask(entry.password, show)}
                for key, entry in response.auth.items()
            },
        },
        "appliedKeys": report.applied_keys,
        "ignoredKeys": report.ignored_keys,
        "closestMisses": [{"pattern": p, "reason": r} for p, r in report.misses],
        "decisions": report.decisions,
        "cacheKey": report.cache_key,
        "cacheSeconds": report.cache_seconds,
    }


def _print_report(report: LookupReport, show: bool) -> None:
    for provider in report.providers:
        if not provider.matched:
            print(f"- {printable(provider.name)}: matchImages do not match {report.image}: not run")
            for pattern, reason in provider.misses:
                print(f"    nearest {pattern!r}: {reason}")
            if not provider.misses:
                print(f"    (none of its patterns is for {registry_of(report.image)})")
            continue
        if provider.skipped:
            print(f"- {printable(provider.name)}: matched, not run: {provider.skipped}")
            continue
        status = f"exit {provider.exit_code}" if provider.exit_code is not None else "not finished"
        ran = f"ran in {provider.seconds * 1000:.0f} ms, {status}" if provider.ran else "not run"
        print(f"- {printable(provider.name)}: matched, {ran}")
        if provider.error:
            said = provider.stderr.strip()
            head = provider.error.removesuffix(f": {said}") if said else provider.error
            print(f"    the kubelet uses nothing from it: {safe_line(head)}")
            for line in said.splitlines():
                if line.strip():
                    print(f"    said: {safe_line(line)}")
            continue
        for line in provider.decisions:
            print(f"    said: {safe_line(line)}")
        response = provider.response
        if response is None:  # ran without an error: it answered
            continue
        duration = (
            "not cached"
            if not provider.cache_seconds
            else f"cached {format_go_duration(round(provider.cache_seconds * SECOND))}"
        )
        print(f"    cacheKeyType {response.cache_key_type}, key {provider.cache_key!r}, {duration}")
        for key, entry in response.auth.items():
            if key in provider.applied_keys:
                print(
                    f"    applies: {key} (username {entry.username!r}, password "
                    f"{mask(entry.password, show)})"
                )
            else:
                print(f"    ignored: {key}: {provider.ignored_keys[key]}")


def _timeout_seconds(text: str) -> float:
    """``--timeout``: a Go duration (``30s``, ``1m``, ``1m30s``), or a plain number of seconds."""
    try:
        seconds = parse_seconds(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (for example 30s or 1m)") from None
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r}: must be more than 0s and at most 1h")
    return seconds


def _cmd_get(args: argparse.Namespace) -> int:
    from credprovider.tool.images.lookup import kubelet_lookup
    from credprovider.tool.kubeconfig.validate import load_config
    from credprovider.tool.node.discovery import discover

    view = discover()
    if not (args.config and args.bin_dir):
        node = node_paths("get", view)
        args.config = node_default("get", args.config, "--config", node, bin_dir=False)
        args.bin_dir = args.config and node_default(
            "get", args.bin_dir, "--bin-dir", node, bin_dir=True
        )
    if not (args.config and args.bin_dir):
        return EXIT_USAGE

    try:
        image = kubelet_image(args.image)
    except ImageError as exc:
        print(f"credprovider get: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        loaded = load_config(args.config)
        token = _read_token(args.sa_token_file)
    except ConfigError as exc:
        print(
            f"credprovider get: the kubelet would not start with this config: {exc.describe()}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    except UnreadableError as exc:
        return cannot_check("get", exc, args.json)
    if token is None:
        return EXIT_FAILED
    environment = _environment(view, args.environment)
    if isinstance(environment, str):
        return cannot_check("get", UnreadableError(environment), args.json)
    report = kubelet_lookup(
        loaded,
        args.bin_dir,
        image,
        token,
        _read_annotations(args.sa_annotation),
        timeout=args.timeout,
        environment=environment,
    )
    found = report.credentials
    _show(report, image, args.json, args.show_password)
    return EXIT_OK if found else EXIT_FAILED


def _environment(view: NodeView, chosen: str) -> Mapping[str, str] | str | None:
    """What the plugins inherit: the running kubelet's environment, as under the kubelet
    (``None``: this process's, with ``--environment this`` or no kubelet running, said on stderr);
    why there is no answer (a str) when the kubelet's cannot be read as this user."""
    kubelet = view.kubelet
    if chosen == "this" or kubelet is None:
        if chosen != "this":
            print(
                "credprovider get: no kubelet is running: the plugins inherit this environment",
                file=sys.stderr,
            )
        return None
    if kubelet.environ is None:
        return (
            f"the environment of the running kubelet (pid {kubelet.pid}), which its plugins "
            "inherit, cannot be read as this user: run as root, or give --environment this to "
            "run them in this one"
        )
    print(
        f"credprovider get: the plugins inherit the environment of the running kubelet "
        f"(pid {kubelet.pid}), as under it",
        file=sys.stderr,
    )
    return kubelet.environ


def _read_token(path: str | None) -> str | None:
    """The --sa-token-file's token ('' without one); ``None`` (and one line) if it cannot be read
    (:class:`~credprovider.tool.node.access.UnreadableError` if only this user may not)."""
    if not path:
        return ""
    try:
        return read_text(path).strip()
    except FileProblem as exc:
        print(f"credprovider get: cannot read --sa-token-file {exc}", file=sys.stderr)
        return None


def _show(report: LookupReport, image: str, as_json: bool, show_password: bool) -> None:
    found = report.credentials
    if as_json:
        print_json(
            {
                "image": image,
                "credentialsFound": bool(found),
                "providers": [_provider_json(p, show_password) for p in report.providers],
            }
        )
        return
    print(f"image {image} (as the kubelet passes it)")
    _print_report(report, show_password)
    if found:
        keys = ", ".join(f"{key} from {name}" for name, key, _ in found)
        print(f"result: the kubelet would try {len(found)} credential(s): {keys}")
    else:
        print(
            "result: the kubelet would pull WITHOUT credentials from these providers "
            "(node docker config and pull secrets may still apply)"
        )


def register(sub: Subcommands) -> None:
    get = sub.add_parser(
        "get",
        help="get credentials for an image the way the kubelet would, and explain the result",
        description=(
            "Normalize IMAGE as the kubelet does (nginx -> docker.io/library/nginx, tag and digest "
            "dropped), select providers by matchImages in config order, run each matching plugin with "
            "its args and env (inheriting the running kubelet's environment, as under it) and a "
            "60s timeout, decode its answer "
            "strictly, and report which returned key the kubelet would use for IMAGE and why the "
            "others would not apply. Passwords are masked unless --show-password. Exit 0 when the "
            "kubelet would end up with credentials, 1 when not."
        ),
    )
    get.add_argument("image", help=f"e.g. {EXAMPLE_IMAGE}:v1")
    get.add_argument(
        "--config",
        help="the kubelet's credential provider config (default: the one this node's kubelet "
        f"uses, found as doctor finds it, else {NODE_CONFIG})",
    )
    get.add_argument(
        "--bin-dir",
        help="the kubelet's plugin bin dir (default: the one this node's kubelet uses, else "
        f"{NODE_BIN_DIR})",
    )
    get.add_argument(
        "--sa-token-file", help="service account token to pass (providers with tokenAttributes)"
    )
    get.add_argument(
        "--sa-annotation",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="service account annotation (repeatable)",
    )
    get.add_argument(
        "--environment",
        choices=("kubelet", "this"),
        default="kubelet",
        help="what the plugins inherit: kubelet, the running kubelet's environment (its proxy, "
        "region or credentials settings), as under it, or this command's when no kubelet runs; "
        "this, this command's own (default: %(default)s; the loader's and interpreters' "
        "variables are dropped either way)",
    )
    get.add_argument("--show-password", action="store_true", help="print passwords in clear")
    get.add_argument(
        "--timeout",
        type=_timeout_seconds,
        default=60.0,
        metavar="DURATION",
        help="per-plugin timeout, a Go duration such as 30s or 1m (default and kubelet: 1m0s); "
        "a longer one waits for a slow plugin, and an answer after 1m is shown as what the "
        "kubelet, which kills the plugin at 1m, never gets",
    )
    get.add_argument("--json", action="store_true", help="one JSON object on stdout")
    get.set_defaults(handler=_cmd_get)

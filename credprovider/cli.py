"""``credprovider``: the operator tool (run by hand, never by the kubelet).

It answers "why did this pull get no credentials?": ``validate`` a config like the kubelet,
``get`` credentials the way the kubelet would, ``explain`` an image offline, ``match`` a pattern,
``install`` the plugins and ``migrate`` a node from the in-tree providers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from credprovider.api import SECOND, format_go_duration
from credprovider.catalog import NODE_BIN_DIR, NODE_CONFIG, PLUGINS
from credprovider.entry import PLUGIN_MODULES
from credprovider.errors import CredproviderError
from credprovider.matching import ImageError, explain_pattern_mismatch, parse_image
from credprovider.redact import printable, safe_line
from credprovider.version import version_text

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=False))


def _mask(password: str, show: bool) -> str:
    from credprovider.redact import redact

    return password if show else redact(password)


# --- validate -----------------------------------------------------------------------------------------


def _cmd_validate(args: argparse.Namespace) -> int:
    from credprovider.config import ConfigError, binary_problems, lint_providers, load_config

    try:
        loaded = load_config(args.path)
    except ConfigError as exc:
        if args.json:
            _print_json({"valid": False, "error": str(exc), "errors": [str(exc)], "warnings": []})
        else:
            print(f"invalid: {exc}")
        return EXIT_FAILED
    errors = binary_problems(loaded, args.bin_dir) if args.bin_dir is not None else []
    warnings = lint_providers(loaded, args.bin_dir)
    names = [p.name or "" for p in loaded.providers]
    if args.json:
        _print_json(
            {
                "valid": not errors,
                "error": errors[0] if errors else None,
                "errors": errors,
                "warnings": warnings,
                "providers": names,
                "files": [str(f) for f in loaded.sources],
            }
        )
    else:
        shown = ", ".join(printable(name) for name in names)
        if errors:
            print(
                f"invalid: the config is well-formed ({len(names)} provider(s) from "
                f"{len(loaded.sources)} file(s): {shown}), but the bin dir is not ready"
            )
            for error in errors:
                print(f"error: {printable(error)}")
        else:
            print(f"valid: {len(names)} provider(s) from {len(loaded.sources)} file(s): {shown}")
        for warning in warnings:
            print(f"warning: {printable(warning)}")
    return EXIT_FAILED if errors else EXIT_OK


# --- get ----------------------------------------------------------------------------------------------


def _read_annotations(values: list[str]) -> dict[str, str]:
    annotations = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise SystemExit(f"credprovider get: --sa-annotation {value!r} is not key=value")
        annotations[key] = val
    return annotations


def _provider_json(report: Any, show: bool) -> dict[str, Any]:
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
                key: {"username": entry.username, "password": _mask(entry.password, show)}
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


def _print_report(report: Any, show: bool) -> None:
    for provider in report.providers:
        if not provider.matched:
            print(f"- {printable(provider.name)}: matchImages do not match {report.image}: not run")
            for pattern, reason in provider.misses:
                print(f"    {pattern!r}: {reason}")
            continue
        if provider.skipped:
            print(f"- {printable(provider.name)}: matched, not run: {provider.skipped}")
            continue
        status = f"exit {provider.exit_code}" if provider.exit_code is not None else "not finished"
        print(
            f"- {printable(provider.name)}: matched, ran in {provider.seconds * 1000:.0f} ms, {status}"
        )
        if provider.error:
            print(f"    the kubelet uses nothing from it: {safe_line(provider.error)}")
            continue
        for line in provider.decisions:
            print(f"    said: {safe_line(line)}")
        response = provider.response
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
                    f"{_mask(entry.password, show)})"
                )
            else:
                print(f"    ignored: {key}: {provider.ignored_keys[key]}")


def _timeout_seconds(text: str) -> float:
    """``--timeout``: a Go duration (``30s``, ``1m``, ``1m30s``), or a plain number of seconds."""
    from credprovider.api import SECOND, DurationError, parse_go_duration

    try:
        seconds = float(text) if text.replace(".", "", 1).isdigit() else None
        if seconds is None:
            seconds = parse_go_duration(text) / SECOND
    except DurationError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (for example 30s or 1m)") from None
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not between 0s and 1h")
    return seconds


def _node_default(given: str | None, default: str, flag: str) -> str | None:
    """``given``, else the standard node path when it exists; ``None`` (and one line) if neither."""
    if given:
        return given
    if Path(default).exists():
        return default
    print(f"credprovider get: give {flag} (nothing at the default {default})", file=sys.stderr)
    return None


def _cmd_get(args: argparse.Namespace) -> int:
    from credprovider.config import ConfigError, load_config
    from credprovider.lookup import kubelet_lookup

    args.config = _node_default(args.config, NODE_CONFIG, "--config")
    args.bin_dir = args.config and _node_default(args.bin_dir, NODE_BIN_DIR, "--bin-dir")
    if not (args.config and args.bin_dir):
        return EXIT_USAGE

    try:
        image = parse_image(args.image).name
    except ImageError as exc:
        print(f"credprovider get: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        loaded = load_config(args.config)
    except ConfigError as exc:
        print(
            f"credprovider get: the kubelet would not start with this config: {exc}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        token = (
            Path(args.sa_token_file).read_text(encoding="utf-8").strip()
            if args.sa_token_file
            else ""
        )
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        print(
            f"credprovider get: cannot read --sa-token-file {args.sa_token_file}: {reason}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    report = kubelet_lookup(
        loaded,
        args.bin_dir,
        image,
        token,
        _read_annotations(args.sa_annotation),
        timeout=args.timeout,
    )
    found = report.credentials
    if args.json:
        _print_json(
            {
                "image": image,
                "credentialsFound": bool(found),
                "providers": [_provider_json(p, args.show_password) for p in report.providers],
            }
        )
    else:
        print(f"image {image} (as the kubelet passes it)")
        _print_report(report, args.show_password)
        if found:
            keys = ", ".join(f"{key} from {name}" for name, key, _ in found)
            print(f"result: the kubelet would try {len(found)} credential(s): {keys}")
        else:
            print(
                "result: the kubelet would pull WITHOUT credentials from these providers "
                "(node docker config and pull secrets may still apply)"
            )
    return EXIT_OK if found else EXIT_FAILED


# --- explain / match ----------------------------------------------------------------------------------


def _cmd_explain(args: argparse.Namespace) -> int:
    from credprovider.explain import explain_image

    try:
        result = explain_image(args.image, args.provider)
    except ImageError as exc:
        print(f"credprovider explain: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        _print_json(result)
    else:
        print(f"image:    {result['image']}")
        print(f"registry: {result['registry']}")
        claim = result["plugin"] or "none"
        print(
            f"provider: {claim}{'' if result['recognized'] else ' (not its registry)' if result['plugin'] else ''}"
        )
        print(f"it would: {result['action']}")
    return EXIT_OK


def _cmd_match(args: argparse.Namespace) -> int:
    try:
        image = parse_image(args.image).name
    except ImageError:
        image = args.image  # a key or URL-like string: matched as given, as the kubelet would
    reason = explain_pattern_mismatch(args.pattern, image)
    print("match" if reason is None else f"no match: {reason}")
    if image != args.image:
        print(f"(image as the kubelet passes it: {image})")
    return EXIT_OK if reason is None else EXIT_FAILED


# --- install / migrate --------------------------------------------------------------------------------


def _cmd_install(args: argparse.Namespace) -> int:
    from credprovider.config import ConfigError
    from credprovider.install import InstallError, install

    keys = [key.strip() for key in args.providers.split(",") if key.strip()]
    try:
        result = install(
            args.bin_dir,
            args.config_out,
            keys,
            args.node_file,
            args.copy,
            args.force,
            args.target,
        )
    except (InstallError, ConfigError, OSError) as exc:
        print(f"credprovider install: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        _print_json(
            {
                "actions": result.actions,
                "warnings": result.warnings,
                "kubeletFlags": result.kubelet_flags,
            }
        )
        return EXIT_OK
    for action in result.actions:
        print(action)
    for warning in result.warnings:
        print(f"warning: {warning}")
    print("add to the kubelet's flags:")
    for flag in result.kubelet_flags:
        print(f"  {flag}")
    return EXIT_OK


def _read_text(path: str) -> str:
    from credprovider.install import InstallError

    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InstallError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise InstallError(f"{path}: {exc.strerror or exc}") from None


def _cmd_migrate(args: argparse.Namespace) -> int:
    from credprovider.install import InstallError
    from credprovider.migrate import flags_from_file, plan_migration

    if not (args.kubelet_flags or args.kubelet_flags_file or args.kubelet_config):
        print(
            "credprovider migrate: nothing to read: give the kubelet's flags "
            '(--kubelet-flags="..." or --kubelet-flags-file /var/lib/kubelet/kubeadm-flags.env) '
            "and/or --kubelet-config FILE",
            file=sys.stderr,
        )
        return EXIT_USAGE
    providers = (
        [key.strip() for key in args.providers.split(",") if key.strip()]
        if args.providers
        else None
    )
    try:
        flags = [args.kubelet_flags]
        for path in args.kubelet_flags_file or []:
            text = _read_text(path)
            try:
                flags.append(flags_from_file(text))
            except InstallError as exc:
                raise InstallError(f"{path}: {exc}") from None
        config_text = _read_text(args.kubelet_config) if args.kubelet_config else ""
        plan = plan_migration(
            " ".join(flags), config_text, args.bin_dir, args.config_out, providers
        )
    except InstallError as exc:
        print(f"credprovider migrate: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        _print_json(
            {
                "providers": plan.providers,
                "removeFlags": plan.remove,
                "addFlags": plan.add,
                "config": plan.config,
                "notes": plan.notes,
            }
        )
        return EXIT_OK
    if plan.remove:
        print("remove from the kubelet:")
        for flag in plan.remove:
            print(f"  {flag}")
    if plan.add:
        print("add to the kubelet:")
        for flag in plan.add:
            print(f"  {flag}")
    if plan.config:
        print(f"write {args.config_out} (and install the plugins with credprovider install):")
        print(plan.config)
    for note in plan.notes:
        print(f"note: {note}")
    return EXIT_OK


# --- parser -------------------------------------------------------------------------------------------


class _PrintVersion(argparse.Action):
    """--version as the plugins print it (argparse's own action would re-wrap the lines)."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        sys.stdout.write(version_text("credprovider"))
        parser.exit()


# The examples in --help: the first plugin's first registry form and pattern.
_EXAMPLE = next(iter(PLUGINS.values()))
_EXAMPLE_IMAGE = next(iter(_EXAMPLE.sample_images.values()))
_EXAMPLE_PATTERN = _EXAMPLE.match_images[0]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="credprovider",
        epilog=(
            "The plugins run under this name too: 'credprovider <plugin-name> [args]' is the "
            f"plugin itself (plugin names: {', '.join(PLUGIN_MODULES)}); for example "
            f"'credprovider {_EXAMPLE.name} --help'."
        ),
        description=(
            "Operator tool for the kubelet image credential provider plugins "
            f"{', '.join(PLUGIN_MODULES)}. Start with 'credprovider get IMAGE --config ... "
            "--bin-dir ...' to see why a pull got (or did not get) credentials."
        ),
    )
    parser.add_argument(
        "--version",
        action=_PrintVersion,
        nargs=0,
        help="print the version, git commit, build date, architecture, Python and OpenSSL versions",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    validate = sub.add_parser(
        "validate",
        help="check a CredentialProviderConfig exactly as the kubelet does at start-up",
        description=(
            "Read PATH (a file, or a directory whose *.json/*.yaml/*.yml files are merged in "
            "lexicographic order, as kubelet >= 1.34 does), decode it strictly and validate it with "
            "the kubelet's rules and error messages. Then warn about what the kubelet accepts but will "
            "not do what you meant ('*' in a path, defaultCacheDuration 0, missing binaries, host forms "
            "the matchImages miss, unread annotation keys). Exit 0 if the kubelet would start, 1 if not."
        ),
    )
    validate.add_argument(
        "path", help="config file or directory (--image-credential-provider-config)"
    )
    validate.add_argument("--bin-dir", help="also check the plugin binaries in this directory")
    validate.add_argument("--json", action="store_true", help="one JSON object on stdout")
    validate.set_defaults(handler=_cmd_validate)

    get = sub.add_parser(
        "get",
        help="get credentials for an image the way the kubelet would, and explain the result",
        description=(
            "Normalize IMAGE as the kubelet does (nginx -> docker.io/library/nginx, tag and digest "
            "dropped), select providers by matchImages in config order, run each matching plugin with "
            "its args and env (inheriting this environment) and a 60s timeout, decode its answer "
            "strictly, and report which returned key the kubelet would use for IMAGE and why the "
            "others would not apply. Passwords are masked unless --show-password. Exit 0 when the "
            "kubelet would end up with credentials, 1 when not."
        ),
    )
    get.add_argument("image", help=f"e.g. {_EXAMPLE_IMAGE}:v1")
    get.add_argument(
        "--config",
        help=f"the kubelet's credential provider config (default: {NODE_CONFIG}, if it exists)",
    )
    get.add_argument(
        "--bin-dir", help=f"the kubelet's plugin bin dir (default: {NODE_BIN_DIR}, if it exists)"
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
    get.add_argument("--show-password", action="store_true", help="print passwords in clear")
    get.add_argument(
        "--timeout",
        type=_timeout_seconds,
        default=60.0,
        metavar="DURATION",
        help="per-plugin timeout, a Go duration such as 30s or 1m (default and kubelet: 1m0s)",
    )
    get.add_argument("--json", action="store_true", help="one JSON object on stdout")
    get.set_defaults(handler=_cmd_get)

    explain = sub.add_parser(
        "explain",
        help="offline: which plugin claims an image and what it would do",
        description="No network and no cloud SDK: only the plugins' registry recognition rules.",
    )
    explain.add_argument("image")
    explain.add_argument(
        "--provider",
        choices=sorted(PLUGINS),
        help="ask about this provider only (recognized says if it is its registry)",
    )
    explain.add_argument("--json", action="store_true", help="one JSON object on stdout")
    explain.set_defaults(handler=_cmd_explain)

    match = sub.add_parser(
        "match",
        help="does a matchImages pattern (or response auth key) match an image?",
        description=(
            "Apply the kubelet's matchImages rule: ports must be equal, hosts must have the same "
            "number of labels, '*' matches within one label, and the image path must start with the "
            "pattern's path. The image is normalized as the kubelet does (nginx -> "
            "docker.io/library/nginx, tag and digest dropped); a miss says which rule failed and, "
            "for a port, the pattern to add. Exit 0 on match, 1 on no match, 2 on usage error."
        ),
    )
    match.add_argument("pattern", help=f"e.g. '{_EXAMPLE_PATTERN}'")
    match.add_argument("image", help=f"e.g. {_EXAMPLE_IMAGE}")
    match.set_defaults(handler=_cmd_match)

    inst = sub.add_parser(
        "install",
        help="install the plugins into a bin dir and write a complete kubelet config",
        description=(
            "Link the plugin names in DIR to this bundle's executable (or, with --copy, copy the "
            "bundle into DIR/.credprovider and link to the copy), write a CredentialProviderConfig "
            "with complete matchImages, validate it, and print the kubelet flags. Idempotent; a "
            "different existing file is only replaced with --force."
        ),
    )
    inst.add_argument(
        "--bin-dir",
        required=True,
        help=f"the kubelet's --image-credential-provider-bin-dir (usually {NODE_BIN_DIR})",
    )
    inst.add_argument(
        "--config-out",
        required=True,
        help=f"the config file to write (usually {NODE_CONFIG})",
    )
    inst.add_argument(
        "--providers",
        default=",".join(PLUGINS),
        help=f"comma list of {', '.join(PLUGINS)} (default: %(default)s)",
    )
    for plugin in (p for p in PLUGINS.values() if p.node_file_arg):
        inst.add_argument(
            f"--{plugin.key}-config",
            dest="node_file",
            help=f"the node file passed to {plugin.name} (default: {plugin.node_file_arg})",
        )
    inst.add_argument(
        "--copy", action="store_true", help="copy the bundle instead of linking to it"
    )
    inst.add_argument("--force", action="store_true", help="replace different existing files")
    inst.add_argument("--target", help="the credprovider executable to link to (default: this one)")
    inst.add_argument("--json", action="store_true", help="one JSON object on stdout")
    inst.set_defaults(handler=_cmd_install)

    migrate = sub.add_parser(
        "migrate",
        help="move a node from the in-tree cloud providers to these plugins",
        description=(
            "Read a kubelet's old command line and/or KubeletConfiguration (--cloud-provider, "
            + "".join(f"--{flag}, " for p in PLUGINS.values() for flag in p.implied_by_flags)
            + "feature gates) and print the flags to remove and add and the "
            "CredentialProviderConfig to write (reusing the node files the old flags name)."
        ),
    )
    migrate.add_argument(
        "--kubelet-flags",
        default="",
        metavar='"FLAGS"',
        help="the kubelet's flags, quoted "
        f'(--kubelet-flags="--cloud-provider={_EXAMPLE.in_tree_clouds[0]} ..."); '
        "--flag=value and --flag value both work",
    )
    migrate.add_argument(
        "--kubelet-flags-file",
        action="append",
        metavar="FILE",
        help="a file holding the kubelet's flags: kubeadm's /var/lib/kubelet/kubeadm-flags.env, "
        "/etc/default/kubelet, /etc/sysconfig/kubelet, or a systemd unit or drop-in "
        "(Environment= and ExecStart=); repeatable",
    )
    migrate.add_argument("--kubelet-config", help="a KubeletConfiguration file")
    migrate.add_argument(
        "--providers",
        metavar="LIST",
        help=f"the clouds to configure, comma-separated ({', '.join(PLUGINS)}): needed with "
        "--cloud-provider=external, which does not say the cloud; default: what the flags say",
    )
    migrate.add_argument(
        "--bin-dir",
        default=NODE_BIN_DIR,
        help="the plugin bin dir for the flags to add (default: %(default)s)",
    )
    migrate.add_argument(
        "--config-out",
        default=NODE_CONFIG,
        help="where the config will be written, for the flags to add (default: %(default)s)",
    )
    migrate.add_argument("--json", action="store_true", help="one JSON object on stdout")
    migrate.set_defaults(handler=_cmd_migrate)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        sys.exit(EXIT_USAGE)
    try:
        code = args.handler(args)
    except CredproviderError as exc:  # each handler says its own failures; this is the backstop
        sys.stderr.write(f"credprovider: {safe_line(str(exc))}\n")
        code = 1
    sys.exit(code)

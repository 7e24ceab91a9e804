"""``credprovider validate``: a credential provider config checked as the kubelet checks it, plus the
warnings the kubelet does not give."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from credprovider.runtime.redact import printable
from credprovider.tool.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    VALIDATE_EXIT_STATUS,
    Subcommands,
    cannot_check,
    node_default,
    node_paths,
    print_json,
)
from credprovider.tool.kubeconfig.model import ConfigError
from credprovider.tool.node.access import UnreadableError

if TYPE_CHECKING:
    from credprovider.tool.node.discovery import NodeView

# Providers named on the verdict line; a config of ten thousand is a count, not a wall of names.
SHOWN_NAMES = 20


def _takes_token_attributes(path: str, view: NodeView | None) -> bool:
    """Whether the kubelet that reads ``path`` takes ``tokenAttributes``: this node's, as doctor
    decides it (its version, its feature gate), when ``path`` is its config; else the current
    kubelet's rules (a file anywhere)."""
    from credprovider.tool.node.discovery import discover, takes_token_attributes_here

    view = view or discover()
    config = view.settings.provider_config
    try:
        here = config is not None and os.path.samefile(view.host_path(config), path)
    except (OSError, ValueError):
        here = False
    return takes_token_attributes_here(view) if here else True


def _cmd_validate(args: argparse.Namespace) -> int:
    from credprovider.tool.images.bindir import BinaryCheck, check_binaries, texts
    from credprovider.tool.kubeconfig.lint import lint_providers
    from credprovider.tool.kubeconfig.validate import load_config
    from credprovider.tool.node.discovery import discover

    view: NodeView | None = None
    if args.path is None:  # this node's config and, unless given, its bin dir
        view = discover()
        node = node_paths("validate", view)
        args.path = node_default("validate", None, "PATH", node, bin_dir=False)
        if args.path is None:
            return EXIT_USAGE
        if args.bin_dir is None and node.config == args.path:
            args.bin_dir = node_default("validate", None, "--bin-dir", node, bin_dir=True)
    try:
        loaded = load_config(args.path)
        if any(provider.tokenAttributes is not None for provider in loaded.providers):
            loaded = load_config(args.path, _takes_token_attributes(args.path, view))
        checked = (
            check_binaries(loaded, args.bin_dir) if args.bin_dir is not None else BinaryCheck()
        )
        warnings = texts(checked.warnings) + lint_providers(loaded, args.bin_dir)
    except ConfigError as exc:
        if args.json:
            print_json(
                {
                    "valid": False,
                    "error": str(exc),
                    "errors": [str(exc)],
                    "hint": exc.hint,
                    "warnings": [],
                }
            )
        else:
            print(f"invalid: {exc.describe()}")
        return EXIT_FAILED
    except UnreadableError as exc:
        return cannot_check("validate", exc, args.json)
    errors = texts(checked.errors)
    names = [p.name or "" for p in loaded.providers]
    if args.json:
        print_json(
            {
                "valid": not errors,
                "error": errors[0] if errors else None,
                "errors": errors,
                "warnings": warnings,
                "checked": texts(checked.proven),
                "providers": names,
                "files": [str(f) for f in loaded.sources],
            }
        )
    else:
        shown = ", ".join(printable(name) for name in names[:SHOWN_NAMES])
        if len(names) > SHOWN_NAMES:
            shown += f" and {len(names) - SHOWN_NAMES} more (--json lists every one)"
        if errors:
            print(
                f"invalid: the config is well-formed ({len(names)} provider(s) from "
                f"{len(loaded.sources)} file(s): {shown}), but not every provider can run"
            )
            for error in errors:
                print(f"error: {printable(error)}")
        else:
            print(f"valid: {len(names)} provider(s) from {len(loaded.sources)} file(s): {shown}")
        for line in texts(checked.proven):
            print(f"checked: {printable(line)}")
        for warning in warnings:
            print(f"warning: {printable(warning)}")
    return EXIT_FAILED if errors else EXIT_OK


def register(sub: Subcommands) -> None:
    validate = sub.add_parser(
        "validate",
        help="check a CredentialProviderConfig exactly as the kubelet does at start-up",
        description=(
            "Read PATH (a file, or a directory whose *.json/*.yaml/*.yml files are merged in "
            "lexicographic order, as kubelet >= 1.34 does), decode it strictly and validate it with "
            "the kubelet's rules and error messages. With --bin-dir, also start every provider's "
            "binary the way the kubelet does (its args, the config's env over this environment, "
            "stdin a pipe) without contacting a cloud: credprovider must answer --version with its "
            "version line; another plugin must at least execute and refuse an empty request. Then "
            "warn about what the kubelet accepts but will not do what you meant ('*' in a path, "
            "defaultCacheDuration 0, host forms the matchImages miss, unread annotation keys, a "
            "deadline past the kubelet's 60s kill). " + VALIDATE_EXIT_STATUS
        ),
    )
    validate.add_argument(
        "path",
        nargs="?",
        help="config file or directory (--image-credential-provider-config); default: the one "
        "this node's kubelet uses (found as doctor finds it), with its bin dir",
    )
    validate.add_argument(
        "--bin-dir",
        help="also check the plugin binaries in this directory (--image-credential-provider-bin-dir) "
        "by starting each one offline; default: the config alone is checked (with no PATH: the "
        "node's bin dir)",
    )
    validate.add_argument("--json", action="store_true", help="one JSON object on stdout")
    validate.set_defaults(handler=_cmd_validate)

"""``credprovider doctor``: the node's credential chain checked as it really is, with no flags."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from credprovider.runtime.excerpt import quoted
from credprovider.runtime.redact import printable
from credprovider.tool.commands.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    Subcommands,
    node_root,
    print_json,
    wrong_kind,
)
from credprovider.tool.node.root import NodeRoot

if TYPE_CHECKING:
    from credprovider.tool.doctor.model import Check, Diagnosis

_MARK = {"pass": "ok  ", "warn": "WARN", "fail": "FAIL", "info": "info"}


def _print_checks(checks: list[Check]) -> None:
    """What concerns the node first, by area; then each provider's checks, in config order,
    by area (most important first: what stops every pull, then what stops some)."""
    from credprovider.tool.doctor.model import AREAS, Status

    providers = list(dict.fromkeys(c.provider for c in checks if c.provider))
    for provider in ["", *providers]:
        mine = sorted(
            (c for c in checks if c.provider == provider), key=lambda c: AREAS.index(c.area)
        )
        if provider:
            print(f"provider {provider}:")
        current = None
        for check in mine:
            if not provider and check.area != current:
                current = check.area
                print(f"{current}:")
            area = f"{check.area:<8} " if provider else ""  # a long area still gets its space
            print(f"  {area}{_MARK[check.status]} {printable(check.message)}")
            if check.fix and check.status in (Status.FAIL, Status.WARN):
                print(f"       fix: {printable(check.fix)}")


def _cmd_doctor(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from credprovider.tool.doctor import ClusterAccess, diagnose
    from credprovider.tool.doctor.model import Status
    from credprovider.tool.node.discovery import discover

    # the node's filesystem must be there: an empty or missing --root would read another tree
    problem = wrong_kind(args.root, directory=True) or (
        "" if os.path.isdir(args.root) else "does not exist"
    )
    if problem:
        print(f"credprovider doctor: --root {quoted(args.root)} {problem}", file=sys.stderr)
        return EXIT_USAGE
    view = discover(root=node_root(args))
    overrides = {}
    if args.config:
        overrides["provider_config"] = args.config
    if args.bin_dir:
        overrides["bin_dir"] = args.bin_dir
    if overrides:
        view.settings = replace(view.settings, **overrides)
        view.found_by += " (with --config/--bin-dir given)"
    access = ClusterAccess(args.kubeconfig, args.node_name)
    diagnosis = diagnose(view, args.image or [], args.offline, access)
    _agent_files(view.root, diagnosis)
    status = EXIT_FAILED if diagnosis.failed else EXIT_USAGE if diagnosis.undecided else EXIT_OK
    if args.json:
        print_json(diagnosis.as_json(view))
        return status
    checks = diagnosis.checks
    _print_checks(checks)
    failed = sum(c.status is Status.FAIL for c in checks)
    warned = sum(c.status is Status.WARN for c in checks)
    verdict = "FAILED" if failed else "no verdict" if diagnosis.undecided else "healthy"
    print(f"{verdict}: {failed} failed, {warned} warning(s)")
    return status


def register(sub: Subcommands) -> None:
    doctor = sub.add_parser(
        "doctor",
        help="start here: check this node's whole credential chain, with no flags",
        description=(
            "Find the running kubelet (its flags, --config file and drop-ins, environment), or, "
            "with none running, the node's flag files and the known distribution layouts; then "
            "check the chain: the config decodes as the kubelet decodes it, has not changed since "
            "the kubelet started and is the one it loaded (the config hash metric on its read-only "
            "port), every plugin starts as the kubelet starts it (in its environment), each "
            "plugin's identity endpoint answers within 2s with a clock that agrees, the images of "
            "the node's static pods, of its running pods and of --image are claimed by a provider "
            "and get credentials (a dry run; secrets redacted; plugin caches read, never written), "
            "the caches are safe, what service-account providers need that the node cannot check, "
            "the kubelet's version and recent failed lookups (its log file or journal), and its "
            "pairing with a cloud controller manager (KEP-2395): --cloud-provider and the login "
            "gate from its flags, and from the API server, with the kubelet's own kubeconfig, "
            "whether the Node still has the uninitialized taint or no providerID. "
            "Changes nothing on the node. Exit status: 0 nothing failed (warnings do not fail), "
            "1 something failed, 2 usage, or no verdict: where the kubelet's config is could not "
            "be read as this user (run it as root)."
        ),
    )
    doctor.add_argument(
        "--root",
        default="/",
        help="the node's filesystem is mounted here (an image being built); paths are read under "
        "it, no plugin is run and no request sent (default: /, this node)",
    )
    doctor.add_argument(
        "--image",
        action="append",
        help="also dry-run this image (repeatable); default: the images of the static pods, of "
        "the pods the kubelet runs and of crictl images",
    )
    doctor.add_argument("--config", help="the credential provider config (default: discovered)")
    doctor.add_argument("--bin-dir", help="the plugins' directory (default: discovered)")
    doctor.add_argument(
        "--offline",
        action="store_true",
        help="run no plugin and send no request (no identity endpoint, not the kubelet's port): "
        "match images against the config only",
    )
    doctor.add_argument(
        "--kubeconfig",
        help="read the Node object with this kubeconfig (default: the running kubelet's own "
        "--kubeconfig, which may get its own Node; a standalone kubelet has none)",
    )
    doctor.add_argument(
        "--node-name",
        help="the Node's name (default: the kubelet's --hostname-override, else the host name)",
    )
    doctor.add_argument("--json", action="store_true", help="one JSON object on stdout")
    doctor.set_defaults(handler=_cmd_doctor)


def _agent_files(root: NodeRoot, diagnosis: Diagnosis) -> None:
    """What the chart's agent wrote on this node, still as it wrote it (agent/rewritten.py): a
    warning naming each file a platform (or a hand) wrote again, the way back in its fix."""
    from credprovider.tool.agent.rewritten import agent_files
    from credprovider.tool.doctor.model import INFO, PASS, WARN

    found = agent_files(root)
    if found is None:
        return
    if found.unfinished:
        diagnosis.add(
            "config",
            WARN,
            f"a credprovider agent run was killed part way (its journal {found.unfinished} is "
            "left): the kubelet's files may hold half of its change",
            "the agent's next run finishes it: delete the agent's pod on this node to restart it",
        )
    if found.problem:
        diagnosis.add("config", INFO if found.hidden else WARN, found.problem)
    elif found.changed:
        diagnosis.add(
            "config",
            WARN,
            f"{', '.join(found.changed)} no longer holds what the credprovider agent wrote: the "
            "platform (or a hand) wrote it again, at boot on GKE, EKS, kOps, Bottlerocket, Talos "
            "and OpenShift, and the kubelet pulls without the agent's providers until they are back",
            "the agent's pod merges them again when it starts (delete the agent's pod on this node "
            "to restart it); for a change that lasts, the platform's own way (docs/platforms.md)",
        )
    elif found.written:
        diagnosis.add(
            "config",
            PASS,
            f"what the credprovider agent wrote is as it wrote it ({found.written} files)",
        )
